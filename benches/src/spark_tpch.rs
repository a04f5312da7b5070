//! Spark SQL TPC-H (local mode, PySpark from PyPI) over `file://` on local disk and over
//! `cv://` on a cache-mode mount of an S3 store behind an added round trip, warm and cold:
//! issue 22's measure. The engine side is `benches/tpch/spark_tpch.py`; `tpch.rs` lays the
//! lake out; this file runs the runner twice and prints the table.
//!
//! Run order: one Spark session takes turns, pass by pass, between `file://` and `cv://`
//! after one untimed pass of each (the cv one fills the cache): warm. A second session makes
//! one untimed warm pass (so the JVM is as warm as in the first), then cold passes, each after
//! `cvctl mount sync` + `cvctl free --wait` dropped every cached block: cold. The runner
//! checks that every answer is equal on both locations.

use crate::open_latency::BenchError;
use crate::tpch::{Lake, medians, query_order, read_report, run};
use cv_client::Client;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// The goal: warm within this much of local disk.
pub const WARM_GOAL: f64 = 1.15;

/// Where the engine and cv's pieces are.
#[derive(Clone, Debug)]
pub struct Tools {
    /// Python of the venv with pyspark, duckdb and duckdb-extension-tpch.
    pub python: PathBuf,
    /// `benches/tpch`.
    pub runner_dir: PathBuf,
    /// cv-hadoop.jar.
    pub jar: PathBuf,
    /// libcv_capi.so.
    pub native_lib: PathBuf,
    /// cvctl, for the cold passes' `mount sync` and `free --wait`.
    pub cvctl: PathBuf,
}

/// How to run it.
#[derive(Clone, Debug)]
pub struct SparkTpchConfig {
    /// TPC-H scale factor.
    pub sf: f64,
    /// Timed warm passes (each location).
    pub passes: u32,
    /// Timed cold passes.
    pub cold_passes: u32,
    /// Round trip added in front of the store.
    pub rtt: Duration,
    /// Queries, e.g. "1,6" (empty: all 22).
    pub queries: String,
    /// Spark's shuffle partitions.
    pub shuffle_partitions: u32,
    /// Work directory: `source/` (the tables), `s3/`, the runner's JSON.
    pub dir: PathBuf,
    /// The cv path of the mount.
    pub mount: String,
}

/// One query's medians.
#[derive(Clone, Debug, Serialize)]
pub struct QueryRow {
    /// "q1" … "q22".
    pub query: String,
    /// Seconds on file://.
    pub file: f64,
    /// Seconds on cv://, warm.
    pub warm: f64,
    /// Seconds on cv://, cold.
    pub cold: Option<f64>,
}

/// The report.
#[derive(Clone, Debug, Serialize)]
pub struct SparkTpchReport {
    /// Scale factor.
    pub sf: f64,
    /// Added round trip, ms.
    pub rtt_ms: f64,
    /// Timed passes.
    pub passes: u32,
    /// Timed cold passes.
    pub cold_passes: u32,
    /// Bytes of Parquet.
    pub bytes: u64,
    /// Per query.
    pub queries: Vec<QueryRow>,
    /// Sums of medians.
    pub file_sum: f64,
    /// cv warm.
    pub warm_sum: f64,
    /// cv cold.
    pub cold_sum: Option<f64>,
    /// Whether every answer was equal (the runner fails otherwise, so true when printed).
    pub answers_equal: bool,
}

/// The runner's command line for `locations`, `warmup` untimed and `passes` timed passes.
fn runner(tools: &Tools, cfg: &SparkTpchConfig, client_config: &Path, locations: &[String]) -> Command {
    let mut c = Command::new(&tools.python);
    c.arg(tools.runner_dir.join("spark_tpch.py"));
    for l in locations {
        c.arg("--location").arg(l);
    }
    c.arg("--jar").arg(&tools.jar).arg("--native-lib").arg(&tools.native_lib).arg("--cv-config").arg(client_config);
    c.args(["--shuffle-partitions", &cfg.shuffle_partitions.to_string()]);
    if !cfg.queries.is_empty() {
        c.args(["--queries", &cfg.queries]);
    }
    c
}

