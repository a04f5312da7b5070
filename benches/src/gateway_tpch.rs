//! DuckDB TPC-H through S3 (httpfs): cv's S3 gateway in front of a cache-mode mount of an
//! object store behind an added round trip, against the same store directly and local disk,
//! and cv's FUSE mount of the same files when run as root: issue 24's measure. The engine
//! side is `benches/tpch/duckdb_tpch.py`; `tpch.rs` lays the lake out.
//!
//! The gateway runs in this process beside the cluster, as a client of it. Phases: an untimed
//! pass through the gateway fills cv's cache; warm passes take turns over every location; cold
//! passes free cv's cache (`cvctl mount sync`, `cvctl free --wait`) before each pass, so the
//! gateway (and the mount) read what they serve from the store again, next to the store read
//! directly. Every answer must be equal everywhere.
//!
//! Warm passes also read the files from a bare HTTP server holding them in memory
//! ([`crate::http_floor`]): the floor under any S3 endpoint that DuckDB's httpfs reaches over
//! loopback TCP, so the gateway's cost splits into cv's (above the floor) and the HTTP path's.

use crate::duckdb_tpch::{FuseProcess, Tools};
use crate::http_floor::HttpFloor;
use crate::open_latency::BenchError;
use crate::tpch::{Lake, medians, query_order, read_report, run};
use cv_client::Client;
use cv_gateway::{AccessKey, Bucket, Gateway, GatewaySettings};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// Goal: the gateway, warm, within this much of local disk.
pub const WARM_GOAL: f64 = 1.3;
/// Goal: the gateway, warm, at least this many times faster than the store directly.
pub const SPEEDUP_GOAL: f64 = 5.0;

/// The gateway's bucket: the lake's mount.
const BUCKET: &str = "cv-tpch";

/// How to run it.
#[derive(Clone, Debug)]
pub struct GatewayTpchConfig {
    /// TPC-H scale factor.
    pub sf: f64,
    /// Timed warm passes.
    pub passes: u32,
    /// Timed passes with cv's cache freed before each; 0 skips them.
    pub cold_passes: u32,
    /// Round trip added in front of the store.
    pub rtt: Duration,
    /// Queries, e.g. "1,6" (empty: all 22).
    pub queries: String,
    /// DuckDB's threads.
    pub threads: u32,
    /// Work directory: `source/` (the tables), `s3/`, `mnt/`, the runner's JSON.
    pub dir: PathBuf,
    /// The cv path of the mount.
    pub mount: String,
    /// Also through a `cvctl fuse` mount (root), with the page cache dropped before every cold query.
    pub fuse: bool,
    /// The gateway's `open_ttl` (zero: every request asks the master).
    pub open_ttl: Duration,
}

/// One query's medians, seconds.
#[derive(Clone, Debug, Default, Serialize)]
pub struct QueryRow {
    /// "q1" … "q22".
    pub query: String,
    /// Local disk, warm.
    pub local: f64,
    /// The gateway with cv's cache warm.
    pub gateway: f64,
    /// The store through the proxy, directly.
    pub direct: f64,
    /// A bare HTTP server with the files in memory (the floor), warm.
    pub floor: f64,
    /// cv's FUSE mount, warm.
    pub fuse: Option<f64>,
    /// The gateway after cv's cache was freed.
    pub gateway_cold: Option<f64>,
    /// The store directly, in the cold passes.
    pub direct_cold: Option<f64>,
    /// The FUSE mount after cv's cache was freed (and the page cache dropped).
    pub fuse_cold: Option<f64>,
}

/// Requests one warm pass made, on average.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct RequestsPerPass {
    /// What the gateway answered.
    pub gateway: cv_gateway::GatewayStats,
    /// HEADs at the store (the direct location; cv makes none while warm).
    pub direct_heads: u64,
    /// GETs at the store.
    pub direct_gets: u64,
    /// LISTs at the store.
    pub direct_lists: u64,
}

