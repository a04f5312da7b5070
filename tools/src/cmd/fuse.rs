//! `cvctl fuse <mountpoint>`: mounts cv with FUSE until Ctrl-C, SIGTERM or
//! an external `umount`.

use super::CmdResult;
use crate::connect::ClientArgs;
use clap::Args;
use cv_fuse::MountOptions;
use cv_net::config::{Dur, MetricsAddr};
use std::path::PathBuf;
use std::time::Duration;

/// Arguments of `cvctl fuse`.
#[derive(Args, Debug)]
pub struct FuseArgs {
    /// Where to mount (an existing empty directory).
    mountpoint: PathBuf,
    #[command(flatten)]
    conn: ClientArgs,
    /// cv directory shown at the mount point.
    #[arg(long, default_value = "/")]
    root: String,
    /// How long the kernel trusts attributes and lookups (e.g. 1s, 0 to always ask).
    #[arg(long, default_value = "1s")]
    attr_ttl: Dur,
    /// Let every local user use the mount; permission bits are checked by the kernel.
    #[arg(long)]
    allow_other: bool,
    /// Mount read-only: every change is refused (EROFS), and the kernel keeps a file's
    /// attributes across its reads (the mount for a query engine's compute node).
    #[arg(long)]
    read_only: bool,
    /// With --read-only: answer an open, an opendir or a lookup from what the master said
    /// about that path within this long (e.g. 1s; 0, the default, asks every time). An open
    /// may then see a version this old; a read of a version since gone fails and the next
    /// open asks again.
    #[arg(long, default_value = "0s")]
    open_ttl: Dur,
    /// Directory for staged files (edits other than front-to-back writes,
    /// published at close and fsync); default the system's temporary directory.
    #[arg(long)]
    staging_dir: Option<PathBuf>,
    /// Threads of the runtime that serves the mount's requests.
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// Where to serve Prometheus `/metrics` over HTTP (`ip:port`), or `off`.
    #[arg(long, default_value = "127.0.0.1:9466")]
    metrics: MetricsAddr,
}

impl FuseArgs {
    /// Runs it.
    pub fn run(self) -> CmdResult {
        let opts = MountOptions {
            root: self.root.clone(),
            attr_ttl: self.attr_ttl.get(),
            entry_ttl: self.attr_ttl.get(),
            allow_other: self.allow_other,
            read_only: self.read_only,
            open_ttl: self.open_ttl.get(),
            staging_dir: self.staging_dir.clone(),
            ..MountOptions::default()
        };
        if !(1..=64).contains(&self.threads) {
            return Err("--threads must be between 1 and 64".into());
        }
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(self.threads).enable_all().build()?;
        rt.block_on(async move {
            let client = self.conn.connect().await?;
            let mounted = cv_fuse::mount(client.clone(), &self.mountpoint, opts).await?;
            println!("cvctl: cv {} mounted at {}", self.root, self.mountpoint.display());
            // Held until unmounted: dropping it stops serving /metrics.
            let metrics =
                crate::metrics::serve("--metrics", self.metrics, gatherer(mounted.stats(), client.clone())).await;
            if let Some(m) = &metrics {
                println!("cvctl: fuse metrics at http://{}/metrics", m.local_addr());
            }
            let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
            let mut tick = tokio::time::interval(Duration::from_millis(200));
            loop {
                tokio::select! {
                    r = tokio::signal::ctrl_c() => { r?; break; }
                    _ = term.recv() => break,
                    _ = tick.tick() => if mounted.is_finished() { break },
                }
            }
            drop(metrics);
            // Unmounting waits for the session thread: off the runtime.
            tokio::task::spawn_blocking(move || mounted.unmount()).await??;
            client.shutdown().await;
            Ok(())
        })
    }
}

/// The mount's `/metrics`: the kernel's requests by kind and the bytes they moved, and the
/// client's connections to the cluster, read at each scrape.
fn gatherer(stats: std::sync::Arc<cv_fuse::FuseStats>, client: cv_client::Client) -> cv_net::metrics::Gather {
    use cv_net::metrics::{Scrape, labels};
    std::sync::Arc::new(move || {
        let (s, conns) = (stats.snapshot(), client.open_connections());
        Box::pin(async move {
            let mut out = Scrape::new();
            out.counters(
                "fuse_requests",
                "Requests the kernel sent the mount, by kind",
                s.ops.iter().map(|(op, n)| (labels(&[("op", op)]), *n)),
            );
            out.counter("fuse_read_bytes", "Bytes the kernel asked to read", s.read_bytes);
            out.counter("fuse_write_bytes", "Bytes the kernel handed to write", s.write_bytes);
            out.counter("fuse_attr_cache_hits", "GETATTRs answered from attributes kept within attr_ttl", s.attr_hits);
            out.counter(
                "fuse_reads_at_once",
                "READs answered at once from a local worker's files, without the mount's runtime",
                s.reads_at_once,
            );
            out.counter(
                "fuse_reused",
                "Opens, opendirs and lookups answered from what the master said within open_ttl",
                s.reused,
            );
            out.counter(
                "fuse_stale_reads",
                "READs refused with ESTALE: the version the descriptor reads was replaced or removed since its open",
                s.stale_reads,
            );
            out.gauge("client_connections", "QUIC connections the client holds to the cluster", conns as i64);
            out
        })
    })
}
