//! The control plane: one small thread (tokio, current-thread; never a shard) that
//! registers the worker with the master, heartbeats with capacity, usage and block-report
//! deltas gathered from every shard, and hands the master's delete commands to the owning
//! shards. Shards are reached only through [`ShardCmd`] messages. A master that is down is
//! retried with backoff while the shards keep serving.

mod backoff;
mod copy;
mod identity;
pub(crate) mod metrics;
mod pending;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::thread::JoinHandle;
use std::time::Duration;

use cv_net::quic::TransportSettings;
use cv_net::rpc::{Conn, client_endpoint_at};
use cv_net::tls::Identity;
use cv_net::{NetError, NetErrorKind};
use cv_wire::msg::{
    Heartbeat, HeartbeatOk, ListRevoked, RegisterOk, RegisterWorker, RevokedList, Role, TierCounters, WorkerCommand,
};
use cv_wire::{Frame, Limits, Message, block_shard};
use tokio::sync::watch;

use self::backoff::Backoff;
use self::pending::Pending;
use crate::error::{Result, WorkerError, WorkerErrorKind};
use crate::shard::{ShardCmd, ShardReport};

/// Most blocks one heartbeat reports as added (and as removed); the rest follow next time.
const MAX_REPORT: usize = 64 << 10;
/// Deadline of one connection attempt to the master. A master on the LAN completes a handshake
/// in milliseconds; an attempt begun while it was down waits on QUIC's backed-off Initial
/// retransmits (1 s, 2 s, …), so a fresh attempt soon reaches a master that came back sooner.
const CONNECT_TIMEOUT: Duration = Duration::from_millis(500);
/// A shard that does not answer a report request within this is skipped for the round.
const SHARD_TIMEOUT: Duration = Duration::from_secs(10);

/// What the control plane needs, built by the server.
#[derive(Debug)]
pub(crate) struct ControlSpec {
    /// The masters (`host:port`, resolved again on every connection attempt) and the one
    /// that leads as last heard.
    pub(crate) masters: std::sync::Arc<cv_net::masters::MasterList<String>>,
    pub(crate) host: String,
    pub(crate) node: String,
    /// Failure-domain label announced at registration.
    pub(crate) zone: String,
    pub(crate) shard_ports: Vec<u16>,
    /// This worker's shard endpoints as the control thread dials them (copies are written
    /// through them).
    pub(crate) own_shards: Vec<SocketAddr>,
    /// Heartbeat period unless the master dictates one.
    pub(crate) heartbeat: Duration,
    /// Deadline of a connection attempt or of one call.
    pub(crate) call_timeout: Duration,
    pub(crate) retry_floor: Duration,
    pub(crate) retry_ceiling: Duration,
    pub(crate) identity: Identity,
    pub(crate) transport: TransportSettings,
    /// The worker's bind address: connections to the master and copies leave from it.
    pub(crate) bind: std::net::IpAddr,
    /// One sender per shard, by shard index.
    pub(crate) shards: Vec<flume::Sender<ShardCmd>>,
    /// Where the worker's id is kept across restarts (beside its data).
    pub(crate) id_file: Option<std::path::PathBuf>,
    /// A shard freed space or lacked it: heartbeat now rather than at the next interval.
    pub(crate) report_soon: flume::Receiver<()>,
    /// The master's capability keys, which the shards check with.
    pub(crate) keys: crate::Keys,
}

/// The running control thread.
#[derive(Debug)]
pub(crate) struct ControlHandle {
    stop: flume::Sender<()>,
    thread: JoinHandle<()>,
    worker_id: watch::Receiver<Option<u64>>,
    refused: watch::Receiver<Option<String>>,
}

impl ControlHandle {
    /// Waits until a master refused this worker's identity (its certificate is not a node's,
    /// or is not under the cluster CA) or its protocol version: then the control plane has
    /// stopped for good, and the worker should exit with the returned reason. Pending forever
    /// otherwise.
    pub(crate) async fn refused(&self) -> String {
        let mut rx = self.refused.clone();
        match rx.wait_for(Option::is_some).await {
            Ok(why) => why.clone().unwrap_or_default(),
            Err(_) => std::future::pending().await, // the thread ended without a refusal
        }
    }

