//! The TPC-H lake the engine benchmarks share (`spark_tpch.rs`, `duckdb_tpch.rs`): DuckDB
//! generates the tables as Parquet under `<dir>/source` (kept for later runs), the embedded S3
//! server holds them, a delaying proxy stands in for the distance to object storage, and cv
//! mounts the bucket in cache mode. Also the two things both runners need: running a runner
//! and reading the medians of its JSON.

use crate::embedded_s3::DelayProxy;
use crate::open_latency::BenchError;
use crate::ufs_scan::store::Store;
use cv_client::{Client, MountMode};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// The tables in the store, mounted in cv.
pub struct Lake {
    /// Bytes of Parquet.
    pub bytes: u64,
    /// `<dir>/source`, the tables on local disk.
    pub source: PathBuf,
    store: Store,
    proxy: DelayProxy,
}

impl std::fmt::Debug for Lake {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lake").field("bytes", &self.bytes).field("source", &self.source).finish_non_exhaustive()
    }
}

impl Lake {
    /// Generates the tables (unless `<dir>/source` has them), puts them in a new embedded store
    /// under `<table>/…`, starts the proxy at `rtt` and mounts the store at `mount` in cache mode.
    pub async fn start(
        python: &Path,
        runner_dir: &Path,
        sf: f64,
        dir: &Path,
        rtt: Duration,
        client: &Client,
        mount: &str,
    ) -> Result<Lake, BenchError> {
        crate::embedded_s3::require()?;
        let source = dir.join("source");
        if !source.join("lineitem").is_dir() {
            run(Command::new(python)
                .arg(runner_dir.join("tpch_data.py"))
                .args(["gen", "--sf", &sf.to_string(), "--out"])
                .arg(&source))?;
        }
        let store = Store::embedded(&dir.join("s3"))?;
        let mut bytes = 0;
        for table in std::fs::read_dir(&source)? {
            let table = table?.path();
            let name =
                table.file_name().and_then(|n| n.to_str()).ok_or("a table directory without a name")?.to_string();
            for f in std::fs::read_dir(&table)? {
                let f = f?.path();
                let data = std::fs::read(&f)?;
                bytes += data.len() as u64;
                let file = f.file_name().and_then(|n| n.to_str()).ok_or("a file without a name")?;
                store.put(&format!("{name}/{file}"), data).await?;
            }
        }
        let target = store.addr().ok_or("the embedded store has no address")?;
        let proxy = DelayProxy::start(target, rtt / 2)?;
        let mut options = store.options(Some(&proxy.endpoint()));
        options.push(("cv.ttl".into(), "1h".into()));
        client.mount(store.url(), mount, MountMode::Cache, options).await?;
        eprintln!(
            "tpch: SF {sf} ({:.0} MiB of Parquet) in {} behind +{rtt:?}, mounted at {mount}",
            bytes as f64 / (1 << 20) as f64,
            store.url(),
        );
        Ok(Lake { bytes, source: std::fs::canonicalize(source)?, store, proxy })
    }

    /// The store as an engine reaches it directly: its `s3://bucket/prefix` URL (the tables are
    /// `<table>/…` under it) and its options, with the delay proxy as the endpoint.
    pub fn direct(&self) -> (String, Vec<(String, String)>) {
        (self.store.url().to_string(), self.store.options(Some(&self.proxy.endpoint())))
    }

    /// Starts counting the store's requests afresh.
    pub fn begin_requests(&self) {
        self.store.begin();
    }

    /// The store's requests since [`Lake::begin_requests`] as (HEADs, GETs, LISTs); `None`
    /// when the store does not count.
    pub fn requests(&self) -> Option<(u64, u64, u64)> {
        use crate::embedded_s3::Op;
        let log = self.store.take()?;
        let n = |f: &dyn Fn(Op) -> bool| log.iter().filter(|r| f(r.op)).count() as u64;
        Some((n(&|o| o == Op::Head), n(&|o| matches!(o, Op::Get | Op::RangedGet)), n(&|o| o == Op::List)))
    }

    /// Stops the proxy; the store stops as it drops.
    pub fn shutdown(self) {
        let Lake { proxy, store: _store, .. } = self;
        proxy.shutdown();
    }
}

/// Runs `cmd` (its stderr passed through) and returns its stdout.
pub fn run(cmd: &mut Command) -> Result<String, BenchError> {
    eprintln!("running {cmd:?}");
    let out = cmd.stderr(std::process::Stdio::inherit()).output()?;
    if !out.status.success() {
        return Err(format!("{cmd:?} failed ({})", out.status).into());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A runner's JSON (`benches/tpch/*_tpch.py --out`).
pub fn read_report(path: &Path) -> Result<serde_json::Value, BenchError> {
    Ok(serde_json::from_slice(&std::fs::read(path)?)?)
}

/// The per-query medians of the runner's `i`-th location.
pub fn medians(report: &serde_json::Value, i: usize) -> Result<BTreeMap<String, f64>, BenchError> {
    let m = report["locations"][i]["medians"].as_object().ok_or("the runner's JSON has no medians")?;
    Ok(m.iter().filter_map(|(k, v)| Some((k.clone(), v.as_f64()?))).collect())
}

/// "q1" … "q22" in query order.
pub fn query_order(q: &str) -> u32 {
    q.trim_start_matches('q').parse().unwrap_or(0)
}
