//! `cvctl bench gateway-tpch`: DuckDB TPC-H through S3 (httpfs) against cv's S3 gateway over a
//! cache-mode mount of the embedded S3 server behind an added round trip, the store directly,
//! local disk, and (as root) cv's FUSE mount. The work is in `cv_benches::gateway_tpch`; this
//! file is the command line and the cluster.

use super::engines::{check_runs, duckdb_tools, finish, tpch_cluster, work_dir};
use crate::cmd::CmdResult;
use crate::connect::runtime;
use clap::Args;
use cv_benches::gateway_tpch::{self, GatewayTpchConfig};
use cv_benches::open_latency::BenchError;
use cv_net::config::Dur;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

/// Arguments of `cvctl bench gateway-tpch`.
#[derive(Args, Debug)]
pub struct GatewayTpchArgs {
    /// TPC-H scale factor.
    #[arg(long, default_value_t = 1.0)]
    sf: f64,
    /// Timed warm passes of the 22 queries on each location (after one untimed pass each).
    #[arg(long, default_value_t = 3)]
    passes: u32,
    /// Timed passes with cv's cache freed before each; 0 skips them.
    #[arg(long, default_value_t = 2)]
    cold_passes: u32,
    /// Round-trip time added in front of the store (a delaying TCP proxy).
    #[arg(long, default_value = "5ms")]
    rtt: Dur,
    /// Only these queries, e.g. `1,6,14`.
    #[arg(long, default_value = "")]
    queries: String,
    /// DuckDB's threads.
    #[arg(long, default_value_t = 2)]
    threads: u32,
    /// The gateway's `open_ttl`: how long an opened file serves later requests (0: the
    /// master is asked every time, as by default).
    #[arg(long, default_value = "0s")]
    open_ttl: Dur,
    /// Leave out the FUSE mount (which needs root).
    #[arg(long)]
    no_fuse: bool,
    /// The venv of `scripts/install-spark` (default ~/.cache/cv/venv-spark, or CV_SPARK_VENV).
    #[arg(long)]
    venv: Option<PathBuf>,
    /// Work directory (default: a temporary one, removed at the end). A `source/` with the
    /// tables from an earlier run is used again.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

impl GatewayTpchArgs {
    /// Runs the benchmark.
    pub fn run(self) -> CmdResult {
        cv_benches::embedded_s3::require()?;
        let root = std::fs::metadata("/proc/self")?.uid() == 0;
        if !self.no_fuse && !root {
            return Err("the FUSE location mounts cv and drops the page cache: run as root, or give --no-fuse".into());
        }
        check_runs(self.passes, self.threads, self.sf)?;
        let (_tmp, dir) = work_dir(self.dir.as_deref(), "cv-bench-gateway-")?;
        let tools = duckdb_tools(self.venv.as_deref())?;
        let cfg = GatewayTpchConfig {
            sf: self.sf,
            passes: self.passes,
            cold_passes: self.cold_passes,
            rtt: self.rtt.0,
            queries: self.queries.clone(),
            threads: self.threads,
            dir: dir.clone(),
            mount: "/tpch".into(),
            fuse: !self.no_fuse,
            open_ttl: self.open_ttl.get(),
        };
        let res: Result<(), BenchError> = runtime()?.block_on(async move {
            let (cluster, client) = tpch_cluster(&dir, self.sf).await?;
            let config = cluster.client_config().to_path_buf();
            let report = gateway_tpch::run_bench(&tools, &cfg, &client, &config).await;
            finish(cluster, client, report, self.json, gateway_tpch::print).await
        });
        res
    }
}
