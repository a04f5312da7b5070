//! `cvctl fuse <mountpoint>`: mounts cv with FUSE until Ctrl-C, SIGTERM or
//! an external `umount`.

use super::CmdResult;
use crate::connect::ClientArgs;
use clap::Args;
use cv_fuse::MountOptions;
use cv_net::config::Dur;
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
    /// Directory for staged files (edits other than front-to-back writes,
    /// published at close and fsync); default the system's temporary directory.
    #[arg(long)]
    staging_dir: Option<PathBuf>,
    /// Threads of the runtime that serves the mount's requests.
    #[arg(long, default_value_t = 2)]
    threads: usize,
}

impl FuseArgs {
    /// Runs it.
    pub fn run(self) -> CmdResult {
        let opts = MountOptions {
            root: self.root.clone(),
            attr_ttl: self.attr_ttl.get(),
            entry_ttl: self.attr_ttl.get(),
            allow_other: self.allow_other,
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
            let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
            let mut tick = tokio::time::interval(Duration::from_millis(200));
            loop {
                tokio::select! {
                    r = tokio::signal::ctrl_c() => { r?; break; }
                    _ = term.recv() => break,
                    _ = tick.tick() => if mounted.is_finished() { break },
                }
            }
            // Unmounting waits for the session thread: off the runtime.
            tokio::task::spawn_blocking(move || mounted.unmount()).await??;
            client.shutdown().await;
            Ok(())
        })
    }
}