/// The report.
#[derive(Clone, Debug, Serialize)]
pub struct GatewayTpchReport {
    /// Scale factor.
    pub sf: f64,
    /// Added round trip, ms.
    pub rtt_ms: f64,
    /// Timed warm passes.
    pub passes: u32,
    /// Timed cold passes.
    pub cold_passes: u32,
    /// Bytes of Parquet.
    pub bytes: u64,
    /// The gateway's open_ttl, ms.
    pub open_ttl_ms: u64,
    /// Requests per warm pass, through the gateway and at the store.
    pub requests: RequestsPerPass,
    /// Per query.
    pub queries: Vec<QueryRow>,
    /// Sums of the medians, in the rows' order.
    pub sums: QueryRow,
}

/// `host:port` of an `http://host:port` endpoint.
fn host_port(endpoint: &str) -> &str {
    endpoint.trim_start_matches("http://").trim_end_matches('/')
}

fn option<'a>(options: &'a [(String, String)], key: &str) -> Result<&'a str, BenchError> {
    options
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
        .ok_or_else(|| format!("store option {key} missing").into())
}

/// Writes the runner's credentials file (mode 0600): no secret goes on a command line.
fn s3_file(path: &Path, lines: &[String]) -> Result<(), BenchError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(path)?;
    f.write_all(lines.join("\n").as_bytes())?;
    Ok(())
}

fn runner(tools: &Tools, cfg: &GatewayTpchConfig, creds: &Path, locations: &[&str]) -> Command {
    let mut c = Command::new(&tools.python);
    c.arg(tools.runner_dir.join("duckdb_tpch.py"));
    c.arg("--http-files").arg(cfg.dir.join("source"));
    for l in locations {
        c.arg("--location").arg(l);
    }
    c.args(["--threads", &cfg.threads.to_string()]).arg("--s3-file").arg(creds);
    if !cfg.queries.is_empty() {
        c.args(["--queries", &cfg.queries]);
    }
    c
}

