//! The worker process: start every shard, then the control plane; stop them in reverse.

use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use cv_net::quic::TransportSettings;
use cv_net::tls::Identity;
use cv_ufs::UfsSettings;
use cv_wire::Limits;

use crate::config::WorkerSettings;
use crate::control::{self, ControlHandle, ControlSpec};
use crate::cores::allowed_cpus;
use crate::error::{Result, WorkerError, WorkerErrorKind};
use crate::fetch::{FetchPool, MasterSpec, PoolSpec};
use crate::local::{LocalServe, LocalServer};
use crate::shard::{self, ShardCmd, ShardSpec, Started, host_port};
use cv_rt::quic::EndpointOptions;

/// Starts workers; see [`WorkerServer::start`].
#[derive(Debug)]
pub struct WorkerServer;

/// A running worker. [`WorkerHandle::shutdown`] stops it cleanly; dropping it does the same
/// without reporting errors.
#[derive(Debug)]
pub struct WorkerHandle {
    shards: Vec<(flume::Sender<ShardCmd>, JoinHandle<Result<()>>)>,
    addrs: Vec<SocketAddr>,
    routes: Arc<[String]>,
    control: Option<ControlHandle>,
    ufs: Option<FetchPool>,
    local: Option<LocalServer>,
    /// Object-store requests of the fetch pool, for `/metrics`.
    ufs_stats: Option<Arc<cv_ufs::UfsStats>>,
    /// The master's capability keys, shared by the shards (`cv_net::capability`).
    keys: crate::Keys,
    /// The block trace's writer, when `[worker] trace` is on (ends once the shards stop).
    trace: Option<JoinHandle<()>>,
}

