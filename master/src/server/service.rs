//! The request dispatcher: one frame in, one reply out, every master-side kind of the catalogue.

use super::errors::Fail;
use super::request::Req;
use super::{replay, req_mounts, req_namespace, req_rename, req_workers};
use cv_master_core::MasterCore;
use cv_master_core::config::Clock;
use cv_net::rpc::{BoxFuture, Peer, Reply, Service};
use cv_wire::msg::TierCounters;
use cv_wire::msg::{MasterTimeOk, Ping, Pong, Role};
use cv_wire::{ErrorCode, Frame, Kind};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Serves a [`MasterCore`] to cv-net's [`cv_net::rpc::serve`].
#[derive(Debug)]
pub struct MasterService {
    pub(super) core: Arc<MasterCore>,
    pub(super) clock: Arc<dyn Clock>,
    /// Heartbeat period told to registering workers.
    pub(super) heartbeat_every: Duration,
    /// Each worker's latest tier counters: statistics, not state, so they are
    /// kept here and never journaled.
    pub(super) tiers: Mutex<HashMap<u64, (TierCounters, TierCounters)>>,
    /// Cache-mode mounts: metadata brought in from object storage.
    pub(super) ufs: Arc<super::ufs::UfsLayer>,
    /// Uploads of files under mounts.
    pub(super) exporter: Arc<super::export::Exporter>,
    /// Read a completion's tail back from its blocks before keeping it (`tail_check.rs`).
    pub(super) check_tails: bool,
    /// What may be mounted.
    pub(super) mount_policy: super::mount_policy::MountPolicy,
    /// Tails being read back from their blocks before they are kept.
    pub(super) tail_checks: Arc<super::tail_check::TailChecks>,
    /// Replies of recent mutations, for their retries.
    replays: replay::Replays,
    /// The connection each worker last registered or heartbeat on: when it closes, the
    /// worker is lost at once (see [`Service::closed`]).
    pub(super) worker_conns: Mutex<HashMap<u64, usize>>,
    /// Set when the master shuts down: the connections it closes then are not workers lost.
    pub(super) stopping: std::sync::atomic::AtomicBool,
    /// Under Raft: this master's node of the group (master/HA.md).
    pub(super) raft: Option<Arc<cv_master_raft::RaftMaster>>,
    /// Latency of open requests, for `/metrics`.
    pub(super) open_latency: cv_master_core::latency::Latency,
    /// The QUIC connections served, for `/metrics`.
    pub(super) quic: Arc<cv_net::conn_stats::ConnStats>,
    /// Sends queued block deletes at once (`push_deletes.rs`).
    pub(super) deletes_now: Arc<super::push_deletes::DeletesNow>,
    /// The keys block capabilities are signed with (`cv_net::capability`), handed to workers.
    caps: Mutex<cv_net::capability::KeySchedule>,
    /// Connected peers by certificate: revoked ones refused and cut off (`req_revoke.rs`),
    /// connections per identity capped.
    pub(super) peers: Arc<cv_net::peers::Peers>,
    /// Under Raft: the certificate each member holds (`raft_members.rs`).
    members: Option<Arc<super::raft_members::MemberCerts>>,
}

/// A new key every tenth of `lifetime`.
fn key_schedule(lifetime: Duration, group: Option<&[u8; 32]>) -> cv_net::capability::KeySchedule {
    cv_net::capability::KeySchedule::new((lifetime / 10).max(Duration::from_secs(1)), lifetime, group)
}

impl MasterService {
    pub(super) fn new(
        core: Arc<MasterCore>,
        clock: Arc<dyn Clock>,
        heartbeat_every: Duration,
        exporter: Arc<super::export::Exporter>,
        raft: Option<Arc<cv_master_raft::RaftMaster>>,
    ) -> Self {
        MasterService {
            core,
            clock,
            heartbeat_every,
            tiers: Mutex::new(HashMap::new()),
            ufs: Default::default(),
            exporter,
            check_tails: true,
            mount_policy: Default::default(),
            tail_checks: Default::default(),
            replays: Default::default(),
            worker_conns: Mutex::new(HashMap::new()),
            stopping: std::sync::atomic::AtomicBool::new(false),
            raft,
            open_latency: Default::default(),
            quic: Default::default(),
            deletes_now: Default::default(),
            caps: Mutex::new(key_schedule(Duration::from_secs(10 * 3600), None)),
            peers: Default::default(),
            members: None,
        }
    }

