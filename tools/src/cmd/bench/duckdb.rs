//! `cvctl bench duckdb-tpch`: DuckDB TPC-H on local disk and through a `cvctl fuse` mount of a
//! cache-mode mount of the embedded S3 server behind an added round trip, warm and with the
//! page cache dropped before every query (root; feature `embedded-s3`). The work is in
//! `cv_benches::duckdb_tpch`; this file is the command line and the cluster.

use super::engines::{check_runs, duckdb_tools, finish, tpch_cluster_with, work_dir};
use crate::cmd::CmdResult;
use crate::connect::runtime;
use clap::Args;
use cv_benches::duckdb_tpch::{self, DuckdbTpchConfig};
use cv_benches::open_latency::BenchError;
use cv_net::config::Dur;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

/// Arguments of `cvctl bench duckdb-tpch`.
#[derive(Args, Debug)]
pub struct DuckdbTpchArgs {
    /// TPC-H scale factor.
    #[arg(long, default_value_t = 1.0)]
    sf: f64,
    /// Timed warm passes of the 22 queries on each location (after one untimed pass each).
    #[arg(long, default_value_t = 3)]
    passes: u32,
    /// Timed passes with the page cache dropped before every query; 0 skips them.
    #[arg(long, default_value_t = 3)]
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
    /// The venv of `scripts/install-spark` (default ~/.cache/cv/venv-spark, or CV_SPARK_VENV).
    #[arg(long)]
    venv: Option<PathBuf>,
    /// Work directory (default: a temporary one, removed at the end). A `source/` with the
    /// tables from an earlier run is used again.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// The mount reads every block over QUIC, not from the worker's files (short-circuit reads
    /// are on by default), to compare the two.
    #[arg(long)]
    no_short_circuit: bool,
    /// The worker's disk capacity (default: room for all the data); below the data's size the
    /// passes run against a cache under pressure.
    #[arg(long)]
    capacity: Option<cv_net::config::ByteSize>,
    /// Record the worker's block trace to this file (`cvctl trace sim` replays it).
    #[arg(long)]
    trace: Option<PathBuf>,
    /// Threads of the `cvctl fuse` process's runtime (`cvctl fuse --threads`).
    #[arg(long, default_value_t = 2)]
    fuse_threads: usize,
    /// Mount read-only (`cvctl fuse --read-only`), as for a query engine's compute node.
    #[arg(long)]
    fuse_read_only: bool,
    /// The read-only mount answers opens, opendirs and lookups from what the master said within
    /// this long (`cvctl fuse --open-ttl`; needs --fuse-read-only).
    #[arg(long, default_value = "0s")]
    fuse_open_ttl: Dur,
    /// Also run DuckDB over the floor: a bare read-only FUSE file system over the local tables
    /// that answers each read with one O_DIRECT read (`cv_benches::fuse_floor`), for what any
    /// FUSE mount costs here with the page cache dropped.
    #[arg(long)]
    fuse_floor: bool,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

/// Arguments of `cvctl bench fuse-floor` (hidden; run by `duckdb-tpch --fuse-floor`).
#[derive(Args, Debug)]
pub struct FuseFloorArgs {
    /// The directory to serve.
    #[arg(long)]
    source: PathBuf,
    /// Where to mount it.
    #[arg(long)]
    mountpoint: PathBuf,
}

impl FuseFloorArgs {
    /// Serves until unmounted.
    pub fn run(self) -> CmdResult {
        cv_benches::fuse_floor::serve(&self.source, &self.mountpoint)
            .map_err(|e| format!("fuse floor over {} at {}: {e}", self.source.display(), self.mountpoint.display()))?;
        Ok(())
    }
}

impl DuckdbTpchArgs {
    /// Runs the benchmark.
    pub fn run(self) -> CmdResult {
        cv_benches::embedded_s3::require()?;
        // Dropping the page cache and mounting without fusermount need root.
        if std::fs::metadata("/proc/self")?.uid() != 0 {
            return Err("cvctl bench duckdb-tpch drops the page cache and mounts cv with FUSE: run it as root".into());
        }
        check_runs(self.passes, self.threads, self.sf)?;
        if !self.fuse_open_ttl.get().is_zero() && !self.fuse_read_only {
            return Err("--fuse-open-ttl needs --fuse-read-only".into());
        }
        let (_tmp, dir) = work_dir(self.dir.as_deref(), "cv-bench-duckdb-")?;
        let tools = duckdb_tools(self.venv.as_deref())?;
        let cfg = DuckdbTpchConfig {
            sf: self.sf,
            passes: self.passes,
            cold_passes: self.cold_passes,
            rtt: self.rtt.0,
            queries: self.queries.clone(),
            threads: self.threads,
            dir: dir.clone(),
            mount: "/tpch".into(),
            fuse_threads: self.fuse_threads,
            fuse_read_only: self.fuse_read_only,
            fuse_open_ttl: self.fuse_open_ttl.get(),
            fuse_floor: self.fuse_floor,
        };
        let res: Result<(), BenchError> = runtime()?.block_on(async move {
            let (cluster, client) = tpch_cluster_with(&dir, self.sf, self.capacity, self.trace.clone()).await?;
            let mut fuse_config = cluster.client_config().to_path_buf();
            if self.no_short_circuit {
                fuse_config = dir.join("client-quic.toml");
                without_short_circuit(cluster.client_config(), &fuse_config)?;
            }
            eprintln!(
                "the mount reads {}",
                if self.no_short_circuit { "over QUIC" } else { "short-circuit (the worker's files) where it can" }
            );
            if self.fuse_read_only {
                eprintln!("the mount is read-only (cvctl fuse --read-only, --open-ttl {})", self.fuse_open_ttl);
            }
            let report = duckdb_tpch::run_bench(&tools, &cfg, &client, &fuse_config).await;
            finish(cluster, client, report, self.json, duckdb_tpch::print).await
        });
        res
    }
}

/// Writes `from`'s client config to `to` with `[client] short_circuit = false`.
fn without_short_circuit(from: &std::path::Path, to: &std::path::Path) -> Result<(), BenchError> {
    let mut doc: toml::Table = toml::from_str(&std::fs::read_to_string(from)?).map_err(|e| e.to_string())?;
    let client = doc.entry("client").or_insert_with(|| toml::Value::Table(toml::Table::new()));
    let Some(client) = client.as_table_mut() else {
        return Err(format!("{}: [client] is not a table", from.display()).into());
    };
    client.insert("short_circuit".into(), toml::Value::Boolean(false));
    std::fs::write(to, toml::to_string(&doc).map_err(|e| e.to_string())?)?;
    Ok(())
}