impl WorkerServer {
    /// Validates `settings`, starts one pinned shard thread per configured core (each with
    /// its block store under `<dir>/shard-<i>` and its QUIC endpoint on `base_port + i`),
    /// and, when a master is configured, the control-plane thread that registers with it.
    ///
    /// Returns once every shard listens; if one cannot start, the others are stopped and
    /// its error is returned.
    pub fn start(
        settings: &WorkerSettings,
        identity: &Identity,
        transport: &TransportSettings,
    ) -> Result<WorkerHandle> {
        transport.validate("transport")?;
        let cpus = allowed_cpus();
        let mut settings = settings.clone();
        if settings.shards == 0 {
            settings.shards = u16::try_from(cpus.len()).unwrap_or(u16::MAX);
        }
        settings.validate("worker")?;
        let n = settings.shards;
        let server_config = Arc::new(cv_net::quic::server_config(identity, transport)?);
        let endpoint = EndpointOptions {
            socket_buffer_bytes: usize::try_from(transport.socket_buffer.bytes()).unwrap_or(usize::MAX),
            max_udp_payload: transport.udp_payload(),
            max_connections: settings.max_connections as usize,
            retry_above: settings.retry_above as usize,
            ..EndpointOptions::default()
        };

        // The fetch pool resolves mounts through the master; without one there is nothing to fetch with.
        let masters = settings
            .master
            .clone()
            .map(|first| std::sync::Arc::new(cv_net::masters::MasterList::new(first, &settings.masters)));
        let ufs_stats = masters.as_ref().map(|_| Arc::new(cv_ufs::UfsStats::default()));
        let ufs = match (&masters, &ufs_stats) {
            (Some(masters), Some(stats)) => Some(FetchPool::start(PoolSpec {
                threads: usize::from(settings.ufs_threads),
                master: MasterSpec {
                    masters: masters.clone(),
                    node: settings.node.clone(),
                    identity: identity.clone(),
                    transport: transport.clone(),
                    bind: settings.bind,
                    timeout: settings.master_call_timeout.get(),
                },
                ufs: UfsSettings::default(),
                mount_refresh: settings.mount_refresh.get(),
                stats: stats.clone(),
            })?),
            _ => None,
        };

        let local = local_serve(&settings);
        let keys = crate::Keys::default();
        let (trace, trace_thread) = match &settings.trace {
            Some(path) => {
                let (sink, thread) = crate::trace::start(path, settings.trace_max_records).map_err(|e| {
                    WorkerError::new(WorkerErrorKind::Config, format!("block trace {}", path.display())).with_source(e)
                })?;
                (Some(sink), Some(thread))
            }
            None => (None, None),
        };
        let mut starting = Vec::with_capacity(usize::from(n));
        // Shards ask the control thread for an early heartbeat through it (capacity 1: one
        // pending request stands for any number).
        let (report_soon, report_asked) = flume::bounded(1);
        for i in 0..n {
            let port = if settings.base_port == 0 { 0 } else { settings.base_port + i };
            let spec = ShardSpec {
                index: i,
                cpu: settings.pin_cores.then(|| cpus[usize::from(i) % cpus.len()]),
                store: settings.store_config(i, n),
                bind: SocketAddr::new(settings.bind, port),
                server_config: server_config.clone(),
                endpoint: endpoint.clone(),
                ring_depth: settings.ring_depth,
                spin_before_park: settings.spin_before_park.get(),
                node: format!("{}/shard-{i}", settings.node),
                limits: Limits::DEFAULT,
                ufs: ufs.as_ref().map(FetchPool::fetcher),
                local: local.clone(),
                report_soon: report_soon.clone(),
                keys: keys.clone(),
                per_identity: settings.max_connections_per_identity as usize,
                trace: trace.clone(),
            };
            match shard::spawn(spec) {
                Ok(s) => starting.push(s),
                Err(e) => {
                    abandon(shard::wait_all(starting).into_iter().filter_map(|s| s.ok()).collect());
                    return Err(e);
                }
            }
        }
        let mut started: Vec<Started> = Vec::with_capacity(starting.len());
        let mut failure = None;
        for s in shard::wait_all(starting) {
            match s {
                Ok(s) => started.push(s),
                Err(e) => failure = failure.or(Some(e)),
            }
        }
        if let Some(e) = failure {
            abandon(started);
            return Err(e);
        }

        let addrs: Vec<SocketAddr> = started.iter().map(|s| s.addr).collect();
        let routes: Arc<[String]> = addrs.iter().map(|a| host_port(&settings.host, a.port())).collect();
        for s in &started {
            // A shard that died meanwhile shows up when it is joined.
            let _ = s.routes.send(routes.clone());
        }
        let shards: Vec<_> = started.into_iter().map(|s| (s.cmds, s.thread)).collect();
        // After the shards: their stores have created the data files it opens.
        let local = local.as_ref().and_then(|serve| {
            let files: Vec<_> = (0..n).map(|i| settings.store_config(i, n).data_paths()).collect();
            LocalServer::start(serve, &files)
                .inspect_err(|e| tracing::warn!(error = %e, "short-circuit reads not served"))
                .ok()
        });
        drop(trace); // the shards hold the sinks now: the writer ends when they stop
        let mut handle =
            WorkerHandle { shards, addrs, routes, control: None, ufs, local, ufs_stats, keys, trace: trace_thread };
        if let Some(masters) = masters {
            let heartbeat = settings.heartbeat_interval.get();
            let spec = ControlSpec {
                masters,
                host: settings.host.clone(),
                node: settings.node.clone(),
                zone: settings.zone.clone(),
                shard_ports: handle.addrs.iter().map(SocketAddr::port).collect(),
                // A shard bound to every address is dialed on loopback.
                own_shards: handle
                    .addrs
                    .iter()
                    .map(|a| match a.ip().is_unspecified() {
                        true => SocketAddr::new(std::net::Ipv4Addr::LOCALHOST.into(), a.port()),
                        false => *a,
                    })
                    .collect(),
                heartbeat,
                call_timeout: (heartbeat * 4).clamp(Duration::from_secs(1), Duration::from_secs(10)),
                retry_floor: Duration::from_millis(100),
                // With 500 ms connection attempts, a restarted master sees its workers again
                // within about a second of coming back.
                retry_ceiling: Duration::from_millis(500),
                identity: identity.clone(),
                transport: transport.clone(),
                bind: settings.bind,
                shards: handle.shards.iter().map(|(c, _)| c.clone()).collect(),
                id_file: settings.data_dirs.first().map(|d| d.path.join("worker-id")),
                report_soon: report_asked,
                keys: handle.keys.clone(),
            };
            handle.control = Some(control::spawn(spec)?);
        }
        tracing::info!(shards = n, routes = ?handle.routes, master = ?settings.master, "worker started");
        Ok(handle)
    }
}