    /// The id the master assigned, once registered.
    pub(crate) fn worker_id(&self) -> Option<u64> {
        *self.worker_id.borrow()
    }

    /// Stops heartbeating and waits for the thread.
    pub(crate) fn stop(self) {
        let _ = self.stop.send(());
        if self.thread.join().is_err() {
            tracing::error!("control-plane thread panicked");
        }
    }
}

/// Starts the control thread.
pub(crate) fn spawn(spec: ControlSpec) -> Result<ControlHandle> {
    let (stop_tx, stop_rx) = flume::bounded(1);
    let (id_tx, id_rx) = watch::channel(None);
    let (refused_tx, refused_rx) = watch::channel(None);
    let thread = std::thread::Builder::new()
        .name("cv-control".into())
        .spawn(move || match tokio::runtime::Builder::new_current_thread().enable_all().build() {
            Ok(rt) => rt.block_on(run(spec, stop_rx, id_tx, refused_tx)),
            Err(e) => tracing::error!(error = %e, "control plane: no tokio runtime; not registering"),
        })
        .map_err(|e| WorkerError::new(WorkerErrorKind::Executor, "spawn cv-control").with_source(e))?;
    Ok(ControlHandle { stop: stop_tx, thread, worker_id: id_rx, refused: refused_rx })
}

/// State that outlives one connection to the master.
#[derive(Debug)]
struct State {
    worker_id: Option<u64>,
    pending: Pending,
    backoff: Backoff,
    ids: watch::Sender<Option<u64>>,
    /// Heartbeat period the master asked for at registration (0: ours).
    heartbeat_ms: u64,
    copier: copy::Copier,
    /// The next heartbeat is the first since registering: if its batch holds every pending
    /// block (the full report registration gathered), it says so.
    full_next: bool,
    /// The generation of the master's revocation list the shards hold (0: none yet).
    revoked: u64,
}

async fn run(
    spec: ControlSpec,
    stop: flume::Receiver<()>,
    ids: watch::Sender<Option<u64>>,
    refused: watch::Sender<Option<String>>,
) {
    let ep = match client_endpoint_at(&spec.identity, &spec.transport, spec.bind) {
        Ok(ep) => ep,
        Err(e) => {
            tracing::error!(error = %e, "control plane: no client endpoint; not registering");
            return;
        }
    };
    let mut st = State {
        worker_id: spec.id_file.as_deref().and_then(identity::load),
        pending: Pending::default(),
        backoff: Backoff::new(spec.retry_floor, spec.retry_ceiling),
        ids,
        heartbeat_ms: 0,
        copier: copy::Copier::new(ep.clone(), spec.node.clone(), spec.own_shards.clone()),
        full_next: false,
        revoked: 0,
    };
    loop {
        let err = tokio::select! {
            _ = stop.recv_async() => break,
            r = session(&spec, &ep, &mut st) => match r {
                Err(e) => e,
                Ok(never) => match never {},
            },
        };
        let (failed, err) = match err {
            (m, Ended::Failed(e)) => (m, e),
            (m, Ended::Refused(e)) => {
                // Retrying cannot help: the identity or the build is wrong, not the network.
                let why = if refuses_version(&e) { "protocol version" } else { "identity" };
                tracing::error!(master = %m, error = %e, "the master refused this worker's {why}; stopping");
                let _ = refused.send(Some(format!("master {m} refused this worker's {why}: {e}")));
                break;
            }
        };
        // A master that names the leader is followed at once; otherwise the next master is
        // tried after the backoff.
        if spec.masters.len() > 1 && spec.masters.moved(&failed, crate::control::named_leader(&err)) {
            tracing::info!(from = %failed, to = %spec.masters.current(), "following the leading master");
            tokio::time::sleep(Duration::from_millis(20)).await;
            continue;
        }
        let delay = st.backoff.next_delay();
        tracing::warn!(master = %failed, error = %err, retry_in = ?delay, "master unreachable; shards keep serving");
        tokio::select! {
            _ = stop.recv_async() => break,
            _ = tokio::time::sleep(delay) => {}
        }
    }
    ep.close(0u32.into(), b"worker stopping");
    // Give the close a moment to reach the master; a full drain (3 PTOs) is not worth waiting.
    let _ = tokio::time::timeout(Duration::from_millis(200), ep.wait_idle()).await;
}

