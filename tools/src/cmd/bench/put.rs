//! `cvctl bench put`.

use crate::cluster::{ClusterOptions, LocalCluster};
use crate::cmd::CmdResult;
use crate::connect::{ClientArgs, runtime};
use clap::Args;
use cv_benches::put_bench::{PutOptions, Target, run_put};
use cv_benches::report::print_latency_table;
use cv_net::config::ByteSize;
use std::path::PathBuf;

/// Arguments of `cvctl bench put`.
#[derive(Args, Debug)]
pub struct PutArgs {
    /// Client config of the cluster measured; default: an embedded local cluster of this build.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Client config of a second cluster measured beside it (e.g. the previous build's
    /// `cvctl up`), printed as the baseline.
    #[arg(long)]
    baseline_config: Option<PathBuf>,
    /// Bytes per file.
    #[arg(long, default_value = "64KiB")]
    size: ByteSize,
    /// Measured puts per series.
    #[arg(long, default_value_t = 300)]
    count: u32,
    /// Unmeasured puts per series first.
    #[arg(long, default_value_t = 30)]
    warmup: u32,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

impl PutArgs {
    /// Runs it.
    pub fn run(self) -> CmdResult {
        runtime()?.block_on(async move {
            let tmp = tempfile::tempdir()?;
            let local = match &self.config {
                Some(_) => None,
                None => Some(LocalCluster::start(&ClusterOptions::ephemeral(tmp.path())).await?),
            };
            let client_of = |path: &PathBuf| ClientArgs { config: path.clone(), master: None, leader_hint: None };
            let mut targets = Vec::new();
            if let Some(b) = &self.baseline_config {
                targets.push(Target { label: "baseline".into(), client: client_of(b).connect().await? });
            }
            let cv = match (&self.config, &local) {
                (Some(c), _) => client_of(c).connect().await?,
                (None, Some(l)) => l.client().await?,
                (None, None) => unreachable!("a local cluster runs without --config"),
            };
            targets.push(Target { label: "cv".into(), client: cv });
            let opts = PutOptions {
                size: self.size.bytes() as usize,
                count: self.count,
                warmup: self.warmup,
                dir: format!("/.bench-put-{}", std::process::id()),
            };
            let rows = run_put(&targets, &opts).await;
            for t in targets {
                t.client.shutdown().await;
            }
            if let Some(l) = local {
                l.shutdown().await?;
            }
            let rows = rows?;
            if self.json {
                println!("{}", serde_json::to_string_pretty(&rows)?);
            } else {
                let title = format!("put latency, {} B files (create + write + close), interleaved", opts.size);
                print_latency_table(&title, &rows);
            }
            Ok(())
        })
    }
}