    /// Under Raft: Raft messages are checked against the certificate each member holds.
    pub(super) fn raft_members(mut self, members: Option<Arc<super::raft_members::MemberCerts>>) -> Self {
        self.members = members;
        self
    }

    /// At most `n` connections per client or admin certificate.
    pub(super) fn connections_per_identity(mut self, n: usize) -> Self {
        self.peers = Arc::new(cv_net::peers::Peers::new(n));
        self
    }

    /// Block capabilities good for `lifetime`, signed with keys derived from the group's
    /// secret if given (`[master] capability_key`).
    pub(super) fn capabilities(mut self, lifetime: Duration, group: Option<&[u8; 32]>) -> Self {
        self.caps = Mutex::new(key_schedule(lifetime, group));
        self
    }

    /// A signer for the capabilities of one reply (the key rotated first if due).
    pub(super) fn signer(&self) -> cv_net::capability::Signer {
        self.caps.lock().unwrap_or_else(|p| p.into_inner()).signer(cv_net::capability::now_ms())
    }

    /// The capability keys as workers are handed them (current after a rotation due now),
    /// unless they are the set `held` names: a heartbeat copies them only when they changed.
    pub(super) fn cap_keys(&self, held: Option<u64>) -> Option<cv_wire::msg::CapKeys> {
        let mut caps = self.caps.lock().unwrap_or_else(|p| p.into_inner());
        let _ = caps.signer(cv_net::capability::now_ms());
        (held != Some(caps.generation())).then(|| caps.keys())
    }

    /// Whether a completion's tail is read back from its blocks before it is kept.
    pub(super) fn checking_tails(mut self, on: bool) -> Self {
        self.check_tails = on;
        self
    }

    /// What may be mounted.
    pub(super) fn mounting(mut self, policy: super::mount_policy::MountPolicy) -> Self {
        self.mount_policy = policy;
        self
    }

    /// Under Raft, the leader's address when this master knows it and is not the leader: a
    /// `NotLeader` answer names it so the client follows it in the same call.
    fn leader_addr(&self) -> Option<String> {
        let raft = self.raft.as_ref()?;
        raft.leader().filter(|(id, _)| *id != raft.node_id()).map(|(_, addr)| addr)
    }

    fn raft_master(&self, kind: Kind) -> Result<&cv_master_raft::RaftMaster, Fail> {
        match &self.raft {
            Some(r) => Ok(r),
            None => {
                Err(Fail::new(ErrorCode::Unsupported, format!("{}: this master is not in a Raft group", kind.name())))
            }
        }
    }

    pub fn core(&self) -> &Arc<MasterCore> {
        &self.core
    }