/// What the shards answer `LocalHello` with, if short-circuit reads are served: a setting,
/// and a socket path that fits (a worker that cannot serve them still serves over QUIC).
fn local_serve(settings: &WorkerSettings) -> Option<Arc<LocalServe>> {
    if !settings.local_reads {
        return None;
    }
    let Some(path) = settings.local_socket_path() else {
        tracing::warn!(
            "short-circuit reads not served: the socket path in the first data dir is too long (set worker.local_socket)"
        );
        return None;
    };
    match LocalServe::new(&path, settings.local_lease.get()) {
        Ok(s) => Some(Arc::new(s)),
        Err(e) => {
            tracing::warn!(error = %e, "short-circuit reads not served");
            None
        }
    }
}

/// Stops shards that started while another failed: without a routing table they exit.
fn abandon(started: Vec<Started>) {
    for s in started {
        drop(s.routes);
        drop(s.cmds);
        let _ = s.thread.join();
    }
}

impl WorkerHandle {
    /// The capability keys the shards check with: the master's, handed over at registration
    /// and in heartbeats. A worker without a master (tests, an embedding) is handed its keys
    /// here ([`crate::merge_keys`]).
    pub fn capability_keys(&self) -> crate::Keys {
        self.keys.clone()
    }

    /// Puts a revocation list in force at every shard: those certificates are refused at the
    /// hello and their connections closed. The control thread does this with the master's list;
    /// a worker without a master (tests, an embedding) is handed one here.
    pub fn revoke(&self, list: cv_net::revoked::Revoked) {
        let list = std::sync::Arc::new(list);
        for (c, _) in &self.shards {
            let _ = c.send(crate::shard::ShardCmd::Revoked(list.clone()));
        }
    }

    /// What `/metrics` serves for this worker, gathered from its shards at each scrape (serve
    /// it with `cv_net::metrics::serve` on a tokio runtime).
    pub fn metrics(&self) -> cv_net::metrics::Gather {
        crate::control::metrics::gatherer(self.shards.iter().map(|(c, _)| c.clone()).collect(), self.ufs_stats.clone())
    }

    /// The address each shard's socket is bound to, by shard index.
    pub fn shard_addrs(&self) -> &[SocketAddr] {
        &self.addrs
    }

    /// The `host:port` each shard is advertised at (to the master, in redirects).
    pub fn routes(&self) -> &[String] {
        &self.routes
    }

    /// The id the master assigned, once registered (`None` without a master).
    pub fn worker_id(&self) -> Option<u64> {
        self.control.as_ref().and_then(ControlHandle::worker_id)
    }

    /// Waits until a master refused this worker's identity (a client certificate, another
    /// CA) or its protocol version, and returns why: the worker cannot join, so its process
    /// should exit. Pending forever without a master or while no master refused it.
    pub async fn refused(&self) -> String {
        match &self.control {
            Some(c) => c.refused().await,
            None => std::future::pending().await,
        }
    }

    /// Stops heartbeating, closes every endpoint, lets in-flight requests finish, closes
    /// every store and joins every thread. Returns the first error a shard reported.
    pub fn shutdown(mut self) -> Result<()> {
        self.stop()
    }

    fn stop(&mut self) -> Result<()> {
        if let Some(c) = self.control.take() {
            c.stop();
        }
        if let Some(l) = self.local.take() {
            l.stop();
        }
        for (cmds, _) in &self.shards {
            let _ = cmds.send(ShardCmd::Shutdown);
        }
        let mut first = Ok(());
        let ufs = self.ufs.take();
        for (i, (_, thread)) in self.shards.drain(..).enumerate() {
            let res = match thread.join() {
                Ok(r) => r,
                Err(_) => Err(WorkerError::new(WorkerErrorKind::ShardGone, format!("shard {i} panicked"))),
            };
            if let Err(e) = res {
                tracing::error!(shard = i, error = %e, "shard stopped with an error");
                if first.is_ok() {
                    first = Err(e);
                }
            }
        }
        // After the shards: their last requests may still have been waiting on a fetch.
        if let Some(pool) = ufs {
            pool.stop();
        }
        // The shards dropped their sinks: the writer writes what it holds and ends.
        if let Some(t) = self.trace.take() {
            let _ = t.join();
        }
        first
    }
}

impl Drop for WorkerHandle {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}