/// The leader a master's `NotLeader` answer names, if any.
pub(crate) fn named_leader(e: &NetError) -> Option<String> {
    (e.code() == Some(cv_wire::ErrorCode::NotLeader)).then(|| e.redirect().map(str::to_owned)).flatten()
}

/// How a session with a master ended.
enum Ended {
    /// Anything retrying may mend: the network, a master down or not leading.
    Failed(NetError),
    /// The master refused this worker's identity at the handshake or the hello, or its
    /// protocol version at the hello.
    Refused(NetError),
}

impl From<NetError> for Ended {
    fn from(e: NetError) -> Self {
        Ended::Failed(e)
    }
}

/// Whether a connect error says the master does not speak this build's protocol version (it
/// refused the hello, or answered in a version this build cannot read): a worker of the
/// wrong build stops and says so rather than retrying forever (wire/FORMAT.md, "Rolling
/// upgrade").
fn refuses_version(e: &NetError) -> bool {
    e.code() == Some(cv_wire::ErrorCode::VersionMismatch)
}

/// Whether a connect error says the worker's own identity was refused: a TLS failure (another
/// CA) or a hello answered `PermissionDenied` (a client certificate for the worker role).
fn refuses_identity(e: &NetError) -> bool {
    e.kind() == NetErrorKind::Tls || e.code() == Some(cv_wire::ErrorCode::PermissionDenied)
}

/// One connection to the current master: register, then heartbeat until something fails
/// (the error, with the master it came from).
async fn session(
    spec: &ControlSpec,
    ep: &quinn::Endpoint,
    st: &mut State,
) -> std::result::Result<Infallible, (String, Ended)> {
    let master = spec.masters.current();
    session_with(spec, ep, st, &master).await.map_err(|e| (master, e))
}

async fn session_with(
    spec: &ControlSpec,
    ep: &quinn::Endpoint,
    st: &mut State,
    master: &str,
) -> std::result::Result<Infallible, Ended> {
    let addr = resolve(master).await?;
    let connect = Conn::connect(ep, addr, Role::Worker, &spec.node, Limits::DEFAULT);
    let conn = match tokio::time::timeout(CONNECT_TIMEOUT.min(spec.call_timeout), connect).await {
        Err(_) => {
            let msg = format!("connecting to the master took over {CONNECT_TIMEOUT:?}");
            return Err(NetError::new(NetErrorKind::Timeout, msg).into());
        }
        Ok(Err(e)) if refuses_identity(&e) || refuses_version(&e) => return Err(Ended::Refused(e)),
        Ok(r) => r?,
    };
    loop {
        register(spec, &conn, st).await?;
        refresh_revoked(spec, &conn, st).await;
        let interval = heartbeat_interval(spec, st);
        loop {
            if !heartbeat(spec, &conn, st).await? {
                break; // the master asked us to register again
            }
            refresh_revoked(spec, &conn, st).await;
            // A master that died or restarted is noticed when the connection closes (its
            // idle timeout, about a second), not at the next heartbeat.
            tokio::select! {
                _ = tokio::time::sleep(interval) => {}
                // A burst of deletes is gathered into one heartbeat.
                Ok(()) = spec.report_soon.recv_async() => tokio::time::sleep(REPORT_SOON_GATHER).await,
                e = conn.quinn().closed() => {
                    return Err(NetError::new(NetErrorKind::Connect, format!("master connection closed: {e}")).into());
                }
            }
        }
    }
}

