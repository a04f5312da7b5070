//! Starting and stopping a served master on the caller's tokio runtime.

use super::config::{RaftReads, ServerConfig};
use super::errors::{ServerError, ServerErrorKind};
use super::export::Exporter;
use super::raft::QuicNetwork;
use super::service::MasterService;
use cv_master_core::MasterCore;
use cv_master_core::config::{Clock, SystemClock};
use cv_master_raft::openraft::BasicNode;
use cv_master_raft::{RaftMaster, RaftOptions, ReadMode};
use cv_net::quic::TransportSettings;
use cv_net::rpc;
use cv_net::tls::Identity;
use cv_wire::Limits;
use cv_wire::msg::Role;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// How long shutdown waits for connections to say goodbye.
const DRAIN: Duration = Duration::from_secs(2);

/// A running master: its endpoint, accept loop and tick task. Stop it with [`Self::shutdown`].
#[derive(Debug)]
pub struct MasterServer {
    core: Arc<MasterCore>,
    endpoint: quinn::Endpoint,
    addr: SocketAddr,
    serve: JoinHandle<()>,
    tick: JoinHandle<()>,
    export: JoinHandle<()>,
    /// Saves the tails file now and then, and once more when stopped.
    tails: JoinHandle<()>,
    stop: watch::Sender<bool>,
    service: Arc<MasterService>,
    raft: Option<Arc<RaftMaster>>,
}

impl MasterServer {
    /// Recovers the core from `config.journal_dir`, binds `config.listen` and starts serving.
    pub async fn start(
        config: &ServerConfig,
        identity: &Identity,
        transport: &TransportSettings,
    ) -> Result<MasterServer, ServerError> {
        Self::start_with_clock(config, identity, transport, Arc::new(SystemClock)).await
    }

    /// As [`Self::start`], with the clock the core and the tick read (tests move time).
    pub async fn start_with_clock(
        config: &ServerConfig,
        identity: &Identity,
        transport: &TransportSettings,
        clock: Arc<dyn Clock>,
    ) -> Result<MasterServer, ServerError> {
        config.validate("master")?;
        transport.validate("transport")?;
        if !config.peers.is_empty() {
            return Self::start_raft(config, identity, transport, clock).await;
        }
        let master_config = config.master_config();
        let core_clock = clock.clone();
        // Recovery reads and may truncate files: blocking work, off the reactor.
        let core = tokio::task::spawn_blocking(move || MasterCore::start_dir(master_config, core_clock))
            .await
            .map_err(|e| ServerError::new(ServerErrorKind::Runtime, format!("recovery task: {e}")))??;
        let core = Arc::new(core);
        let rec = core.recovery();
        tracing::info!(
            last_seq = rec.last_seq,
            snapshot_seq = rec.snapshot_seq,
            replayed = rec.replayed,
            cut_bytes = rec.cut_bytes,
            "master recovered"
        );
        let endpoint = match rpc::server_endpoint(config.listen, identity, transport) {
            Ok(ep) => ep,
            Err(e) => {
                shutdown_core(core).await;
                return Err(e.into());
            }
        };
        // The exporter reads blocks from the shards as the master (its node identity).
        let exporter = match rpc::client_endpoint_at(identity, transport, config.listen.ip()) {
            Ok(ep) => Arc::new(Exporter::new(ep, config.node.clone())),
            Err(e) => {
                endpoint.close(quinn::VarInt::from_u32(0), b"master failed to start");
                shutdown_core(core).await;
                return Err(e.into());
            }
        };
        Self::serve(config, core, endpoint, exporter, clock, None)
    }