/// Runs it against the cluster `client` is connected to (`client_config` is its config file,
/// for cvctl and the `cvctl fuse` process).
pub async fn run_bench(
    tools: &Tools,
    cfg: &GatewayTpchConfig,
    client: &Client,
    client_config: &Path,
) -> Result<GatewayTpchReport, BenchError> {
    let lake = Lake::start(&tools.python, &tools.runner_dir, cfg.sf, &cfg.dir, cfg.rtt, client, &cfg.mount).await?;
    let secret = format!("{:032x}", rand::random::<u128>());
    let settings = GatewaySettings {
        bind: "127.0.0.1:0".parse()?,
        buckets: vec![Bucket { name: BUCKET.into(), path: cfg.mount.clone(), public: false }],
        keys: vec![AccessKey { access_key: "CVBENCH".into(), secret_key: Some(secret.clone()), secret_key_file: None }],
        open_ttl: cv_net::config::Dur(cfg.open_ttl),
        ..GatewaySettings::default()
    };
    let gateway = Gateway::start(client.clone(), &settings, None).await?;
    let (direct_url, options) = lake.direct();
    let direct_bucket = direct_url.trim_start_matches("s3://").split('/').next().unwrap_or_default().to_string();
    let creds = cfg.dir.join("s3-credentials");
    s3_file(
        &creds,
        &[
            format!("{BUCKET}={},CVBENCH,{secret}", gateway.addr()),
            format!(
                "{direct_bucket}={},{},{}",
                host_port(option(&options, "endpoint")?),
                option(&options, "access_key_id")?,
                option(&options, "secret_access_key")?
            ),
        ],
    )?;
    let gw_loc = format!("s3://{BUCKET}");
    let local = lake.source.display().to_string();
    let fuse = if cfg.fuse {
        let mnt = cfg.dir.join("mnt");
        let cv_dir = mnt.join(cfg.mount.trim_start_matches('/'));
        Some((
            FuseProcess::start(&tools.cvctl, client_config, &mnt, &cv_dir.join("lineitem"), 2, false, Duration::ZERO)?,
            cv_dir,
        ))
    } else {
        None
    };
    let fuse_loc = fuse.as_ref().map(|(_, d)| d.display().to_string());

    // Fill cv's cache through the gateway: not timed.
    run(runner(tools, cfg, &creds, &[&gw_loc]).args(["--warmup", "1", "--passes", "0"]))?;

    let floor = HttpFloor::start(&lake.source).await?;
    let floor_loc = floor.url();
    let mut warm_locs = vec![local.as_str(), gw_loc.as_str(), direct_url.as_str(), floor_loc.as_str()];
    warm_locs.extend(fuse_loc.as_deref());
    let warm_json = cfg.dir.join("gateway-warm.json");
    let g0 = gateway.stats();
    lake.begin_requests();
    run(runner(tools, cfg, &creds, &warm_locs)
        .args(["--warmup", "1", "--passes", &cfg.passes.to_string(), "--out"])
        .arg(&warm_json))?;
    let n = u64::from(cfg.passes + 1);
    let g = gateway.stats() - g0;
    let (heads, gets, lists) = lake.requests().unwrap_or_default();
    let requests =
        RequestsPerPass { gateway: g.per(n), direct_heads: heads / n, direct_gets: gets / n, direct_lists: lists / n };
    let warm = read_report(&warm_json)?;
    let warm_m: Vec<BTreeMap<String, f64>> =
        (0..warm_locs.len()).map(|i| medians(&warm, i)).collect::<Result<_, _>>()?;

    let cold_m = if cfg.cold_passes > 0 {
        let conf = client_config.display().to_string();
        let cvctl = tools.cvctl.display().to_string();
        let hook = format!(
            "'{cvctl}' mount --config '{conf}' sync '{m}' >&2 && '{cvctl}' free --wait --config '{conf}' '{m}' >&2",
            m = cfg.mount
        );
        let mut cold_locs = vec![gw_loc.as_str(), direct_url.as_str()];
        cold_locs.extend(fuse_loc.as_deref());
        let cold_json = cfg.dir.join("gateway-cold.json");
        let mut cmd = runner(tools, cfg, &creds, &cold_locs);
        cmd.args(["--warmup", "0", "--passes", &cfg.cold_passes.to_string(), "--between-passes", &hook]);
        if fuse.is_some() {
            cmd.arg("--drop-caches");
        }
        run(cmd.arg("--out").arg(&cold_json))?;
        let cold = read_report(&cold_json)?;
        if cold["fingerprints"] != warm["fingerprints"] {
            return Err("the cold passes answered differently from the warm ones".into());
        }
        Some((0..cold_locs.len()).map(|i| medians(&cold, i)).collect::<Result<Vec<_>, _>>()?)
    } else {
        None
    };
    drop(fuse);
    drop(floor);
    gateway.stop().await;
    let bytes = lake.bytes;
    lake.shutdown();

    let get = |m: &BTreeMap<String, f64>, q: &str| m.get(q).copied().unwrap_or(f64::NAN);
    let mut queries: Vec<QueryRow> = warm_m[0]
        .keys()
        .map(|q| QueryRow {
            query: q.clone(),
            local: get(&warm_m[0], q),
            gateway: get(&warm_m[1], q),
            direct: get(&warm_m[2], q),
            floor: get(&warm_m[3], q),
            fuse: warm_m.get(4).map(|m| get(m, q)),
            gateway_cold: cold_m.as_ref().map(|c| get(&c[0], q)),
            direct_cold: cold_m.as_ref().map(|c| get(&c[1], q)),
            fuse_cold: cold_m.as_ref().and_then(|c| c.get(2)).map(|m| get(m, q)),
        })
        .collect();
    queries.sort_by_key(|r| query_order(&r.query));
    let sum = |f: fn(&QueryRow) -> Option<f64>| queries.iter().map(f).sum::<Option<f64>>();
    let sums = QueryRow {
        query: "sum".into(),
        local: queries.iter().map(|r| r.local).sum(),
        gateway: queries.iter().map(|r| r.gateway).sum(),
        direct: queries.iter().map(|r| r.direct).sum(),
        floor: queries.iter().map(|r| r.floor).sum(),
        fuse: sum(|r| r.fuse),
        gateway_cold: sum(|r| r.gateway_cold),
        direct_cold: sum(|r| r.direct_cold),
        fuse_cold: sum(|r| r.fuse_cold),
    };
    Ok(GatewayTpchReport {
        sf: cfg.sf,
        rtt_ms: cfg.rtt.as_secs_f64() * 1e3,
        passes: cfg.passes,
        cold_passes: cfg.cold_passes,
        bytes,
        open_ttl_ms: cfg.open_ttl.as_millis() as u64,
        requests,
        queries,
        sums,
    })
}

