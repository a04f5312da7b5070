//! `cvctl worker`: runs a worker (one pinned shard per core serving blocks over QUIC, and
//! the control plane registering with the master) from the `[worker]` section of the config
//! file, flags overriding it, until Ctrl-C or SIGTERM; then stops cleanly (endpoints closed,
//! in-flight requests finished, stores closed).

use super::CmdResult;
use crate::config::CvConfig;
use crate::signal::shutdown_signal;
use clap::Args;
use cv_net::config::{ByteSize, ConfigError};
use cv_net::quic::TransportSettings;
use cv_net::tls::Identity;
use cv_worker::{DataDirSettings, WorkerHandle, WorkerServer, WorkerSettings};
use std::future::Future;
use std::path::PathBuf;

/// Arguments of `cvctl worker`.
#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct WorkerArgs {
    /// Operate on a running worker instead of running one.
    #[command(subcommand)]
    action: Option<WorkerAction>,
    /// The cv configuration file (`[tls]`, optional `[transport]` and `[worker]`).
    #[arg(long, required = true)]
    config: Option<PathBuf>,
    /// The master's host:port (overrides `worker.master`).
    #[arg(long)]
    master: Option<String>,
    /// Host advertised to the master and clients (overrides `worker.host`).
    #[arg(long)]
    host: Option<String>,
    /// UDP port of shard 0; shard i listens on port + i (overrides `worker.base_port`).
    #[arg(long)]
    base_port: Option<u16>,
    /// Number of shards, 0 = one per CPU (overrides `worker.shards`).
    #[arg(long)]
    shards: Option<u16>,
    /// One data directory replacing `worker.data_dirs` (needs `--capacity`).
    #[arg(long, requires = "capacity")]
    data_dir: Option<PathBuf>,
    /// Capacity of `--data-dir`, e.g. 100GiB.
    #[arg(long, requires = "data_dir")]
    capacity: Option<ByteSize>,
}

impl WorkerArgs {
    /// The `[worker]` section (or its defaults) with the flags applied, validated.
    pub fn effective(&self, file: &CvConfig) -> Result<WorkerSettings, ConfigError> {
        let mut w = file.worker.clone().unwrap_or_default();
        if let Some(m) = &self.master {
            w.master = Some(m.clone());
        }
        if let Some(h) = &self.host {
            w.host = h.clone();
        }
        if let Some(p) = self.base_port {
            w.base_port = p;
        }
        if let Some(s) = self.shards {
            w.shards = s;
        }
        if let (Some(path), Some(capacity)) = (&self.data_dir, self.capacity) {
            w.data_dirs = vec![DataDirSettings { path: path.clone(), capacity }];
        }
        w.validate("worker")?;
        Ok(w)
    }

    /// Runs it.
    pub fn run(self) -> CmdResult {
        if let Some(WorkerAction::Drain(d)) = self.action {
            return d.run();
        }
        let Some(config) = &self.config else { return Err("cvctl worker needs --config".into()) };
        let file = CvConfig::load(config)?;
        let settings = self.effective(&file)?;
        let identity = Identity::load(&file.common.tls)?;
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        let _in_rt = rt.enter(); // the signal listeners need the runtime's driver
        serve_until(&settings, &identity, &file.common.transport, &rt, shutdown_signal(), |w| {
            println!("cv worker: {} shard(s) at {}", w.routes().len(), w.routes().join(", "));
            match &settings.master {
                Some(m) => println!("  registering with the master at {m}"),
                None => println!("  no master configured: serving without registering"),
            }
        })
    }
}

/// What `cvctl worker` does to a running worker.
#[derive(clap::Subcommand, Debug)]
pub enum WorkerAction {
    /// Drain a worker before retiring it: it takes no new blocks, and the master copies its
    /// cv-only blocks to other workers, then drops them from it.
    Drain(super::drain::DrainArgs),
}

