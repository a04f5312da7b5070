//! The peers of one quinn server by certificate ([`crate::rpc::serve_admitting`]): a revoked
//! certificate is refused at the hello and its live connections are closed when the list
//! changes; a client or admin certificate holds at most so many connections at once, so one
//! identity cannot take a server's every slot. Node certificates (workers, masters) are not
//! capped: a cluster sizes them.

use crate::identity::PeerCert;
use crate::revoked::Revoked;
use cv_wire::ErrorCode;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};

/// Whether a peer proving `cert` may join a server whose admitted peers hold `live`: not if
/// `revoked` refuses it, nor a client or admin certificate already holding `per_identity`
/// connections (the code to answer with, and why). The master's registry and a shard's ask it.
pub fn admit<'a>(
    revoked: &Revoked,
    cert: &PeerCert,
    live: impl Iterator<Item = &'a PeerCert>,
    per_identity: usize,
) -> Result<(), (ErrorCode, String)> {
    if let Some(why) = revoked.refuses(cert) {
        return Err((ErrorCode::PermissionDenied, why));
    }
    if !cert.role.is_node() {
        let held = live.filter(|c| c.serial == cert.serial).count();
        if held >= per_identity {
            let why = format!("{cert} holds {held} connections here, its limit; close some first");
            return Err((ErrorCode::LimitExceeded, why));
        }
    }
    Ok(())
}

/// A connection admitted by [`Peers::join`]; it leaves the registry when this drops.
#[derive(Debug)]
pub struct Admitted {
    peers: Arc<Peers>,
    id: usize,
}

impl Drop for Admitted {
    fn drop(&mut self) {
        self.peers.live().remove(&self.id);
    }
}

/// Application close code of a connection whose certificate was revoked.
pub const CLOSE_REVOKED: u32 = 3;

/// Connections one client or admin certificate may hold at a master by default.
pub const PER_IDENTITY: usize = 4096;

/// See the module.
#[derive(Debug)]
pub struct Peers {
    revoked: RwLock<Arc<Revoked>>,
    live: Mutex<HashMap<usize, (PeerCert, quinn::Connection)>>,
    per_identity: usize,
}

impl Default for Peers {
    fn default() -> Self {
        Peers::new(PER_IDENTITY)
    }
}

impl Peers {
    /// No list yet; at most `per_identity` connections per client or admin certificate.
    pub fn new(per_identity: usize) -> Peers {
        Peers { revoked: RwLock::default(), live: Mutex::default(), per_identity: per_identity.max(1) }
    }

    fn live(&self) -> std::sync::MutexGuard<'_, HashMap<usize, (PeerCert, quinn::Connection)>> {
        self.live.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The list in force.
    pub fn revoked(&self) -> Arc<Revoked> {
        self.revoked.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Puts `list` in force unless it is the generation held, and closes every live connection
    /// it revokes. Returns how many were closed. (A master's list can go back a generation:
    /// a revocation its journal could not make durable is undone.)
    pub fn update(&self, list: Revoked) -> usize {
        let list = Arc::new(list);
        {
            let mut held = self.revoked.write().unwrap_or_else(|p| p.into_inner());
            if list.generation() == held.generation() {
                return 0;
            }
            *held = list.clone();
        }
        // The list is stored before the connections are read: a hello that joins after this
        // lock sees the new list (`join` checks under the same lock).
        let mut live = self.live();
        let mut closed = 0;
        live.retain(|_, (cert, conn)| match list.refuses(cert) {
            Some(why) => {
                tracing::warn!(peer = %conn.remote_address(), %why, "closing the connection of a revoked certificate");
                conn.close(quinn::VarInt::from_u32(CLOSE_REVOKED), b"certificate revoked");
                closed += 1;
                false
            }
            None => true,
        });
        closed
    }

    /// Admits a connection whose hello proved `cert`, or says why not (the code to answer
    /// with, and the message). The connection counts until the returned guard drops: held by
    /// the task serving it, so a hello abandoned half-way (its deadline) leaves nothing behind.
    pub fn join(self: &Arc<Self>, cert: &PeerCert, conn: &quinn::Connection) -> Result<Admitted, (ErrorCode, String)> {
        let mut live = self.live();
        admit(&self.revoked(), cert, live.values().map(|(c, _)| c), self.per_identity)?;
        live.insert(conn.stable_id(), (cert.clone(), conn.clone()));
        Ok(Admitted { peers: self.clone(), id: conn.stable_id() })
    }
}
