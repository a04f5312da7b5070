//! An embedded local cluster — a master (or a Raft group of them) and one worker with its
//! shards in this process, on loopback, with fresh certificates — for `cvctl up`, the
//! benchmarks' default target and the end-to-end tests.

use crate::connect::write_client_config;
use cv_client::{Client, ClientSettings};
use cv_master::server::{MasterServer, MountPolicy, PeerConfig, RaftReads, ServerConfig};
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
    /// Masters: 1, or a Raft group of 3 or 5 (master/HA.md) on consecutive ports.
    pub masters: usize,
    /// How long the worker leases a block to a short-circuit reader.
    pub local_lease: Dur,
    /// Start the worker (`false`: the masters alone, as `bench open` and `bench meta` measure
    /// them, with stand-in workers of their own).
    pub worker: bool,
    /// A worker silent this long is lost.
    pub heartbeat_timeout: Dur,
    /// Under Raft: how the leader proves to a read that it still leads.
    pub raft_reads: RaftReads,
    /// Read a completed file's tail back from its blocks before keeping it (`[master]
    /// check_tails`); off where no worker holds the blocks.
    pub check_tails: bool,
    /// How long a block capability the masters mint is good for (`[master]
    /// capability_lifetime`).
    pub capability_lifetime: Dur,
    /// The worker records its block trace to this file (`[worker] trace`).
    pub trace: Option<PathBuf>,
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
            masters: 1,
            local_lease: WorkerSettings::default().local_lease,
            worker: true,
            heartbeat_timeout: Dur::secs(10),
            raft_reads: RaftReads::Lease,
            check_tails: ServerConfig::default().check_tails,
            capability_lifetime: ServerConfig::default().capability_lifetime,
            trace: None,
        }
    }
}

/// A running local cluster.
#[derive(Debug)]
pub struct LocalCluster {
    /// Each master's config and, while it runs, its server.
    masters: Vec<(ServerConfig, Option<MasterServer>)>,
    worker: Option<WorkerHandle>,
    worker_settings: WorkerSettings,
    node: Identity,
    /// The CA's directory: each master of a group is issued a certificate naming it.
    certs: PathBuf,
    transport: TransportSettings,
    client_tls: TlsConfig,
    client_config: PathBuf,
    admin_tls: TlsConfig,
    admin_config: PathBuf,
    master_addr: SocketAddr,
    other_masters: Vec<SocketAddr>,
}

/// A master of a Raft group gets a certificate of its own, naming it (`cv://role/master/<node>`),
/// so that the others take its Raft messages only as its member (`raft_members.rs`); a single
/// master serves on the shared node certificate.
fn master_identity(certs: &Path, cfg: &ServerConfig, node: &Identity) -> Result<Identity, ClusterError> {
    if cfg.peers.is_empty() {
        return Ok(node.clone());
    }
    let ca = ClusterCa::load_dir(certs)?;
    let role = cv_net::identity::CertRole::Master(cfg.node.clone());
    let sans = ["localhost".to_string(), "127.0.0.1".to_string()];
    let issued = ca.issue_for(&cfg.node, &role, &sans, Duration::from_secs(86_400))?;
    Ok(Identity::from_pem(&ca.cert_pem(), &issued.cert_pem, &issued.key_pem)?)
}

/// Free UDP ports on loopback, for masters that must know each other's address before any
/// binds (the sockets are closed again: another process could take a port meanwhile).
fn free_ports(n: usize) -> std::io::Result<Vec<u16>> {
    let socks: Vec<_> = (0..n).map(|_| std::net::UdpSocket::bind("127.0.0.1:0")).collect::<Result<_, _>>()?;
    socks.iter().map(|s| s.local_addr().map(|a| a.port())).collect()
}

