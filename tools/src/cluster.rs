//! An embedded local cluster — a master and one worker with its shards in
//! this process, on loopback, with fresh certificates — for `cvctl up`, the
//! benchmarks' default target and the end-to-end tests.

use crate::connect::write_client_config;
use cv_client::{Client, ClientSettings};
use cv_master::server::{MasterServer, ServerConfig};
use cv_net::config::{ByteSize, Dur, TlsConfig};
use cv_net::quic::TransportSettings;
use cv_net::tls::{ClusterCa, Identity};
use cv_worker::{DataDirSettings, WorkerHandle, WorkerServer, WorkerSettings};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Error of cluster setup, for the command line and tests.
pub type ClusterError = Box<dyn std::error::Error + Send + Sync>;

/// How to lay out the local cluster.
#[derive(Clone, Debug)]
pub struct ClusterOptions {
    /// Holds certificates, the master's journal, the worker's data and `client.toml`.
    pub dir: PathBuf,
    /// Worker shards (0 = one per core).
    pub shards: u16,
    /// Worker disk capacity.
    pub capacity: ByteSize,
    /// Worker memory tier.
    pub memory_tier: ByteSize,
    /// Master UDP port (0 = any free port).
    pub master_port: u16,
    /// First worker shard port (0 = any free ports).
    pub worker_port: u16,
    /// fdatasync block data before acknowledging writes.
    pub sync_data: bool,
    /// Pin each worker shard to its own CPU.
    pub pin_cores: bool,
    /// How long an idle shard polls before it sleeps.
    pub spin_before_park: Dur,
    /// The master's tail-cache budget.
    pub tail_budget: ByteSize,
}

impl ClusterOptions {
    /// Defaults for tests and benchmarks: ephemeral ports under `dir`.
    pub fn ephemeral(dir: &Path) -> Self {
        ClusterOptions {
            dir: dir.to_path_buf(),
            shards: 2,
            capacity: ByteSize::gib(2),
            memory_tier: ByteSize::mib(64),
            master_port: 0,
            worker_port: 0,
            sync_data: true,
            pin_cores: true,
            spin_before_park: Dur::millis(0),
            tail_budget: ServerConfig::default().tail_budget,
        }
    }
}

/// A running local cluster.
#[derive(Debug)]
pub struct LocalCluster {
    master: Option<MasterServer>,
    worker: Option<WorkerHandle>,
    worker_settings: WorkerSettings,
    node: Identity,
    transport: TransportSettings,
    client_tls: TlsConfig,
    client_config: PathBuf,
    master_addr: SocketAddr,
}

impl LocalCluster {
    /// Starts the master, then the worker, and waits until the worker has
    /// registered. Must run inside a tokio runtime (the master serves on it).
    pub async fn start(opts: &ClusterOptions) -> Result<LocalCluster, ClusterError> {
        let certs = opts.dir.join("certs");
        if !certs.join("ca.pem").exists() {
            ClusterCa::init_dir(&certs, "local", &["localhost".into(), "127.0.0.1".into()])?;
        }
        let node = Identity::load(&TlsConfig::in_dir(&certs, "node"))?;
        let transport = TransportSettings::default();

        let master_cfg = ServerConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], opts.master_port)),
            journal_dir: opts.dir.join("master"),
            heartbeat_timeout: Dur::secs(10),
            tail_budget: opts.tail_budget,
            ..ServerConfig::default()
        };
        let master = MasterServer::start(&master_cfg, &node, &transport).await?;
        let master_addr = master.local_addr();

        let worker_settings = WorkerSettings {
            master: Some(master_addr.to_string()),
            host: "127.0.0.1".into(),
            bind: [127, 0, 0, 1].into(),
            base_port: opts.worker_port,
            shards: opts.shards,
            data_dirs: vec![DataDirSettings { path: opts.dir.join("worker"), capacity: opts.capacity }],
            memory_tier: opts.memory_tier,
            heartbeat_interval: Dur::millis(500),
            sync_data: opts.sync_data,
            pin_cores: opts.pin_cores,
            spin_before_park: opts.spin_before_park,
            ..WorkerSettings::default()
        };
        let mut cluster = LocalCluster {
            master: Some(master),
            worker: None,
            worker_settings,
            node,
            transport,
            client_tls: TlsConfig::in_dir(&certs, "client"),
            client_config: opts.dir.join("client.toml"),
            master_addr,
        };
        cluster.start_worker().await?;
        write_client_config(&cluster.client_config, &certs, master_addr)?;
        Ok(cluster)
    }

    /// Starts (or restarts) the worker on the same data and waits until the
    /// master counts it live.
    pub async fn start_worker(&mut self) -> Result<(), ClusterError> {
        let (settings, node, transport) = (self.worker_settings.clone(), self.node.clone(), self.transport.clone());
        let handle = tokio::task::spawn_blocking(move || WorkerServer::start(&settings, &node, &transport)).await??;
        self.worker = Some(handle);
        let client = self.client().await?;
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let report = client.report().await?;
            if report.workers.iter().any(|w| w.live) {
                client.close();
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err("the worker did not register with the master within 20 s".into());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Stops the worker (its data stays); the master keeps serving.
    pub async fn stop_worker(&mut self) -> Result<(), ClusterError> {
        if let Some(w) = self.worker.take() {
            tokio::task::spawn_blocking(move || w.shutdown()).await??;
        }
        Ok(())
    }

    /// The master's address.
    pub fn master_addr(&self) -> SocketAddr {
        self.master_addr
    }

    /// Connections the master holds now (0 while it is stopped).
    pub fn master_connections(&self) -> usize {
        self.master.as_ref().map_or(0, MasterServer::open_connections)
    }

    /// The worker's shard addresses (empty while it is stopped).
    pub fn shard_addrs(&self) -> Vec<SocketAddr> {
        self.worker.as_ref().map(|w| w.shard_addrs().to_vec()).unwrap_or_default()
    }

    /// The client config file written for this cluster.
    pub fn client_config(&self) -> &Path {
        &self.client_config
    }

    /// Client settings pointing at this cluster.
    pub fn client_settings(&self) -> ClientSettings {
        ClientSettings { master: self.master_addr, ..ClientSettings::default() }
    }

    /// A new client with its own connections, using the client identity.
    pub async fn client(&self) -> Result<Client, ClusterError> {
        self.client_with(self.client_settings()).await
    }

    /// A new client with the given settings (e.g. a short deadline).
    pub async fn client_with(&self, settings: ClientSettings) -> Result<Client, ClusterError> {
        let id = Identity::load(&self.client_tls)?;
        Ok(Client::connect(settings, &id, &self.transport).await?)
    }

    /// Stops the worker, then the master.
    pub async fn shutdown(mut self) -> Result<(), ClusterError> {
        self.stop_worker().await?;
        if let Some(m) = self.master.take() {
            m.shutdown().await;
        }
        Ok(())
    }
}