/// Runs it against the cluster `client` is connected to (its config file `client_config`,
/// for the Spark side and cvctl).
pub async fn run_bench(
    tools: &Tools,
    cfg: &SparkTpchConfig,
    client: &Client,
    client_config: &Path,
) -> Result<SparkTpchReport, BenchError> {
    let lake = Lake::start(&tools.python, &tools.runner_dir, cfg.sf, &cfg.dir, cfg.rtt, client, &cfg.mount).await?;
    let file_loc = format!("file://{}", lake.source.display());
    let cv_loc = format!("cv://cluster{}", cfg.mount);
    let warm_json = cfg.dir.join("warm.json");
    run(runner(tools, cfg, client_config, &[file_loc, cv_loc.clone()])
        .args(["--warmup", "1", "--passes", &cfg.passes.to_string(), "--out"])
        .arg(&warm_json))?;
    let warm = read_report(&warm_json)?;

    let cold = if cfg.cold_passes > 0 {
        let conf = client_config.display().to_string();
        let cvctl = tools.cvctl.display().to_string();
        let hook = format!(
            "'{cvctl}' mount --config '{conf}' sync '{m}' && '{cvctl}' free --wait --config '{conf}' '{m}' >&2",
            m = cfg.mount
        );
        let cold_json = cfg.dir.join("cold.json");
        run(runner(tools, cfg, client_config, &[cv_loc])
            .args(["--warmup", "1", "--passes", &cfg.cold_passes.to_string(), "--between-passes", &hook, "--out"])
            .arg(&cold_json))?;
        let cold = read_report(&cold_json)?;
        if cold["fingerprints"] != warm["fingerprints"] {
            return Err("cold passes answered differently from the warm ones".into());
        }
        Some(medians(&cold, 0)?)
    } else {
        None
    };
    let bytes = lake.bytes;
    lake.shutdown();

    let (file, warm_m) = (medians(&warm, 0)?, medians(&warm, 1)?);
    let mut queries: Vec<QueryRow> = file
        .iter()
        .map(|(q, f)| QueryRow {
            query: q.clone(),
            file: *f,
            warm: warm_m.get(q).copied().unwrap_or(f64::NAN),
            cold: cold.as_ref().and_then(|c| c.get(q).copied()),
        })
        .collect();
    queries.sort_by_key(|r| query_order(&r.query));
    Ok(SparkTpchReport {
        sf: cfg.sf,
        rtt_ms: cfg.rtt.as_secs_f64() * 1e3,
        passes: cfg.passes,
        cold_passes: cfg.cold_passes,
        bytes,
        file_sum: queries.iter().map(|r| r.file).sum(),
        warm_sum: queries.iter().map(|r| r.warm).sum(),
        cold_sum: cold.as_ref().map(|_| queries.iter().filter_map(|r| r.cold).sum()),
        queries,
        answers_equal: true,
    })
}

/// The table: per query and summed, with ratios to file://.
pub fn print(r: &SparkTpchReport) {
    println!(
        "Spark SQL TPC-H SF {} (local[2]; medians of {} warm / {} cold passes; store at +{} ms RTT)",
        r.sf, r.passes, r.cold_passes, r.rtt_ms
    );
    println!(
        "{:<6} {:>10} {:>10} {:>8} {:>10} {:>8}",
        "query", "file:// s", "cv warm s", "ratio", "cv cold s", "ratio"
    );
    let cold = |c: Option<f64>, f: f64| c.map(|c| (format!("{c:.3}"), format!("{:.2}×", c / f)));
    for q in &r.queries {
        let (c, cr) = cold(q.cold, q.file).unwrap_or_default();
        println!("{:<6} {:>10.3} {:>10.3} {:>7.2}× {:>10} {:>8}", q.query, q.file, q.warm, q.warm / q.file, c, cr);
    }
    let (c, cr) = cold(r.cold_sum, r.file_sum).unwrap_or_default();
    println!(
        "{:<6} {:>10.3} {:>10.3} {:>7.2}× {:>10} {:>8}",
        "sum",
        r.file_sum,
        r.warm_sum,
        r.warm_sum / r.file_sum,
        c,
        cr
    );
    let ratio = r.warm_sum / r.file_sum;
    println!(
        "answers equal on both: {}; goal warm ≤ {WARM_GOAL}× file://: {} ({ratio:.2}×)",
        r.answers_equal,
        if ratio <= WARM_GOAL { "met" } else { "missed" }
    );
}
