//! `cvctl master`: runs the master from the `[master]` section of the config file (flags
//! override it) until Ctrl-C or SIGTERM, then shuts down cleanly (endpoint closed, journal
//! flushed and stopped). `cvctl master add|remove|list` change and show a Raft group of
//! masters (master/HA.md).

use super::CmdResult;
use crate::config::CvConfig;
use crate::connect::{ClientArgs, admin_call, leader_call, runtime};
use crate::signal::shutdown_signal;
use clap::{Args, Subcommand};
use cv_master::server::{MasterServer, ServerConfig};
use cv_net::quic::TransportSettings;
use cv_net::tls::Identity;
use cv_wire::msg::{ChangeMasters, Done, ListMasters, ListMastersOk};
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;

/// Arguments of `cvctl master`.
#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct MasterArgs {
    #[command(subcommand)]
    group: Option<GroupCmd>,
    /// The cv configuration file (`[tls]`, optional `[transport]` and `[master]`).
    #[arg(long, required = true)]
    config: Option<PathBuf>,
    /// UDP address to listen on (overrides `master.listen`).
    #[arg(long)]
    listen: Option<SocketAddr>,
    /// Directory of the journal and snapshot (overrides `master.journal_dir`).
    #[arg(long)]
    journal_dir: Option<PathBuf>,
}

impl MasterArgs {
    /// The `[master]` section (or its defaults) with the flags applied, validated.
    pub fn effective(&self, file: &CvConfig) -> Result<ServerConfig, cv_net::config::ConfigError> {
        let mut m = file.master.clone().unwrap_or_default();
        if let Some(l) = self.listen {
            m.listen = l;
        }
        if let Some(d) = &self.journal_dir {
            m.journal_dir = d.clone();
        }
        m.validate("master")?;
        // No mount may reach the node's key or the CA beside it.
        let tls = &file.common.tls;
        m.mounts
            .private
            .extend([&tls.key, &tls.cert, &tls.ca].iter().filter_map(|p| p.parent()).map(|p| p.to_path_buf()));
        Ok(m)
    }

    /// Runs it.
    pub fn run(self) -> CmdResult {
        if let Some(cmd) = self.group {
            return cmd.run();
        }
        let file = CvConfig::load(self.config.as_deref().ok_or("--config is required")?)?;
        let master = self.effective(&file)?;
        let identity = Identity::load(&file.common.tls)?;
        let rt = tokio::runtime::Builder::new_multi_thread().enable_all().thread_name("cv-master").build()?;
        let _in_rt = rt.enter(); // the signal listeners need the runtime's driver
        rt.block_on(serve_until(&master, &identity, &file.common.transport, shutdown_signal(), |addr| {
            println!("cv master listening on {addr} (journal {})", master.journal_dir.display());
        }))
    }
}

/// Changes to a Raft group of masters, made on its leader (any master named in the client
/// config finds it).
#[derive(Subcommand, Debug)]
pub enum GroupCmd {
    /// Adds a master (started with the group in its `peers` and pristine files): it becomes a
    /// learner, is replicated to until it has caught up, then a voter.
    Add {
        #[command(flatten)]
        conn: ClientArgs,
        /// Its Raft id (unused in the group).
        #[arg(long)]
        id: u64,
        /// Its QUIC address (ip:port).
        #[arg(long)]
        addr: SocketAddr,
    },
    /// Removes a master from the group (a lost one, or before wiping its disk).
    Remove {
        #[command(flatten)]
        conn: ClientArgs,
        /// Its Raft id.
        #[arg(long)]
        id: u64,
    },
    /// Lists the group's masters and which leads.
    List {
        #[command(flatten)]
        conn: ClientArgs,
    },
}

impl GroupCmd {
    fn run(self) -> CmdResult {
        // Adding waits for the new master to catch up, which takes as long as the log is long.
        let within = std::time::Duration::from_secs(600);
        runtime()?.block_on(async move {
            match self {
                GroupCmd::Add { conn, id, addr } => {
                    let req = ChangeMasters { add: true, id, addr: addr.to_string() };
                    admin_call(&conn, &req, within).await?.access::<Done>()?;
                    println!("master {id} at {addr}: added, caught up and voting");
                }
                GroupCmd::Remove { conn, id } => {
                    let req = ChangeMasters { add: false, id, addr: String::new() };
                    admin_call(&conn, &req, within).await?.access::<Done>()?;
                    println!("master {id}: removed from the group");
                }
                GroupCmd::List { conn } => {
                    // Any certificate may look.
                    let role = cv_wire::msg::Role::Client;
                    let ok: ListMastersOk = leader_call(&conn, &ListMasters {}, within, role).await?.decode_body()?;
                    for m in &ok.members {
                        let role = if ok.leader == Some(m.id) {
                            "leader"
                        } else if m.voter {
                            "voter"
                        } else {
                            "learner"
                        };
                        println!("{:>4}  {:<24} {role}", m.id, m.addr);
                    }
                }
            }
            Ok(())
        })
    }
}