/// Starts the worker, shows it to `ready`, waits on `rt` for `stop` (the shards run on their
/// own threads) or for a master to refuse the worker's identity, then shuts it down; a
/// refusal is the error returned, so the process exits with it and frees its ports.
pub fn serve_until<S: Future<Output = ()>>(
    settings: &WorkerSettings,
    identity: &Identity,
    transport: &TransportSettings,
    rt: &tokio::runtime::Runtime,
    stop: S,
    ready: impl FnOnce(&WorkerHandle),
) -> CmdResult {
    let worker = WorkerServer::start(settings, identity, transport)?;
    // Served on `rt` while it waits below; dropped (stopped) once the worker stops.
    let metrics = rt.block_on(crate::metrics::serve("worker.metrics", settings.metrics, worker.metrics()));
    ready(&worker);
    if let Some(m) = &metrics {
        println!("cv worker metrics at http://{}/metrics", m.local_addr());
    }
    let refused = rt.block_on(async {
        tokio::select! {
            _ = stop => None,
            why = worker.refused() => Some(why),
        }
    });
    tracing::info!("stopping the worker");
    drop(metrics);
    worker.shutdown()?;
    match refused {
        Some(why) => Err(why.into()),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cv_net::config::TlsConfig;
    use cv_net::rpc::{Conn, client_endpoint};
    use cv_net::tls::ClusterCa;
    use cv_wire::Limits;
    use cv_wire::msg::{Ping, Pong, Role};

    fn file(dir: &std::path::Path, worker: &str) -> Result<CvConfig, ConfigError> {
        if !dir.join("ca.pem").exists() {
            ClusterCa::init_dir(dir, "t", &[]).unwrap();
        }
        let tls = TlsConfig::in_dir(dir, "node");
        let text = format!(
            "[tls]\nca = {:?}\ncert = {:?}\nkey = {:?}\n{worker}",
            tls.ca.display().to_string(),
            tls.cert.display().to_string(),
            tls.key.display().to_string()
        );
        CvConfig::parse(&text)
    }

    fn args() -> WorkerArgs {
        WorkerArgs {
            action: None,
            config: Some(PathBuf::new()),
            master: None,
            host: None,
            base_port: None,
            shards: None,
            data_dir: None,
            capacity: None,
        }
    }

    #[test]
    fn flags_override_the_file_and_bad_sections_name_the_field() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = file(
            dir.path(),
            "[worker]\nmaster = \"m:7000\"\nshards = 3\n[[worker.data_dirs]]\npath = \"/d\"\ncapacity = \"1GiB\"\n",
        )
        .unwrap();
        let w = args().effective(&cfg).unwrap();
        assert_eq!((w.master.as_deref(), w.shards, w.data_dirs[0].capacity), (Some("m:7000"), 3, ByteSize::gib(1)));
        let a = WorkerArgs {
            master: Some("n:7001".into()),
            shards: Some(1),
            data_dir: Some("/e".into()),
            capacity: Some(ByteSize::gib(2)),
            ..args()
        };
        let w = a.effective(&cfg).unwrap();
        assert_eq!((w.master.as_deref(), w.shards), (Some("n:7001"), 1));
        assert_eq!(w.data_dirs, vec![DataDirSettings { path: "/e".into(), capacity: ByteSize::gib(2) }]);

        // No data directory anywhere, and a bad value in the section.
        let bare = file(dir.path(), "").unwrap();
        assert_eq!(args().effective(&bare).unwrap_err().field, "worker.data_dirs");
        let bad = "[worker]\nblock_size = \"3KiB\"\n[[worker.data_dirs]]\npath = \"/d\"\ncapacity = \"1GiB\"\n";
        assert_eq!(file(dir.path(), bad).unwrap_err().field, "worker.block_size");
    }

    #[test]
    fn serves_until_stopped() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = file(dir.path(), "").unwrap();
        let a = WorkerArgs {
            base_port: Some(0),
            shards: Some(1),
            data_dir: Some(dir.path().join("data")),
            capacity: Some(ByteSize::mib(16)),
            ..args()
        };
        let mut settings = a.effective(&cfg).unwrap();
        settings.bind = "127.0.0.1".parse().unwrap();
        settings.sync_data = false;
        settings.pin_cores = false;
        settings.metrics = "127.0.0.1:0".parse().unwrap();
        let node = Identity::load(&cfg.common.tls).unwrap();
        let client = Identity::load(&TlsConfig::in_dir(dir.path(), "client")).unwrap();
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let addr = std::cell::Cell::new(None);
        let stop = async {
            let ep = client_endpoint(&client, &cfg.common.transport).unwrap();
            let conn = Conn::connect(&ep, addr.get().unwrap(), Role::Client, "test", Limits::DEFAULT).await.unwrap();
            let pong: Pong = conn.call(&Ping { nonce: 3 }, &[]).await.unwrap().decode_body().unwrap();
            assert_eq!(pong.nonce, 3);
            ep.close(0u32.into(), b"done");
        };
        serve_until(&settings, &node, &cfg.common.transport, &rt, stop, |w| addr.set(Some(w.shard_addrs()[0])))
            .unwrap();
        assert!(dir.path().join("data/shard-0/blocks.index").exists());
    }
}