    /// A master of a Raft group (master/HA.md): its Raft node over the journal directory,
    /// talking to the other masters through the same endpoint's peers.
    async fn start_raft(
        config: &ServerConfig,
        identity: &Identity,
        transport: &TransportSettings,
        clock: Arc<dyn Clock>,
    ) -> Result<MasterServer, ServerError> {
        let endpoint = rpc::server_endpoint(config.listen, identity, transport)?;
        let client = match rpc::client_endpoint_at(identity, transport, config.listen.ip()) {
            Ok(ep) => ep,
            Err(e) => {
                endpoint.close(quinn::VarInt::from_u32(0), b"master failed to start");
                return Err(e.into());
            }
        };
        let mut opts = RaftOptions::new(config.node_id, config.journal_dir.clone());
        let election = config.election_timeout.get();
        opts.election_min = election;
        opts.election_max = election * 2;
        opts.heartbeat = election / 4;
        // A leader the others stopped reaching steps aside after four election timeouts (1 s
        // by default): long enough that a busy machine's late probes are not taken for a cut.
        opts.reach_window = election * 4;
        // Every master that starts without files catches up before it votes; the one that
        // founds a group ends that at once (`bootstrap`).
        opts.catch_up_before_voting = true;
        opts.peers = config.peers.iter().map(|p| (p.id, p.addr.to_string())).collect();
        opts.read_mode = match config.raft_reads {
            RaftReads::Lease => ReadMode::Lease,
            RaftReads::ReadIndex => ReadMode::ReadIndex,
        };
        let members = Arc::new(super::raft_members::MemberCerts::new(client.clone(), config.node.clone()));
        let network = QuicNetwork::new(client.clone(), config.node.clone(), members.clone());
        let started = RaftMaster::start(opts, config.master_config(), clock.clone(), network).await;
        let raft = match started {
            Ok(r) => Arc::new(r),
            Err(e) => {
                endpoint.close(quinn::VarInt::from_u32(0), b"master failed to start");
                return Err(e.into());
            }
        };
        raft.start_probing(super::raft::QuicProber::new(
            client.clone(),
            config.node.clone(),
            config.node_id,
            members.clone(),
        ));
        let exporter = Arc::new(Exporter::new(client.clone(), config.node.clone()));
        let core = raft.core().clone();
        tracing::info!(node_id = config.node_id, peers = config.peers.len(), "master in a raft group");
        let server = Self::serve(config, core, endpoint, exporter, clock, Some((raft.clone(), members)))?;
        if raft.is_catching_up() {
            tokio::spawn(super::raft::catch_up(raft.clone(), client, config.node.clone()));
        }
        if config.bootstrap {
            // While serving: a living group's leader must be able to reach this master.
            let config = config.clone();
            tokio::spawn(async move {
                if let Err(e) = bootstrap(&raft, &config, election * 4).await {
                    tracing::error!(error = %e, "raft bootstrap failed");
                }
            });
        }
        Ok(server)
    }

    fn serve(
        config: &ServerConfig,
        core: Arc<MasterCore>,
        endpoint: quinn::Endpoint,
        exporter: Arc<Exporter>,
        clock: Arc<dyn Clock>,
        raft: Option<(Arc<RaftMaster>, Arc<super::raft_members::MemberCerts>)>,
    ) -> Result<MasterServer, ServerError> {
        let (raft, members) = raft.unzip();
        let addr =
            endpoint.local_addr().map_err(|e| ServerError::new(ServerErrorKind::Net, format!("local addr: {e}")))?;
        let group =
            config.capability_secret("master").map_err(|e| ServerError::new(ServerErrorKind::Config, e.to_string()))?;
        let service = Arc::new(
            MasterService::new(core.clone(), clock, config.heartbeat_every(), exporter.clone(), raft.clone())
                .checking_tails(config.check_tails)
                .mounting(config.mounts.with_private(&config.journal_dir))
                .capabilities(config.capability_lifetime.get(), group.as_ref())
                .connections_per_identity(config.max_connections_per_identity)
                .raft_members(members),
        );
        let ufs = service.ufs.clone();
        // Before serving, so the first opens after a restart find the tails and checks saved.
        // A blocking read of at most the tail budget, once at start.
        let tails_file = super::tails::path(&config.journal_dir);
        super::tails::load(&tails_file, &core);
        let serve = tokio::spawn(rpc::serve_admitting(
            endpoint.clone(),
            service.clone(),
            (Role::Master, config.node.clone()),
            Limits::DEFAULT,
            (service.quic.clone(), service.peers.clone()),
            cv_net::quic::RETRY_ABOVE,
        ));
        let (stop, stopped) = watch::channel(false);
        tokio::spawn(super::req_revoke::sync_peers(core.clone(), service.peers.clone(), stopped.clone()));
        let tick = tokio::spawn(tick_loop(core.clone(), config.tick_every(), stopped.clone()));
        let tails = tokio::spawn(super::tails::keep(tails_file, core.clone(), stopped.clone()));
        tokio::spawn(service.deletes_now.clone().run(core.clone(), exporter.clone(), stopped.clone()));
        let export = tokio::spawn(exporter.run(core.clone(), ufs, stopped));
        tracing::info!(%addr, "master serving");
        Ok(MasterServer { core, endpoint, addr, serve, tick, export, tails, stop, service, raft })
    }

    /// What `/metrics` serves for this master, gathered at each scrape (serve it with
    /// `cv_net::metrics::serve`).
    pub fn metrics(&self) -> cv_net::metrics::Gather {
        super::metrics::gatherer(self.service.clone())
    }

    /// The bound UDP address (useful with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Connections the master holds now: peers that went away without closing stay counted
    /// until their idle timeout.
    pub fn open_connections(&self) -> usize {
        self.endpoint.open_connections()
    }

    /// Under Raft, this master's node of the group.
    pub fn raft(&self) -> Option<&Arc<RaftMaster>> {
        self.raft.as_ref()
    }

    /// The served core (tests, in-process tools).
    pub fn core(&self) -> &Arc<MasterCore> {
        &self.core
    }

