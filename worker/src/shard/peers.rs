//! The peers of one shard by certificate (`cv_net::peers` is the master's, over quinn): a
//! revoked certificate is refused at the hello and its connections are closed when the list
//! changes (the control thread hands each shard the list it fetched from the master); a client
//! or admin certificate holds at most `per_identity` connections, so one identity cannot take
//! every slot of `[worker] max_connections`. Shard-local: one thread, no locks.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;

use cv_net::identity::PeerCert;
use cv_net::revoked::Revoked;
use cv_rt::quic::{Connection, VarInt};
use cv_wire::ErrorCode;

/// A connection admitted by [`ShardPeers::join`]; it leaves when this drops.
#[derive(Debug)]
pub(crate) struct Admitted<'a> {
    peers: &'a ShardPeers,
    id: usize,
}

impl Drop for Admitted<'_> {
    fn drop(&mut self) {
        self.peers.live.borrow_mut().remove(&self.id);
    }
}

#[derive(Debug)]
pub(crate) struct ShardPeers {
    revoked: RefCell<Arc<Revoked>>,
    live: RefCell<HashMap<usize, (Rc<PeerCert>, Connection)>>,
    per_identity: usize,
}

impl ShardPeers {
    pub(crate) fn new(revoked: Arc<Revoked>, per_identity: usize) -> ShardPeers {
        ShardPeers { revoked: RefCell::new(revoked), live: RefCell::default(), per_identity: per_identity.max(1) }
    }

    /// Admits a connection whose hello proved `cert`, or says why not. It counts until the
    /// returned guard drops (a hello abandoned at its deadline leaves nothing behind).
    pub(crate) fn join<'a>(
        &'a self,
        cert: &Rc<PeerCert>,
        conn: &Connection,
    ) -> Result<Admitted<'a>, (ErrorCode, String)> {
        let mut live = self.live.borrow_mut();
        cv_net::peers::admit(&self.revoked.borrow(), cert, live.values().map(|(c, _)| &**c), self.per_identity)?;
        live.insert(conn.stable_id(), (cert.clone(), conn.clone()));
        Ok(Admitted { peers: self, id: conn.stable_id() })
    }

    /// Puts `list` in force and closes the connections it revokes; returns how many.
    pub(crate) fn update(&self, list: Arc<Revoked>) -> usize {
        let mut closed = 0;
        self.live.borrow_mut().retain(|_, (cert, conn)| match list.refuses(cert) {
            Some(why) => {
                tracing::warn!(peer = %conn.remote_address(), %why, "closing the connection of a revoked certificate");
                conn.close(VarInt::from_u32(cv_net::peers::CLOSE_REVOKED), b"certificate revoked");
                closed += 1;
                false
            }
            None => true,
        });
        *self.revoked.borrow_mut() = list;
        closed
    }
}
