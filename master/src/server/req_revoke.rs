//! `cvctl cert revoke` and the revocation list workers fetch: the list is replicated state;
//! every master refuses what it holds at the hello and closes those connections
//! ([`sync_peers`]); workers fetch it after each heartbeat (docs/security.md, "Revocation").

use super::errors::Fail;
use super::request::Req;
use super::service::MasterService;
use cv_master_core::MasterCore;
use cv_master_core::state::Revocation;
use cv_net::peers::Peers;
use cv_net::revoked::Revoked;
use cv_net::rpc::{Peer, Reply};
use cv_wire::ErrorCode;
use cv_wire::msg::{ListRevoked, RevokeCert, RevokeCertOk, RevokedCert, RevokedList};
use std::sync::Arc;
use std::time::Duration;

/// How often a master puts its replicated list in force (a revocation reaches followers
/// through Raft, so every master polls its own state rather than being told).
const SYNC_EVERY: Duration = Duration::from_millis(200);

/// Records a revocation (admin only: checked by the dispatcher).
pub(super) async fn revoke(s: &MasterService, peer: &Peer, q: Req<'_, RevokeCert>) -> Result<Reply, Fail> {
    let req = q.owned()?;
    let serial = match req.serial.trim() {
        "" => String::new(),
        text => cv_net::identity::normalize_serial(text).ok_or_else(|| {
            Fail::new(ErrorCode::InvalidArgument, format!("{text:?} is not a certificate serial number (hex)"))
        })?,
    };
    let name = req.name.trim();
    if !serial.is_empty() && serial == peer.cert.serial {
        return Err(Fail::new(ErrorCode::InvalidArgument, "this is the certificate making the request"));
    }
    let by = format!("{} (serial {})", peer.cert.name, peer.cert.serial);
    let backdate = cv_net::tls::NOT_BEFORE_BACKDATE.as_secs();
    // The core refuses a request naming both or neither.
    let entry = s.core.begin_revoke(&serial, name, &by, backdate)?.wait_async().await?;
    let generation = s.core.revoked_generation();
    tracing::warn!(serial = %entry.serial, name = %entry.name, %by, generation, "certificate revoked");
    // In force here at once; the other masters within `SYNC_EVERY` of applying it.
    sync_once(&s.core, &s.peers);
    Ok(q.reply(&RevokeCertOk { entry: wire(entry), generation }))
}

/// The list, unless the caller holds this generation (workers, masters, admins).
pub(super) fn list(s: &MasterService, q: Req<'_, ListRevoked>) -> Result<Reply, Fail> {
    let since = q.body.since.to_native();
    let (generation, entries) = s.core.revoked();
    let changed = since != generation;
    let entries = if changed { entries.into_iter().map(wire).collect() } else { Vec::new() };
    Ok(q.reply(&RevokedList { generation, changed, entries }))
}

fn wire(r: Revocation) -> RevokedCert {
    RevokedCert { serial: r.serial, name: r.name, issued_before: r.issued_before, at_ms: r.at_ms, by: r.by }
}

/// Puts the state's list in force if it changed; closes the connections it revokes.
fn sync_once(core: &MasterCore, peers: &Peers) {
    if core.revoked_generation() == peers.revoked().generation() {
        return;
    }
    let (generation, entries) = core.revoked();
    let entries: Vec<RevokedCert> = entries.into_iter().map(wire).collect();
    let closed = peers.update(Revoked::new(generation, &entries));
    if closed > 0 {
        tracing::warn!(closed, generation, "closed the connections of revoked certificates");
    }
}

/// Keeps this master's list in force until `stopped`.
pub(super) async fn sync_peers(
    core: Arc<MasterCore>,
    peers: Arc<Peers>,
    mut stopped: tokio::sync::watch::Receiver<bool>,
) {
    loop {
        sync_once(&core, &peers);
        tokio::select! {
            _ = tokio::time::sleep(SYNC_EVERY) => {}
            _ = stopped.changed() => return,
        }
    }
}