async fn register(spec: &ControlSpec, conn: &Conn, st: &mut State) -> std::result::Result<(), NetError> {
    // Registration is followed by a full block report: the master may have lost its map.
    let Gathered { capacity, used, .. } = gather(&spec.shards, true, &mut st.pending).await;
    let req = RegisterWorker {
        worker_id: st.worker_id,
        host: spec.host.clone(),
        shard_ports: spec.shard_ports.clone(),
        capacity,
        used,
        zone: spec.zone.clone(),
    };
    let ok: RegisterOk = call(spec, conn, &req).await?.decode_body()?;
    crate::merge_keys(&spec.keys, &ok.keys);
    if st.worker_id.is_some_and(|old| old != ok.worker_id) {
        tracing::warn!(old = ?st.worker_id, new = ok.worker_id, "master assigned a new worker id");
    }
    if st.worker_id != Some(ok.worker_id)
        && let Some(path) = &spec.id_file
        && let Err(e) = identity::store(path, ok.worker_id)
    {
        // Not fatal: the master also knows this worker by its address.
        tracing::warn!(path = %path.display(), error = %e, "worker id not saved");
    }
    st.worker_id = Some(ok.worker_id);
    st.full_next = true;
    st.ids.send_replace(Some(ok.worker_id));
    st.backoff.reset();
    tracing::info!(worker_id = ok.worker_id, master = %spec.masters.current(), "registered");
    // Remember the master's pace for this registration.
    st.heartbeat_ms = ok.heartbeat_ms;
    Ok(())
}

/// How long an early heartbeat waits for more of the same burst (deletes of one file's blocks
/// arrive one request per shard).
const REPORT_SOON_GATHER: Duration = Duration::from_millis(20);

fn heartbeat_interval(spec: &ControlSpec, st: &State) -> Duration {
    match st.heartbeat_ms {
        0 => spec.heartbeat,
        ms => Duration::from_millis(ms),
    }
}

/// Sends one heartbeat and runs the master's commands; `Ok(false)` means register again.
async fn heartbeat(spec: &ControlSpec, conn: &Conn, st: &mut State) -> std::result::Result<bool, NetError> {
    let Some(worker_id) = st.worker_id else {
        return Ok(false);
    };
    let g = gather(&spec.shards, false, &mut st.pending).await;
    let batch = st.pending.batch(MAX_REPORT);
    let full = st.full_next && batch.added.len() == st.pending.added_len();
    let hb = Heartbeat {
        worker_id,
        capacity: g.capacity,
        used: g.used,
        added: batch.added,
        removed: batch.removed,
        memory: g.memory,
        disk: g.disk,
        full,
        cap_keys: crate::lock_keys(&spec.keys).generation(),
    };
    let ok: HeartbeatOk = call(spec, conn, &hb).await?.decode_body()?;
    st.full_next = false;
    st.pending.acknowledge(&hb.added, &hb.removed);
    let mut again = true;
    for cmd in ok.commands {
        match cmd {
            WorkerCommand::DeleteBlocks(ids) => route(&spec.shards, ids, ShardCmd::Delete),
            WorkerCommand::Unpin(ids) => route(&spec.shards, ids, ShardCmd::Unpin),
            WorkerCommand::Copy(orders) => st.copier.start(orders),
            WorkerCommand::Reregister => again = false,
            WorkerCommand::CapabilityKeys(keys) => crate::merge_keys(&spec.keys, &keys),
        }
    }
    Ok(again)
}

/// Fetches the master's revocation list if it changed and hands it to every shard, which
/// refuses those certificates from now on and closes their connections (docs/security.md,
/// "Revocation"). A failure leaves the shards' list as it was until the next heartbeat.
async fn refresh_revoked(spec: &ControlSpec, conn: &Conn, st: &mut State) {
    let list: RevokedList =
        match call(spec, conn, &ListRevoked { since: st.revoked }).await.and_then(|f| Ok(f.decode_body()?)) {
            Ok(l) => l,
            // A master that predates revocation answers Malformed (an unknown kind).
            Err(e) if e.code() == Some(cv_wire::ErrorCode::Malformed) => return,
            Err(e) => {
                tracing::warn!(error = %e, "fetching the revocation list failed; the shards keep the one they hold");
                return;
            }
        };
    if !list.changed {
        return;
    }
    let held = std::sync::Arc::new(cv_net::revoked::Revoked::new(list.generation, &list.entries));
    tracing::info!(generation = list.generation, entries = held.len(), "revocation list");
    for s in &spec.shards {
        let _ = s.send(ShardCmd::Revoked(held.clone()));
    }
    st.revoked = list.generation;
}