    async fn dispatch(&self, peer: &Peer, frame: &Frame) -> Result<Reply, Fail> {
        let id = frame.header().request_id;
        match frame.kind() {
            Kind::Ping => {
                let nonce = frame.access::<Ping>()?.nonce.to_native();
                Ok(Reply::ok(id, &Pong { nonce }, Vec::new()))
            }
            // The clock leases and TTLs are judged on, for `cvctl doctor`'s skew check.
            Kind::MasterTime => Ok(Reply::ok(id, &MasterTimeOk { unix_ms: self.clock.now_ms() }, Vec::new())),
            Kind::Open => {
                let started = std::time::Instant::now();
                let r = req_namespace::open(self, Req::of(frame)?).await;
                self.open_latency.observe(started.elapsed());
                r
            }
            Kind::Stat => req_namespace::stat(self, Req::of(frame)?).await,
            Kind::List => req_namespace::list(self, Req::of(frame)?).await,
            Kind::Mkdir => req_namespace::mkdir(self, Req::of(frame)?).await,
            Kind::Create => req_namespace::create(self, Req::of(frame)?).await,
            Kind::AddBlock => req_namespace::add_block(self, Req::of(frame)?).await,
            // These may queue block deletes: they are sent at once too.
            Kind::Complete | Kind::CompleteIf | Kind::Abandon | Kind::Rename | Kind::Delete => {
                let r = match frame.kind() {
                    Kind::Complete => req_namespace::complete(self, Req::of(frame)?).await,
                    Kind::CompleteIf => req_namespace::complete_if(self, Req::of(frame)?).await,
                    Kind::Abandon => req_namespace::abandon(self, Req::of(frame)?).await,
                    Kind::Rename => req_rename::rename(self, Req::of(frame)?).await,
                    _ => req_namespace::delete(self, Req::of(frame)?).await,
                };
                self.deletes_now.kick();
                r
            }
            Kind::Compose => req_namespace::compose(self, Req::of(frame)?).await,
            Kind::Mount | Kind::Unmount | Kind::SyncMount | Kind::Free => {
                admin_only(peer, frame.kind())?;
                match frame.kind() {
                    Kind::Mount => req_mounts::mount(self, Req::of(frame)?).await,
                    Kind::Unmount => req_mounts::unmount(self, Req::of(frame)?).await,
                    Kind::SyncMount => req_mounts::sync(self, Req::of(frame)?).await,
                    _ => req_mounts::free(self, Req::of(frame)?).await,
                }
            }
            Kind::ListMounts => req_mounts::list(self, Req::of(frame)?).await,
            Kind::GetMount => {
                // Credentials go only to workers, which fetch blocks with them.
                worker_only(peer, frame.kind())?;
                req_mounts::get_mount(self, Req::of(frame)?).await
            }
            Kind::RegisterWorker => {
                worker_only(peer, frame.kind())?;
                req_workers::register(self, peer, Req::of(frame)?).await
            }
            Kind::Heartbeat => {
                worker_only(peer, frame.kind())?;
                req_workers::heartbeat(self, peer, Req::of(frame)?).await
            }
            // Any peer: the FUSE mount's df and Hadoop's getStatus read capacity from it; what
            // only an admin sees is decided inside.
            Kind::Report => req_workers::report(self, peer, Req::of(frame)?).await,
            Kind::DrainWorker => {
                admin_only(peer, frame.kind())?;
                req_workers::drain(self, Req::of(frame)?).await
            }
            Kind::ChangeMasters => {
                admin_only(peer, frame.kind())?;
                super::raft::change_masters(self.raft_master(frame.kind())?, frame).await
            }
            Kind::RevokeCert => {
                admin_only(peer, frame.kind())?;
                super::req_revoke::revoke(self, peer, Req::of(frame)?).await
            }
            Kind::ListRevoked => {
                node_or_admin(peer, frame.kind())?;
                super::req_revoke::list(self, Req::of(frame)?)
            }
            Kind::ListMasters => super::raft::list_masters(self.raft_master(frame.kind())?, frame),
            Kind::RaftAppend | Kind::RaftVoteReq | Kind::RaftSnapshot | Kind::RaftProbe => {
                super::raft::master_only(peer, frame.kind())?;
                let master = self.raft_master(frame.kind())?;
                let from = super::raft::Sender { peer, members: self.members.as_deref() };
                match frame.kind() {
                    Kind::RaftAppend => super::raft::append(master, from, frame).await,
                    Kind::RaftVoteReq => super::raft::vote(master, from, frame).await,
                    Kind::RaftProbe => super::raft::probed(master, from, frame).await,
                    _ => super::raft::snapshot(master, from, frame).await,
                }
            }
            other => {
                Err(Fail::new(ErrorCode::Unsupported, format!("{} is not a request the master serves", other.name())))
            }
        }
    }
}

/// Only a worker acts as one: a peer whose certificate may work (`cv_net::identity`) and that
/// said so in its hello (a worker certificate may also call as a plain client).
fn worker_only(peer: &Peer, kind: Kind) -> Result<(), Fail> {
    if peer.role == Role::Worker && peer.cert.role.may_work() {
        return Ok(());
    }
    Err(Fail::new(
        ErrorCode::PermissionDenied,
        format!("{} is for workers; this peer holds a {}", kind.name(), peer.cert),
    ))
}

