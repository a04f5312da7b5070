//! Where the engine benchmarks (`bench spark-tpch`, `bench duckdb-tpch`) find their runners
//! and the Python that runs them.

use cv_benches::open_latency::BenchError;
use std::path::{Path, PathBuf};

/// The repository's root (the one holding `benches/tpch`), from this binary's place
/// (`target/<profile>/cvctl`) or the working directory.
pub fn repo_root() -> Result<PathBuf, BenchError> {
    let exe = std::env::current_exe()?;
    for dir in exe.ancestors().chain(std::env::current_dir()?.ancestors()) {
        if dir.join("benches/tpch/tpch_data.py").is_file() {
            return Ok(dir.to_path_buf());
        }
    }
    Err("cannot find benches/tpch: run cvctl from the cv repository".into())
}

/// Python of the venv `scripts/install-spark` makes (pyspark, duckdb, duckdb-extension-tpch):
/// `venv`, else $CV_SPARK_VENV, else ~/.cache/cv/venv-spark.
pub fn engine_python(venv: Option<&Path>) -> Result<PathBuf, BenchError> {
    let venv = venv
        .map(Path::to_path_buf)
        .or_else(|| std::env::var_os("CV_SPARK_VENV").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/cv/venv-spark"));
    let python = venv.join("bin/python");
    if !python.is_file() {
        return Err(format!("{}: no venv; run scripts/install-spark", venv.display()).into());
    }
    Ok(python)
}

/// The end of an engine bench: closes the client and the cluster (also when the run failed),
/// then prints the report as JSON or with `print`.
pub async fn finish<R: serde::Serialize>(
    cluster: crate::cluster::LocalCluster,
    client: cv_client::Client,
    report: Result<R, BenchError>,
    json: bool,
    print: fn(&R),
) -> Result<(), BenchError> {
    client.close();
    cluster.shutdown().await?;
    let report = report?;
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print(&report);
    }
    Ok(())
}

/// A fresh embedded cluster under `<dir>/cluster` with room for TPC-H at scale factor `sf`
/// (3 × sf GiB + 1 GiB), and a client of it.
pub async fn tpch_cluster(
    dir: &Path,
    sf: f64,
) -> Result<(crate::cluster::LocalCluster, cv_client::Client), BenchError> {
    tpch_cluster_with(dir, sf, None, None).await
}

/// [`tpch_cluster`] with the worker's disk capacity given (a cache smaller than the data) and
/// its block trace recorded to `trace`.
pub async fn tpch_cluster_with(
    dir: &Path,
    sf: f64,
    capacity: Option<cv_net::config::ByteSize>,
    trace: Option<PathBuf>,
) -> Result<(crate::cluster::LocalCluster, cv_client::Client), BenchError> {
    use cv_net::config::ByteSize;
    let cluster_dir = dir.join("cluster");
    let _ = std::fs::remove_dir_all(&cluster_dir);
    let room = ByteSize((3.0 * sf * ByteSize::gib(1).bytes() as f64) as u64 + ByteSize::gib(1).bytes());
    let opts = crate::cluster::ClusterOptions {
        capacity: capacity.unwrap_or(room),
        trace,
        ..crate::cluster::ClusterOptions::ephemeral(&cluster_dir)
    };
    let cluster = crate::cluster::LocalCluster::start(&opts).await?;
    let client = cluster.client().await?;
    Ok((cluster, client))
}

/// The engine benches' work directory: `dir` (made if missing), else a temporary one that
/// lives as long as the returned guard. Canonical, since runners and mounts name it.
pub fn work_dir(dir: Option<&Path>, prefix: &str) -> Result<(tempfile::TempDir, PathBuf), BenchError> {
    let tmp = tempfile::Builder::new().prefix(prefix).tempdir()?;
    let dir = match dir {
        Some(d) => {
            std::fs::create_dir_all(d)?;
            d.to_path_buf()
        }
        None => tmp.path().to_path_buf(),
    };
    Ok((tmp, std::fs::canonicalize(dir)?))
}

/// What the DuckDB benches run: the venv's Python, the runners, this cvctl.
pub fn duckdb_tools(venv: Option<&Path>) -> Result<cv_benches::duckdb_tpch::Tools, BenchError> {
    Ok(cv_benches::duckdb_tpch::Tools {
        python: engine_python(venv)?,
        runner_dir: repo_root()?.join("benches/tpch"),
        cvctl: std::env::current_exe()?,
    })
}

/// The DuckDB benches' run counts and scale: at least one pass and thread, a positive scale.
pub fn check_runs(passes: u32, threads: u32, sf: f64) -> Result<(), BenchError> {
    if passes == 0 || threads == 0 || sf.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater) {
        return Err("--passes and --threads must be at least 1 and --sf above 0".into());
    }
    Ok(())
}
