//! Which certificate each member of the Raft group holds, so that a master's Raft messages are
//! taken only from the peer whose certificate names that member (docs/security.md, "Raft
//! between masters"). The group's membership (set by an admin: `peers`, `cvctl master add`)
//! records each member's address; the certificate that answers there when this master dials it
//! is that member's. A message claiming member `id` (the vote's node, a probe's `from`) from a
//! peer whose master certificate names another is refused `PermissionDenied`, so a stolen
//! master key speaks only as its own member, never as the leader or another voter.
//!
//! Not bound: the role-less node certificate of older clusters (one for every master, so it
//! cannot tell them apart), and ids that are not members (a master about to be added asks the
//! group's term as its future id; a master that knows no membership yet, before the leader's
//! first entries reach it, has no address to check against). Speaking as a non-member takes
//! no member's voice: it is what the same certificate may do as itself.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use cv_master_raft::RaftMaster;
use cv_net::identity::{CertRole, PeerCert};
use cv_net::rpc::{Conn, Peer};
use cv_wire::ErrorCode;
use cv_wire::Limits;
use cv_wire::msg::Role;

use super::errors::Fail;

/// A member whose certificate did not match, or could not be learnt, is dialed again at most
/// this often (a peer claiming it cannot make this master dial out at its rate).
const LEARN_AGAIN: Duration = Duration::from_secs(1);
/// How long learning a member's certificate may take.
const DIAL: Duration = Duration::from_secs(1);

/// See the module.
#[derive(Debug)]
pub struct MemberCerts {
    endpoint: quinn::Endpoint,
    node: String,
    known: Mutex<HashMap<u64, Known>>,
}

#[derive(Debug, Clone)]
struct Known {
    role: Option<CertRole>,
    at: Instant,
}

impl MemberCerts {
    /// Dials from `endpoint` (the master's client endpoint) as `node`.
    pub fn new(endpoint: quinn::Endpoint, node: String) -> MemberCerts {
        MemberCerts { endpoint, node, known: Mutex::default() }
    }

    fn known(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Known>> {
        self.known.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// This master dialed member `id` and `conn` answered: its certificate is the member's.
    pub fn learnt(&self, id: u64, conn: &Conn) {
        if let Ok(cert) = PeerCert::of_identity(conn.quinn().peer_identity()) {
            self.known().insert(id, Known { role: Some(cert.role), at: Instant::now() });
        }
    }

    /// Whether `peer` may speak as member `id` of `raft`'s group.
    pub async fn check(&self, raft: &RaftMaster, peer: &Peer, id: u64) -> Result<(), Fail> {
        let CertRole::Master(name) = &peer.cert.role else {
            return Ok(()); // the shared node certificate of older clusters: nothing to bind
        };
        if id == raft.node_id() {
            return Err(refused(format!("{} speaks as member {id}, which is this master", peer.cert)));
        }
        let named = |k: &Known| matches!(&k.role, Some(CertRole::Master(n)) if n == name);
        // Every append and heartbeat passes here: answered under the lock, nothing copied.
        match self.known().get(&id) {
            Some(k) if named(k) => return Ok(()),
            Some(k) if k.at.elapsed() < LEARN_AGAIN => return Err(mismatch(peer, id, k)),
            _ => {}
        }
        let (_, members) = raft.members();
        let Some((_, addr, _)) = members.iter().find(|(m, _, _)| *m == id) else {
            // Not a member (a master about to be added asks the group's term), or no
            // membership known yet: no member's voice to take, nothing to check against.
            return Ok(());
        };
        let learnt = self.learn(id, addr).await;
        match learnt {
            Some(k) if named(&k) => Ok(()),
            Some(k) => Err(mismatch(peer, id, &k)),
            None => Err(Fail::new(
                ErrorCode::Unavailable,
                format!("cannot check that {} is member {id}: its address {addr} does not answer", peer.cert),
            )),
        }
    }

    /// Dials member `id` at `addr` and records the certificate it presents.
    async fn learn(&self, id: u64, addr: &str) -> Option<Known> {
        let failed = Known { role: None, at: Instant::now() };
        let Ok(sock) = addr.parse::<SocketAddr>() else {
            self.known().insert(id, failed);
            return None;
        };
        let dial = Conn::connect(&self.endpoint, sock, Role::Master, &self.node, Limits::DEFAULT);
        match tokio::time::timeout(DIAL, dial).await {
            Ok(Ok(conn)) => {
                self.learnt(id, &conn);
                conn.quinn().close(0u32.into(), b"checked");
                self.known().get(&id).cloned()
            }
            _ => {
                self.known().insert(id, failed);
                None
            }
        }
    }
}

fn refused(msg: String) -> Fail {
    Fail::new(ErrorCode::PermissionDenied, msg)
}

fn mismatch(peer: &Peer, id: u64, k: &Known) -> Fail {
    match &k.role {
        Some(role) => refused(format!("{} speaks as member {id}, whose certificate is a {role}", peer.cert)),
        None => Fail::new(
            ErrorCode::Unavailable,
            format!("cannot check that {} is member {id}: its address did not answer", peer.cert),
        ),
    }
}
