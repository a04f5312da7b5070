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
            // Held until the gateway stops: dropping it stops serving /metrics.
            let metrics = crate::metrics::serve("gateway.metrics", settings.metrics, gatherer(gw.stats_reader())).await;
            if let Some(m) = &metrics {
                println!("cvctl: gateway metrics at http://{}/metrics", m.local_addr());
            }
            let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
            tokio::select! {
                r = tokio::signal::ctrl_c() => r?,
                _ = term.recv() => {}
            }
            drop(metrics);
            gw.stop().await;
            client.shutdown().await;
            Ok(())
        })
    }
}

/// The gateway's `/metrics`: what it served, by request kind, read at each scrape.
fn gatherer(stats: impl Fn() -> cv_gateway::GatewayStats + Send + Sync + 'static) -> cv_net::metrics::Gather {
    use cv_net::metrics::{Scrape, labels};
    let stats = std::sync::Arc::new(stats);
    std::sync::Arc::new(move || {
        let s = stats();
        Box::pin(async move {
            let mut out = Scrape::new();
            let kinds = [("get", s.gets), ("head", s.heads), ("list", s.lists), ("write", s.writes)];
            out.counters(
                "gateway_requests",
                "S3 requests answered, by kind",
                kinds.iter().map(|(k, v)| (labels(&[("kind", k)]), *v)),
            );
            out.counter("gateway_bytes_out", "Body bytes of the GETs answered", s.bytes_out);
            out.counter(
                "gateway_cache_corrupt",
                "Cached chunks dropped because they failed their checksum",
                s.cache_corrupt,
            );
            out
        })
    })
}