/// The revocation list: for the servers that enforce it and the operator, not for clients.
fn node_or_admin(peer: &Peer, kind: Kind) -> Result<(), Fail> {
    if peer.cert.role.is_admin() || peer.cert.role.is_node() {
        return Ok(());
    }
    Err(Fail::new(
        ErrorCode::PermissionDenied,
        format!("{} is for workers, masters and admins; this peer holds a {}", kind.name(), peer.cert),
    ))
}

/// Changes to the cluster (mounts, free, drain, membership): only a peer whose certificate is
/// an admin's, whatever its hello said.
fn admin_only(peer: &Peer, kind: Kind) -> Result<(), Fail> {
    if peer.cert.role.is_admin() {
        return Ok(());
    }
    Err(Fail::new(
        ErrorCode::PermissionDenied,
        format!(
            "{} needs an admin certificate (`cvctl cert issue --role admin`); this peer holds a {}",
            kind.name(),
            peer.cert
        ),
    ))
}

impl MasterService {
    /// The reply to `frame`, and whether a repeat of it may be answered with the same reply
    /// (anything but a retryable failure).
    async fn answer(&self, peer: &Peer, frame: &Frame) -> (Reply, bool) {
        let id = frame.header().request_id;
        match self.dispatch(peer, frame).await {
            Ok(reply) => (reply, true),
            Err(f) => {
                tracing::debug!(peer = %peer.addr, kind = frame.kind().name(), code = f.code.name(), "request refused: {}", f.message);
                let redirect = if f.code == ErrorCode::NotLeader { self.leader_addr() } else { None };
                (Reply::error(id, f.code, &f.message, redirect), !f.code.retryable())
            }
        }
    }
}

impl Service for MasterService {
    /// A worker's control connection that closes (the process stopped or died, its host or
    /// link went down: noticed within the transport's idle timeout) makes it lost at once,
    /// instead of after the heartbeat timeout: readers of its cache-mode blocks are sent to
    /// the next live owner. A worker that only lost the connection registers again on its
    /// next one; its blocks are still its own.
    fn closed(&self, peer: &Peer, by_peer: bool) {
        // A master shutting down closes every connection itself: its workers are not lost
        // (journaling that would leave a restarted master without live workers until each
        // registers again).
        if peer.role != Role::Worker || self.stopping.load(std::sync::atomic::Ordering::Acquire) {
            return;
        }
        let gone: Vec<u64> = {
            let mut conns = self.worker_conns.lock().unwrap_or_else(|p| p.into_inner());
            let gone = conns.iter().filter(|(_, c)| **c == peer.conn).map(|(w, _)| *w).collect();
            conns.retain(|_, c| *c != peer.conn);
            gone
        };
        if gone.is_empty() {
            return;
        }
        let core = self.core.clone();
        let addr = peer.addr;
        // Journaling waits for an fsync: off the connection's task.
        tokio::task::spawn_blocking(move || match core.workers_gone(&gone) {
            // A worker that stopped cleanly said so (an application close): an operator's
            // restart, not a failure.
            Ok(r) if !r.lost_workers.is_empty() && by_peer => tracing::info!(
                workers = ?r.lost_workers, %addr, missing_blocks = r.missing_blocks.len(),
                "workers stopped: they closed their connection"
            ),
            Ok(r) if !r.lost_workers.is_empty() => tracing::warn!(
                workers = ?r.lost_workers, %addr, missing_blocks = r.missing_blocks.len(),
                "workers lost: their connection closed"
            ),
            Ok(_) => {}
            Err(e) => tracing::error!(workers = ?gone, error = %e, "could not mark workers lost"),
        });
    }

    fn handle<'a>(&'a self, peer: &'a Peer, frame: Frame) -> BoxFuture<'a, Reply> {
        Box::pin(async move {
            if replay::is_mutation(frame.kind()) {
                let id = frame.header().request_id;
                self.replays.once(peer, id, std::time::Instant::now(), self.answer(peer, &frame)).await
            } else {
                self.answer(peer, &frame).await.0
            }
        })
    }
}
