//! `cvctl up`: a master (or a Raft group of masters) and one worker with its shards in this
//! process.

use super::CmdResult;
use crate::cluster::{ClusterOptions, LocalCluster};
use crate::connect::runtime;
use clap::Args;
use cv_net::config::ByteSize;
use std::path::PathBuf;

/// Arguments of `cvctl up`.
#[derive(Args, Debug)]
pub struct UpArgs {
    /// Directory for certificates, the journal, block data and `client.toml`
    /// (default: a new temporary directory, removed on exit).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Worker shards (0 = one per core).
    #[arg(long, default_value_t = 0)]
    shards: u16,
    /// Worker disk capacity, e.g. 10GiB.
    #[arg(long, default_value = "4GiB")]
    capacity: ByteSize,
    /// Worker memory tier, e.g. 256MiB.
    #[arg(long, default_value = "256MiB")]
    memory: ByteSize,
    /// Master UDP port (with several masters, master i listens on port + i).
    #[arg(long, default_value_t = 7700)]
    master_port: u16,
    /// Masters: 1, or 3 or 5 replicating the namespace through Raft (master/HA.md).
    #[arg(long, default_value_t = 1)]
    masters: usize,
    /// First worker shard UDP port (shard i listens on port + i).
    #[arg(long, default_value_t = 7100)]
    worker_port: u16,
    /// Record the worker's block trace to this file, for `cvctl trace sim`.
    #[arg(long)]
    trace: Option<PathBuf>,
}

impl UpArgs {
    /// Runs the cluster until Ctrl-C or SIGTERM.
    pub fn run(self) -> CmdResult {
        let tmp;
        let dir = match &self.dir {
            Some(d) => d.clone(),
            None => {
                tmp = tempfile::Builder::new().prefix("cv-up-").tempdir()?;
                tmp.path().to_path_buf()
            }
        };
        std::fs::create_dir_all(&dir)?;
        let opts = ClusterOptions {
            dir: dir.clone(),
            shards: self.shards,
            capacity: self.capacity,
            memory_tier: self.memory,
            master_port: self.master_port,
            worker_port: self.worker_port,
            sync_data: true,
            masters: self.masters,
            trace: self.trace.clone(),
            ..ClusterOptions::ephemeral(&dir)
        };
        runtime()?.block_on(async move {
            let cluster = LocalCluster::start(&opts).await?;
            let stop = crate::signal::shutdown_signal();
            println!("cv is up");
            for (i, a) in cluster.master_addrs().iter().enumerate() {
                println!("  master        {}{a}", if opts.masters > 1 { format!("{} ", i + 1) } else { String::new() });
            }
            for (i, a) in cluster.shard_addrs().iter().enumerate() {
                println!("  worker shard  {i} {a}");
            }
            let metrics = cluster.serve_metrics().await?;
            for (role, m) in &metrics {
                println!("  metrics       {role} http://{}/metrics", m.local_addr());
            }
            println!("  data          {}", dir.display());
            // Applications get the client file (files only); the operator's cvctl the admin file
            // (mounts, drain, free, masters).
            println!("  client config {}", cluster.client_config().display());
            println!("  admin config  {}", cluster.admin_config().display());
            println!("try: cvctl fs --config {} ls /", cluster.client_config().display());
            println!("Ctrl-C stops it.");
            stop.await;
            println!("stopping");
            drop(metrics);
            cluster.shutdown().await?;
            Ok(())
        })
    }
}