/// Asks every shard for its report, merges them into `pending`, and returns the worker's
/// total capacity and used bytes. A shard that does not answer is skipped this round.
/// What the shards reported, summed.
#[derive(Debug, Default)]
struct Gathered {
    capacity: u64,
    used: u64,
    memory: TierCounters,
    disk: TierCounters,
}

fn add_tier(sum: &mut TierCounters, t: &crate::store::TierStats) {
    sum.hits += t.hits;
    sum.misses += t.misses;
    sum.evictions += t.evictions;
    sum.bytes_used += t.bytes_used;
    sum.capacity += t.capacity_bytes;
}

async fn gather(shards: &[flume::Sender<ShardCmd>], full: bool, pending: &mut Pending) -> Gathered {
    let mut waiting = Vec::with_capacity(shards.len());
    for (i, s) in shards.iter().enumerate() {
        let (tx, rx) = flume::bounded::<ShardReport>(1);
        if s.send(ShardCmd::Report { full, reply: tx }).is_ok() {
            waiting.push((i, rx));
        }
    }
    let mut g = Gathered::default();
    for (i, rx) in waiting {
        match tokio::time::timeout(SHARD_TIMEOUT, rx.recv_async()).await {
            Ok(Ok(r)) => {
                g.capacity += r.usage.capacity_bytes;
                g.used += r.usage.used_bytes;
                add_tier(&mut g.memory, &r.stats.memory);
                add_tier(&mut g.disk, &r.stats.disk);
                pending.merge(r);
            }
            _ => tracing::warn!(shard = i, "shard did not report"),
        }
    }
    g
}

/// Hands each block to the shard that owns it, as `cmd`.
fn route(shards: &[flume::Sender<ShardCmd>], ids: Vec<u64>, cmd: fn(Vec<u64>) -> ShardCmd) {
    let mut by_shard: Vec<Vec<u64>> = vec![Vec::new(); shards.len()];
    for id in ids {
        match by_shard.get_mut(usize::from(block_shard(id))) {
            Some(v) => v.push(id),
            None => tracing::warn!(block = id, "master named a block of a shard this worker lacks"),
        }
    }
    for (shard, ids) in by_shard.into_iter().enumerate().filter(|(_, v)| !v.is_empty()) {
        if shards[shard].send(cmd(ids)).is_err() {
            tracing::warn!(shard, "shard gone; command dropped");
        }
    }
}

async fn call<M: Message>(spec: &ControlSpec, conn: &Conn, msg: &M) -> std::result::Result<Frame, NetError> {
    deadline(spec, M::KIND.name(), conn.call(msg, &[])).await
}

async fn deadline<T>(
    spec: &ControlSpec,
    what: &str,
    fut: impl Future<Output = std::result::Result<T, NetError>>,
) -> std::result::Result<T, NetError> {
    tokio::time::timeout(spec.call_timeout, fut).await.map_err(|_| {
        NetError::new(NetErrorKind::Timeout, format!("{what} with the master took over {:?}", spec.call_timeout))
    })?
}

async fn resolve(master: &str) -> std::result::Result<SocketAddr, NetError> {
    let mut addrs = tokio::net::lookup_host(master)
        .await
        .map_err(|e| NetError::new(NetErrorKind::Connect, format!("resolve {master}")).with_source(e))?;
    addrs.next().ok_or_else(|| NetError::new(NetErrorKind::Connect, format!("{master} resolves to nothing")))
}
