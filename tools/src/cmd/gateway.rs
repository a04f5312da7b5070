//! `cvctl gateway --config cv.toml`: serves cv's namespace over the S3 API
//! (`[gateway]` of the config; the `[client]` and `[tls]` sections say how it
//! reaches the cluster) until Ctrl-C or SIGTERM.

use super::CmdResult;
use crate::config::CvConfig;
use crate::connect::ClientArgs;
use clap::Args;
use std::net::SocketAddr;

/// Arguments of `cvctl gateway`.
#[derive(Args, Debug)]
pub struct GatewayArgs {
    #[command(flatten)]
    conn: ClientArgs,
    /// Listen here instead of `gateway.bind`.
    #[arg(long)]
    bind: Option<SocketAddr>,
    /// Threads of the runtime that serves requests.
    #[arg(long, default_value_t = 2)]
    threads: usize,
}

impl GatewayArgs {
    /// Runs it.
    pub fn run(self) -> CmdResult {
        let cfg = CvConfig::load(&self.conn.config)?;
        let mut settings = cfg.gateway.clone().ok_or_else(|| {
            format!("{} has no [gateway] section: name at least one bucket there", self.conn.config.display())
        })?;
        if let Some(b) = self.bind {
            settings.bind = b;
        }
        if !(1..=64).contains(&self.threads) {
            return Err("--threads must be between 1 and 64".into());
        }
        let node = Some((cfg.common.tls.cert.clone(), cfg.common.tls.key.clone()));
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(self.threads).enable_all().build()?;
        rt.block_on(async move {
            let client = self.conn.connect().await?;
            let gw = cv_gateway::Gateway::start(client.clone(), &settings, node).await?;
            println!("cvctl: S3 gateway at {}", gw.endpoint());
            let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
            tokio::select! {
                r = tokio::signal::ctrl_c() => r?,
                _ = term.recv() => {}
            }
            gw.stop().await;
            client.shutdown().await;
            Ok(())
        })
    }
}