fn cell(v: Option<f64>) -> String {
    v.map_or_else(|| "-".into(), |v| format!("{v:.3}"))
}

/// The table: per query and summed, the ratios to local disk and to the store directly.
pub fn print(r: &GatewayTpchReport) {
    println!(
        "DuckDB TPC-H SF {} through S3 (httpfs); medians of {} warm / {} cold passes; store at +{} ms RTT; gateway open_ttl {} ms",
        r.sf, r.passes, r.cold_passes, r.rtt_ms, r.open_ttl_ms
    );
    println!(
        "{:<6} {:>8} {:>10} {:>7} {:>9} {:>8} {:>7} {:>7} {:>8} {:>10} {:>9} {:>9}",
        "query",
        "local s",
        "gateway s",
        "/local",
        "direct s",
        "speedup",
        "http s",
        "gw/http",
        "fuse s",
        "gw cold s",
        "direct c",
        "fuse c"
    );
    for q in r.queries.iter().chain(std::iter::once(&r.sums)) {
        println!(
            "{:<6} {:>8.3} {:>10.3} {:>6.2}× {:>9.3} {:>7.1}× {:>7.3} {:>6.2}× {:>8} {:>10} {:>9} {:>9}",
            q.query,
            q.local,
            q.gateway,
            q.gateway / q.local,
            q.direct,
            q.direct / q.gateway,
            q.floor,
            q.gateway / q.floor,
            cell(q.fuse),
            cell(q.gateway_cold),
            cell(q.direct_cold),
            cell(q.fuse_cold),
        );
    }
    let s = &r.sums;
    let judge = |ok: bool| if ok { "met" } else { "missed" };
    println!(
        "gateway warm vs local disk: {:.2}× (goal ≤ {WARM_GOAL}×: {}); vs the store directly: {:.1}× faster (goal ≥ {SPEEDUP_GOAL}×: {})",
        s.gateway / s.local,
        judge(s.gateway / s.local <= WARM_GOAL),
        s.direct / s.gateway,
        judge(s.direct / s.gateway >= SPEEDUP_GOAL),
    );
    println!(
        "the floor, a bare HTTP server with the files in memory: {:.2}× local disk; the gateway is {:.2}× it",
        s.floor / s.local,
        s.gateway / s.floor
    );
    let q = &r.requests;
    println!(
        "requests per warm pass: gateway {} GET ({:.0} MiB) + {} HEAD + {} LIST; the store directly {} GET + {} HEAD + {} LIST",
        q.gateway.gets,
        q.gateway.bytes_out as f64 / (1 << 20) as f64,
        q.gateway.heads,
        q.gateway.lists,
        q.direct_gets,
        q.direct_heads,
        q.direct_lists
    );
    if let (Some(g), Some(d)) = (s.gateway_cold, s.direct_cold) {
        println!("gateway cold (cv's cache freed) vs the store directly: {:.2}×", g / d);
    }
}