/// Serves until `stop` resolves, then shuts down cleanly. `ready` sees the bound address.
pub async fn serve_until(
    master: &ServerConfig,
    identity: &Identity,
    transport: &TransportSettings,
    stop: impl Future<Output = ()>,
    ready: impl FnOnce(SocketAddr),
) -> CmdResult {
    let server = MasterServer::start(master, identity, transport).await?;
    // Held until the master stops: dropping it stops serving /metrics.
    let metrics = crate::metrics::serve("master.metrics", master.metrics, server.metrics()).await;
    ready(server.local_addr());
    if let Some(m) = &metrics {
        println!("cv master metrics at http://{}/metrics", m.local_addr());
    }
    stop.await;
    drop(metrics);
    tracing::info!("stopping the master");
    server.shutdown().await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use cv_net::config::TlsConfig;
    use cv_net::rpc::{Conn, client_endpoint};
    use cv_net::tls::ClusterCa;
    use cv_wire::Limits;
    use cv_wire::msg::{Mkdir, Role, Stat, StatOk};

    fn file(dir: &std::path::Path, master: &str) -> CvConfig {
        ClusterCa::init_dir(dir, "t", &[]).unwrap();
        let tls = TlsConfig::in_dir(dir, "node");
        let text = format!(
            "[tls]\nca = {:?}\ncert = {:?}\nkey = {:?}\n{master}",
            tls.ca.display().to_string(),
            tls.cert.display().to_string(),
            tls.key.display().to_string()
        );
        CvConfig::parse(&text).unwrap()
    }

    #[test]
    fn flags_override_the_file_and_bad_sections_name_the_field() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = file(dir.path(), "[master]\nlisten = \"127.0.0.1:1\"\njournal_dir = \"/a\"\nsnapshot_every = 7\n");
        let args = |listen: Option<&str>| MasterArgs {
            group: None,
            config: Some(PathBuf::new()),
            listen: listen.map(|l| l.parse().unwrap()),
            journal_dir: Some(PathBuf::from("/b")),
        };
        let m = args(None).effective(&cfg).unwrap();
        assert_eq!((m.listen.port(), m.journal_dir.to_str(), m.snapshot_every), (1, Some("/b"), 7));
        assert_eq!(args(Some("127.0.0.1:9")).effective(&cfg).unwrap().listen.port(), 9);

        let tls = TlsConfig::in_dir(dir.path(), "node");
        let text = format!(
            "[tls]\nca = {:?}\ncert = {:?}\nkey = {:?}\n[master]\nblock_size = \"1KiB\"\n",
            tls.ca.display().to_string(),
            tls.cert.display().to_string(),
            tls.key.display().to_string()
        );
        assert_eq!(CvConfig::parse(&text).unwrap_err().field, "master.block_size");
    }

    #[test]
    fn serves_until_stopped_and_keeps_the_journal() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = file(dir.path(), "[master]\nmetrics = \"127.0.0.1:0\"\n");
        let args = MasterArgs {
            group: None,
            config: Some(PathBuf::new()),
            listen: Some("127.0.0.1:0".parse().unwrap()),
            journal_dir: Some(dir.path().join("journal")),
        };
        let master = args.effective(&cfg).unwrap();
        let node = Identity::load(&cfg.common.tls).unwrap();
        let client = Identity::load(&TlsConfig::in_dir(dir.path(), "client")).unwrap();
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        rt.block_on(async {
            for round in 0..2 {
                let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
                let (addr_tx, addr_rx) = tokio::sync::oneshot::channel();
                let stop = async move {
                    let _ = stop_rx.await;
                };
                let server = serve_until(&master, &node, &cfg.common.transport, stop, move |a| {
                    let _ = addr_tx.send(a);
                });
                let talk = async {
                    let addr = addr_rx.await.unwrap();
                    let ep = client_endpoint(&client, &cfg.common.transport).unwrap();
                    let conn = Conn::connect(&ep, addr, Role::Client, "test", Limits::DEFAULT).await.unwrap();
                    if round == 0 {
                        conn.call(&Mkdir { path: "/kept".into(), parents: false, mode: 0o755 }, &[]).await.unwrap();
                    } else {
                        let reply = conn.call(&Stat { path: "/kept".into() }, &[]).await.unwrap();
                        assert_eq!(reply.decode_body::<StatOk>().unwrap().status.path, "/kept");
                    }
                    stop_tx.send(()).unwrap();
                };
                let (served, ()) = tokio::join!(server, talk);
                served.unwrap();
            }
        });
    }
}