    /// Closes the endpoint (peers see the connection close), stops the tick, lets queued
    /// journal records reach the disk and stops the journal writer.
    pub async fn shutdown(self) {
        self.service.stopping.store(true, std::sync::atomic::Ordering::Release);
        // Under Raft the node stops first: a leader that kept heartbeating while its endpoint
        // drains would hold off the election that replaces it.
        if let Some(raft) = &self.raft {
            raft.shutdown().await;
        }
        self.endpoint.close(quinn::VarInt::from_u32(0), b"master shutting down");
        let _ = tokio::time::timeout(DRAIN, self.endpoint.wait_idle()).await;
        let _ = self.stop.send(true);
        let _ = self.tick.await;
        let _ = self.tails.await;
        // An upload in progress is dropped; the file is exported again after a restart.
        self.export.abort();
        let _ = self.export.await;
        // The accept loop ends once the endpoint is closed.
        if tokio::time::timeout(DRAIN, self.serve).await.is_err() {
            tracing::warn!("accept loop did not end after the endpoint closed");
        }
        shutdown_core(self.core).await;
        tracing::info!(addr = %self.addr, "master stopped");
    }
}

async fn shutdown_core(core: Arc<MasterCore>) {
    // Joins the journal writer thread (after its last fsync): blocking.
    let _ = tokio::task::spawn_blocking(move || core.shutdown()).await;
}

/// Marks workers silent past the heartbeat timeout as lost, removes files whose writer went
/// silent past the write lease and runs a re-replication pass, every `every`, until stopped.
async fn tick_loop(core: Arc<MasterCore>, every: Duration, mut stopped: watch::Receiver<bool>) {
    let mut interval = tokio::time::interval(every);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = interval.tick() => {}
            _ = stopped.changed() => return,
        }
        // Under Raft the leader alone ticks: what the tick decides is journaled.
        if !core.is_leading() {
            continue;
        }
        // A full journal takes none of the tick's writes (it said so once, when it filled):
        // the tick only asks whether there is room again.
        if core.journal_full().is_some() {
            let c = core.clone();
            if !matches!(tokio::task::spawn_blocking(move || c.room()).await, Ok(Ok(()))) {
                continue;
            }
        }
        if let Some(r) = blocking(&core, "lost-worker tick", |c| c.tick()).await
            && !r.lost_workers.is_empty()
        {
            tracing::warn!(workers = ?r.lost_workers, missing_blocks = r.missing_blocks.len(), "workers lost");
        }
        if let Some(paths) = blocking(&core, "write-lease tick", |c| c.expire_writers()).await
            && !paths.is_empty()
        {
            tracing::warn!(files = ?paths, "removed files whose writer went silent past the write lease");
        }
        if let Some(r) = blocking(&core, "re-replication tick", |c| c.replicate()).await
            && (r.ordered > 0 || r.dropped > 0 || r.lost > 0)
        {
            let (ordered, dropped, short, lost) = (r.ordered, r.dropped, r.short, r.lost);
            tracing::info!(ordered, dropped, short, lost, "re-replication");
        }
    }
}

/// Runs one of the tick's steps off the reactor (each waits blocking for its journal record);
/// a failure is logged as `what` and gives `None`.
async fn blocking<T: Send + 'static>(
    core: &Arc<MasterCore>,
    what: &'static str,
    f: impl FnOnce(&MasterCore) -> cv_master_core::Result<T> + Send + 'static,
) -> Option<T> {
    let c = core.clone();
    match tokio::task::spawn_blocking(move || f(&c)).await {
        Ok(Ok(v)) => Some(v),
        Ok(Err(e)) => {
            tracing::error!(error = %e, "{what} failed");
            None
        }
        Err(e) => {
            tracing::error!(error = %e, "{what} task failed");
            None
        }
    }
}

/// Makes a new group of `peers` on this master's first start. A master whose files were lost
/// (pristine again, `bootstrap` still set) must not found a second group beside the living
/// one: it first listens for `wait`, and a leader of the group it belongs to reaches it by
/// then (it is still a member), which shows as a term above 0.
async fn bootstrap(raft: &RaftMaster, config: &ServerConfig, wait: Duration) -> Result<(), ServerError> {
    match raft.raft().is_initialized().await {
        Ok(false) => {}
        Ok(true) => {
            tracing::info!("raft group already initialized; bootstrap ignored");
            return Ok(());
        }
        Err(e) => {
            tracing::warn!(error = %e, "raft state unknown; bootstrap skipped");
            return Ok(());
        }
    }
    let mut metrics = raft.raft().metrics();
    let heard = tokio::time::timeout(wait, metrics.wait_for(|m| m.current_term > 0 || m.current_leader.is_some()))
        .await
        .is_ok();
    if heard {
        tracing::warn!("bootstrap set, but a group already reaches this master: joining it instead");
        return Ok(());
    }
    // The group starts as this master alone; the others join as learners and vote once they
    // hold the log (they start catching up, refusing votes, as every master without files does).
    let me = config.raft_addr().map(|a| a.to_string()).unwrap_or_default();
    raft.catch_up_to(None).await;
    raft.initialize([(config.node_id, BasicNode::new(me))].into_iter().collect()).await?;
    tracing::info!(peers = config.peers.len(), "raft group bootstrapped; adding the other masters");
    raft.grow_to(config.peers.iter().map(|p| (p.id, p.addr.to_string())).collect()).await;
    Ok(())
}