impl LocalCluster {
    /// Starts the master, then the worker, and waits until the worker has
    /// registered. Must run inside a tokio runtime (the master serves on it).
    pub async fn start(opts: &ClusterOptions) -> Result<LocalCluster, ClusterError> {
        let certs = opts.dir.join("certs");
        if !certs.join("ca.pem").exists() {
            ClusterCa::init_dir(&certs, "local", &["localhost".into(), "127.0.0.1".into()])?;
        }
        // One capability secret for every master (a directory from before it gets one now).
        let capability_key = certs.join(cv_net::tls::CAPABILITY_KEY);
        if !capability_key.exists() {
            cv_net::tls::write_capability_key(&certs)?;
        }
        let node = Identity::load(&TlsConfig::in_dir(&certs, "node"))?;
        let transport = TransportSettings::default();

        let base = ServerConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], opts.master_port)),
            journal_dir: opts.dir.join("master"),
            heartbeat_timeout: opts.heartbeat_timeout,
            tail_budget: opts.tail_budget,
            raft_reads: opts.raft_reads,
            check_tails: opts.check_tails,
            capability_lifetime: opts.capability_lifetime,
            capability_key: Some(capability_key.clone()),
            // A local sandbox: local directories and stores on this host may be mounted, never
            // the cluster's own directory (certificates, journal, blocks).
            mounts: MountPolicy {
                allow: vec!["s3://".into(), "fs://".into()],
                endpoints: vec!["http://127.0.0.1:*".into(), "http://localhost:*".into()],
                private: vec![opts.dir.clone()],
            },
            ..ServerConfig::default()
        };
        let configs = match opts.masters {
            0 | 1 => vec![base],
            n if n % 2 == 1 && n <= 7 => {
                let ports: Vec<u16> = match opts.master_port {
                    0 => free_ports(n)?,
                    p => (0..n as u16).map(|i| p + i).collect(),
                };
                let peers: Vec<PeerConfig> = ports
                    .iter()
                    .enumerate()
                    .map(|(i, &port)| PeerConfig { id: i as u64 + 1, addr: SocketAddr::from(([127, 0, 0, 1], port)) })
                    .collect();
                (0..n)
                    .map(|i| ServerConfig {
                        listen: peers[i].addr,
                        journal_dir: opts.dir.join(format!("master{}", i + 1)),
                        node: format!("cv-master-{}", i + 1),
                        node_id: i as u64 + 1,
                        peers: peers.clone(),
                        bootstrap: i == 0,
                        ..base.clone()
                    })
                    .collect()
            }
            n => return Err(format!("{n} masters: a Raft group needs an odd number, at most 7").into()),
        };
        let mut masters = Vec::new();
        for mut cfg in configs {
            let server = MasterServer::start(&cfg, &master_identity(&certs, &cfg, &node)?, &transport).await?;
            // A restart (`start_master`) binds the same address, which clients and the worker know.
            cfg.listen = server.local_addr();
            masters.push((cfg, Some(server)));
        }
        let addrs: Vec<SocketAddr> =
            masters.iter().filter_map(|(_, m)| m.as_ref().map(MasterServer::local_addr)).collect();
        let (master_addr, other_masters) = (addrs[0], addrs[1..].to_vec());

        let worker_settings = WorkerSettings {
            master: Some(master_addr.to_string()),
            masters: other_masters.iter().map(SocketAddr::to_string).collect(),
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
            local_lease: opts.local_lease,
            trace: opts.trace.clone(),
            ..WorkerSettings::default()
        };
        let mut cluster = LocalCluster {
            masters,
            worker: None,
            worker_settings,
            node,
            certs: certs.clone(),
            transport,
            client_tls: TlsConfig::in_dir(&certs, "client"),
            client_config: opts.dir.join("client.toml"),
            admin_tls: TlsConfig::in_dir(&certs, "admin"),
            admin_config: opts.dir.join("admin.toml"),
            master_addr,
            other_masters,
        };
        if opts.worker {
            cluster.start_worker().await?;
        }
        write_client_config(&cluster.client_config, &certs, "client", &cluster.client_settings())?;
        write_client_config(&cluster.admin_config, &certs, "admin", &cluster.client_settings())?;
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

    /// Serves `/metrics` of every running master and of the worker on loopback ports of the
    /// system's choosing (`cvctl up` prints them; tests scrape them), as `(role, server)`;
    /// each stops when its server is dropped. A restarted worker needs serving again.
    pub async fn serve_metrics(&self) -> Result<Vec<(String, cv_net::metrics::MetricsServer)>, ClusterError> {
        let any = SocketAddr::from(([127, 0, 0, 1], 0));
        let mut out = Vec::new();
        for (i, (_, m)) in self.masters.iter().enumerate() {
            if let Some(m) = m {
                let name = if self.masters.len() > 1 { format!("master {}", i + 1) } else { "master".into() };
                out.push((name, cv_net::metrics::serve(any, m.metrics()).await?));
            }
        }
        if let Some(w) = &self.worker {
            out.push(("worker".into(), cv_net::metrics::serve(any, w.metrics()).await?));
        }
        Ok(out)
    }

    /// Stops the worker (its data stays); the master keeps serving.
    pub async fn stop_worker(&mut self) -> Result<(), ClusterError> {
        if let Some(w) = self.worker.take() {
            tokio::task::spawn_blocking(move || w.shutdown()).await??;
        }
        Ok(())
    }

    /// The (first) master's address.
    pub fn master_addr(&self) -> SocketAddr {
        self.master_addr
    }

    /// Every master's address, the first one first.
    pub fn master_addrs(&self) -> Vec<SocketAddr> {
        std::iter::once(self.master_addr).chain(self.other_masters.iter().copied()).collect()
    }

    /// Connections the (first) master holds now (0 while it is stopped).
    pub fn master_connections(&self) -> usize {
        self.masters[0].1.as_ref().map_or(0, MasterServer::open_connections)
    }

    /// Under Raft: master `i`'s node of the group, while it runs.
    pub fn master_raft(&self, i: usize) -> Option<&std::sync::Arc<cv_master_raft::RaftMaster>> {
        self.masters.get(i)?.1.as_ref()?.raft()
    }

    /// The identity masters and the worker serve with, which stand-in workers also present.
    pub fn node_identity(&self) -> &Identity {
        &self.node
    }

    /// The client identity of this cluster's `client.toml`.
    pub fn client_identity(&self) -> Result<Identity, ClusterError> {
        Ok(Identity::load(&self.client_tls)?)
    }

    /// The admin identity of this cluster's `admin.toml`.
    pub fn admin_identity(&self) -> Result<Identity, ClusterError> {
        Ok(Identity::load(&self.admin_tls)?)
    }

    /// Under Raft: the index of the master that leads now, if one does.
    pub fn leader(&self) -> Option<usize> {
        self.masters.iter().position(|(_, m)| m.as_ref().is_some_and(|m| m.core().is_leading()))
    }

    /// Stops master `i` (its files stay). In-process this is a clean stop: its peers see its
    /// connections close. A crash (kill -9) is the multi-host rig's.
    pub async fn stop_master(&mut self, i: usize) {
        if let Some(m) = self.masters.get_mut(i).and_then(|(_, m)| m.take()) {
            m.shutdown().await;
        }
    }

    /// Starts one more master of the group on a free port with pristine files, Raft id `id`,
    /// not yet a member (`cvctl master add` makes it one); its index and address.
    pub async fn start_extra_master(&mut self, id: u64) -> Result<(usize, SocketAddr), ClusterError> {
        let addr = SocketAddr::from(([127, 0, 0, 1], free_ports(1)?[0]));
        let mut peers = self.masters[0].0.peers.clone();
        peers.push(PeerConfig { id, addr });
        let cfg = ServerConfig {
            listen: addr,
            journal_dir: self.masters[0].0.journal_dir.with_file_name(format!("master{id}")),
            node: format!("cv-master-{id}"),
            node_id: id,
            peers,
            bootstrap: false,
            ..self.masters[0].0.clone()
        };
        let identity = master_identity(&self.certs, &cfg, &self.node)?;
        let server = MasterServer::start(&cfg, &identity, &self.transport).await?;
        self.masters.push((cfg, Some(server)));
        Ok((self.masters.len() - 1, addr))
    }

    /// Starts master `i` again on its files.
    pub async fn start_master(&mut self, i: usize) -> Result<(), ClusterError> {
        let cfg = ServerConfig { bootstrap: false, ..self.masters[i].0.clone() };
        // Its port was an ephemeral one: while it was down, another socket of this machine may
        // have been given it for a moment (a client's probe, a dial). Try again for a while.
        let mut tries = 0;
        let identity = master_identity(&self.certs, &cfg, &self.node)?;
        let server = loop {
            match MasterServer::start(&cfg, &identity, &self.transport).await {
                Ok(s) => break s,
                Err(e) if tries < 30 && addr_in_use(&e) => {
                    tries += 1;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(e) => return Err(e.into()),
            }
        };
        self.masters[i].1 = Some(server);
        Ok(())
    }

    /// The worker's shard addresses (empty while it is stopped).
    pub fn shard_addrs(&self) -> Vec<SocketAddr> {
        self.worker.as_ref().map(|w| w.shard_addrs().to_vec()).unwrap_or_default()
    }

    /// An application's config file written for this cluster (`client.toml`: a client
    /// certificate, which may read and write files but not change the cluster).
    pub fn client_config(&self) -> &Path {
        &self.client_config
    }

    /// The operator's config file (`admin.toml`: an admin certificate, for mounts, drain,
    /// free and the masters).
    pub fn admin_config(&self) -> &Path {
        &self.admin_config
    }

    /// Client settings pointing at this cluster.
    pub fn client_settings(&self) -> ClientSettings {
        ClientSettings { master: self.master_addr, masters: self.other_masters.clone(), ..ClientSettings::default() }
    }

    /// A new client with its own connections, using the admin identity: whoever runs a local
    /// cluster is its operator (mounts, free), and reads the same as an application.
    pub async fn client(&self) -> Result<Client, ClusterError> {
        self.client_with(self.client_settings()).await
    }

    /// As [`LocalCluster::client`], with the given settings (e.g. a short deadline).
    pub async fn client_with(&self, settings: ClientSettings) -> Result<Client, ClusterError> {
        Ok(Client::connect(settings, &self.admin_identity()?, &self.transport).await?)
    }

    /// A new client with an application's identity (`client.pem`): no rights over the cluster.
    pub async fn app_client(&self) -> Result<Client, ClusterError> {
        Ok(Client::connect(self.client_settings(), &self.client_identity()?, &self.transport).await?)
    }

    /// Stops the worker, then the master.
    pub async fn shutdown(mut self) -> Result<(), ClusterError> {
        self.stop_worker().await?;
        for (_, m) in &mut self.masters {
            if let Some(m) = m.take() {
                m.shutdown().await;
            }
        }
        Ok(())
    }
}

/// Whether the cause of `e`, at any depth, is an address already in use.
fn addr_in_use(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut at = Some(e);
    while let Some(err) = at {
        if err.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::AddrInUse) {
            return true;
        }
        at = err.source();
    }
    false
}
