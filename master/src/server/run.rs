//! Starting and stopping a served master on the caller's tokio runtime.

use super::config::ServerConfig;
use super::errors::{ServerError, ServerErrorKind};
use super::export::Exporter;
use super::service::MasterService;
use cv_master_core::MasterCore;
use cv_master_core::config::{Clock, SystemClock};
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
    stop: watch::Sender<bool>,
    service: Arc<MasterService>,
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
        let addr =
            endpoint.local_addr().map_err(|e| ServerError::new(ServerErrorKind::Net, format!("local addr: {e}")))?;
        // The exporter reads blocks from the shards as the master (its node identity).
        let exporter = match rpc::client_endpoint(identity, transport) {
            Ok(ep) => Arc::new(Exporter::new(ep, config.node.clone())),
            Err(e) => {
                endpoint.close(quinn::VarInt::from_u32(0), b"master failed to start");
                shutdown_core(core).await;
                return Err(e.into());
            }
        };
        let service = Arc::new(MasterService::new(core.clone(), clock, config.heartbeat_every(), exporter.clone()));
        let ufs = service.ufs.clone();
        let serve = tokio::spawn(rpc::serve(
            endpoint.clone(),
            service.clone(),
            Role::Master,
            config.node.clone(),
            Limits::DEFAULT,
        ));
        let (stop, stopped) = watch::channel(false);
        let tick = tokio::spawn(tick_loop(core.clone(), config.tick_every(), stopped.clone()));
        let export = tokio::spawn(exporter.run(core.clone(), ufs, stopped));
        tracing::info!(%addr, "master serving");
        Ok(MasterServer { core, endpoint, addr, serve, tick, export, stop, service })
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

    /// The served core (tests, in-process tools).
    pub fn core(&self) -> &Arc<MasterCore> {
        &self.core
    }

    /// Closes the endpoint (peers see the connection close), stops the tick, lets queued
    /// journal records reach the disk and stops the journal writer.
    pub async fn shutdown(self) {
        self.service.stopping.store(true, std::sync::atomic::Ordering::Release);
        self.endpoint.close(quinn::VarInt::from_u32(0), b"master shutting down");
        let _ = tokio::time::timeout(DRAIN, self.endpoint.wait_idle()).await;
        let _ = self.stop.send(true);
        let _ = self.tick.await;
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
