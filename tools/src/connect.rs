//! How client-side subcommands reach a cluster: a config file with a client
//! identity and a `[client]` section, optionally overridden by flags.

use crate::config::CvConfig;
use clap::Args;
use cv_client::{Client, ClientSettings, LeaderHint};
use cv_net::tls::Identity;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// Flags shared by every command that talks to a cluster.
#[derive(Args, Debug, Clone)]
pub struct ClientArgs {
    /// Config file with `[tls]` (a client identity) and `[client]`; `cvctl up` writes one.
    #[arg(long, env = "CV_CONFIG", default_value = "cv-client.toml")]
    pub config: PathBuf,
    /// Master address, overriding `client.master` from the file.
    #[arg(long)]
    pub master: Option<SocketAddr>,
    /// Where to keep the leader hint (which of several masters led when cvctl last looked, so
    /// the next command dials it first and no other): a directory, or `off`. Default:
    /// `$XDG_CACHE_HOME/cv`, else `~/.cache/cv`.
    #[arg(long, env = "CV_LEADER_HINT", value_name = "DIR|off")]
    pub leader_hint: Option<String>,
}

impl ClientArgs {
    /// Loads the file, applies overrides and connects.
    pub async fn connect(&self) -> Result<Client, Box<dyn std::error::Error + Send + Sync>> {
        let cfg = CvConfig::load(&self.config)?;
        let mut settings = cfg.common.client.clone();
        if let Some(m) = self.master {
            settings.master = m;
        }
        settings.validate("client")?;
        let identity = Identity::load(&cfg.common.tls)?;
        let hint = self.hint(&settings);
        Ok(Client::connect_hinted(settings, &identity, &cfg.common.transport, hint).await?)
    }

    /// The leader hint of `settings`' masters, unless turned off or there is nowhere to keep it.
    fn hint(&self, settings: &ClientSettings) -> Option<LeaderHint> {
        let dir = match self.leader_hint.as_deref() {
            Some("off") => return None,
            Some(dir) => PathBuf::from(dir),
            None => default_hint_dir()?,
        };
        Some(LeaderHint::in_dir(&dir, settings))
    }

    /// Connects, runs `f` with the client and shuts the client down whatever `f` returned,
    /// so that the command's connections are closed at the servers before it exits.
    pub async fn with_client<T>(
        &self,
        f: impl AsyncFnOnce(&Client) -> T,
    ) -> Result<T, Box<dyn std::error::Error + Send + Sync>> {
        let client = self.connect().await?;
        let out = f(&client).await;
        client.shutdown().await;
        Ok(out)
    }
}

/// One administrative call (the hello says `Admin`, which the master grants only to an admin
/// certificate) to the master that leads: see [`leader_call`].
pub async fn admin_call<M: cv_wire::Message>(
    args: &ClientArgs,
    msg: &M,
    within: std::time::Duration,
) -> Result<cv_wire::Frame, Box<dyn std::error::Error + Send + Sync>> {
    leader_call(args, msg, within, cv_wire::msg::Role::Admin).await
}

/// One call, with the hello saying `role`, to the master that leads: the configured masters
/// are tried in turn, and a `NotLeader` answer naming the leader is followed. Waits at most
/// `within` for an answer (adding a master waits until it has caught up).
pub async fn leader_call<M: cv_wire::Message>(
    args: &ClientArgs,
    msg: &M,
    within: std::time::Duration,
    role: cv_wire::msg::Role,
) -> Result<cv_wire::Frame, Box<dyn std::error::Error + Send + Sync>> {
    use cv_net::dial::{Dial, Persist};
    use cv_net::rpc::client_endpoint;
    let cfg = CvConfig::load(&args.config)?;
    let mut list = vec![args.master.unwrap_or(cfg.common.client.master)];
    list.extend(cfg.common.client.masters.iter().filter(|a| !list.contains(a)).copied().collect::<Vec<_>>());
    // The hinted leader first: its answer needs no redirect.
    if let Some(led) = args.hint(&cfg.common.client).and_then(|h| h.read()).filter(|a| list.contains(a)) {
        list.retain(|a| *a != led);
        list.insert(0, led);
    }
    let identity = Identity::load(&cfg.common.tls)?;
    let ep = client_endpoint(&identity, &cfg.common.transport)?;
    let dial = cfg.common.transport.idle_timeout.get();
    let (mut at, mut target) = (0, list[0]);
    let mut last = String::from("no master tried");
    for _ in 0..list.len() * 3 {
        // One attempt per master (the next may lead); one that answered gets `within`.
        let connect = Dial {
            endpoint: &ep,
            addr: target,
            peer: &"master",
            role,
            node: "cvctl",
            limits: cv_wire::Limits::DEFAULT,
            answer_within: dial,
            deadline: tokio::time::Instant::now() + within,
            persist: Persist::Once,
        };
        let next = match connect.connect().await {
            Ok(conn) => match tokio::time::timeout(within, conn.call(msg, &[])).await {
                Ok(Ok(f)) => {
                    let close = || conn.quinn().close(0u32.into(), b"done");
                    cv_net::rpc::close_and_tell(std::slice::from_ref(&conn), close, Duration::from_secs(1)).await;
                    return Ok(f);
                }
                Ok(Err(e)) if e.code() == Some(cv_wire::ErrorCode::NotLeader) => {
                    last = format!("master at {target}: {e}");
                    e.redirect().and_then(|r| r.parse().ok())
                }
                Ok(Err(e)) => return Err(format!("master at {target}: {e}").into()),
                Err(_) => return Err(format!("master at {target} did not answer within {within:?}").into()),
            },
            Err(e) => {
                last = e.to_string();
                None
            }
        };
        target = next.unwrap_or_else(|| {
            at = (at + 1) % list.len();
            list[at]
        });
    }
    Err(format!("no master of {list:?} took the call; last: {last}").into())
}

/// The user's cache directory for cv: `$XDG_CACHE_HOME/cv`, else `$HOME/.cache/cv`.
fn default_hint_dir() -> Option<PathBuf> {
    let nonempty = |v: std::ffi::OsString| (!v.is_empty()).then(|| PathBuf::from(v));
    match std::env::var_os("XDG_CACHE_HOME").and_then(nonempty) {
        Some(cache) => Some(cache.join("cv")),
        None => Some(std::env::var_os("HOME").and_then(nonempty)?.join(".cache").join("cv")),
    }
}

/// A small runtime for one command.
pub fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()
}

/// Writes a client config file pointing at `settings`' masters with the identity `who`
/// (`client` for applications, `admin` for the operator) from a `cvctl cert init` directory.
pub fn write_client_config(
    path: &std::path::Path,
    certs: &std::path::Path,
    who: &str,
    settings: &ClientSettings,
) -> std::io::Result<()> {
    let text = format!(
        "# Written by cvctl: the {who} identity. Use with `cvctl fs --config {path}` or CV_CONFIG={path}.\n\
         [tls]\nca = \"{ca}\"\ncert = \"{cert}\"\nkey = \"{key}\"\n\n[client]\n{client}",
        path = path.display(),
        ca = certs.join("ca.pem").display(),
        cert = certs.join(format!("{who}.pem")).display(),
        key = certs.join(format!("{who}.key")).display(),
        client = toml::to_string(settings).map_err(std::io::Error::other)?,
    );
    std::fs::write(path, text)
}
