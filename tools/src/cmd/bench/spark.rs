//! `cvctl bench spark-tpch`: Spark SQL TPC-H over `file://` and over `cv://` on a cache-mode
//! mount of the embedded S3 server behind an added round trip, warm and cold (feature
//! `embedded-s3`). The work is in `cv_benches::spark_tpch`; this file is the command line,
//! where the engine's pieces are, and the cluster.

use super::engines::{engine_python, finish, repo_root, tpch_cluster};
use crate::cmd::CmdResult;
use crate::connect::runtime;
use clap::Args;
use cv_benches::open_latency::BenchError;
use cv_benches::spark_tpch::{self, SparkTpchConfig, Tools};
use cv_net::config::Dur;
use std::path::{Path, PathBuf};

/// Arguments of `cvctl bench spark-tpch`.
#[derive(Args, Debug)]
pub struct SparkTpchArgs {
    /// TPC-H scale factor.
    #[arg(long, default_value_t = 1.0)]
    sf: f64,
    /// Timed warm passes of the 22 queries on each location (after one untimed pass each).
    #[arg(long, default_value_t = 3)]
    passes: u32,
    /// Timed cold passes (each after the mount's blocks were freed); 0 skips them.
    #[arg(long, default_value_t = 2)]
    cold_passes: u32,
    /// Round-trip time added in front of the store (a delaying TCP proxy).
    #[arg(long, default_value = "5ms")]
    rtt: Dur,
    /// Only these queries, e.g. `1,6,14`.
    #[arg(long, default_value = "")]
    queries: String,
    /// Spark's shuffle partitions (the same on both locations).
    #[arg(long, default_value_t = 8)]
    shuffle_partitions: u32,
    /// The venv of `scripts/install-spark` (default ~/.cache/cv/venv-spark, or CV_SPARK_VENV).
    #[arg(long)]
    venv: Option<PathBuf>,
    /// libcv_capi.so (default: next to this cvctl, from `cargo build --release -p cv-capi`).
    #[arg(long)]
    native_lib: Option<PathBuf>,
    /// cv-hadoop.jar (default: built with scripts/build-hadoop-jar into the work directory).
    #[arg(long)]
    jar: Option<PathBuf>,
    /// Work directory (default: a temporary one, removed at the end). A `source/` with the
    /// tables from an earlier run is used again.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

impl SparkTpchArgs {
    fn tools(&self, dir: &Path) -> Result<Tools, BenchError> {
        let root = repo_root()?;
        let python = engine_python(self.venv.as_deref())?;
        let cvctl = std::env::current_exe()?;
        let native_lib = match &self.native_lib {
            Some(p) => p.clone(),
            None => cvctl.with_file_name("libcv_capi.so"),
        };
        if !native_lib.is_file() {
            return Err(format!(
                "{}: not there; build it with `cargo build --release -p cv-capi` or give --native-lib",
                native_lib.display()
            )
            .into());
        }
        let jar = match &self.jar {
            Some(j) => j.clone(),
            None => {
                let jar = dir.join("cv-hadoop.jar");
                let ok = std::process::Command::new(root.join("scripts/build-hadoop-jar")).arg(&jar).status()?;
                if !ok.success() {
                    return Err("scripts/build-hadoop-jar failed".into());
                }
                jar
            }
        };
        Ok(Tools { python, runner_dir: root.join("benches/tpch"), jar, native_lib, cvctl })
    }

    /// Runs the benchmark.
    pub fn run(self) -> CmdResult {
        cv_benches::embedded_s3::require()?;
        if self.passes == 0 || self.sf.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater) {
            return Err("--passes must be at least 1 and --sf above 0".into());
        }
        let tmp = tempfile::Builder::new().prefix("cv-bench-spark-").tempdir()?;
        let dir = self.dir.clone().unwrap_or_else(|| tmp.path().to_path_buf());
        std::fs::create_dir_all(&dir)?;
        let tools = self.tools(&dir)?;
        let cfg = SparkTpchConfig {
            sf: self.sf,
            passes: self.passes,
            cold_passes: self.cold_passes,
            rtt: self.rtt.0,
            queries: self.queries.clone(),
            shuffle_partitions: self.shuffle_partitions,
            dir: dir.clone(),
            mount: "/tpch".into(),
        };
        let res: Result<(), BenchError> = runtime()?.block_on(async move {
            let (cluster, client) = tpch_cluster(&dir, self.sf).await?;
            let report = spark_tpch::run_bench(&tools, &cfg, &client, cluster.client_config()).await;
            finish(cluster, client, report, self.json, spark_tpch::print).await
        });
        res
    }
}
