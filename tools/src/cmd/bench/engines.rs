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
    use cv_net::config::ByteSize;
    let cluster_dir = dir.join("cluster");
    let _ = std::fs::remove_dir_all(&cluster_dir);
    let opts = crate::cluster::ClusterOptions {
        capacity: ByteSize((3.0 * sf * ByteSize::gib(1).bytes() as f64) as u64 + ByteSize::gib(1).bytes()),
        ..crate::cluster::ClusterOptions::ephemeral(&cluster_dir)
    };
    let cluster = crate::cluster::LocalCluster::start(&opts).await?;
    let client = cluster.client().await?;
    Ok((cluster, client))
}
