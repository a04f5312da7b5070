//! `cvctl bench open-latency`: cv's main job. Opens N real Parquet files and
//! reads each footer, through cv and straight from object storage through
//! OpenDAL; one table, same run, with ratios.
//!
//! By default the files live in cv-testkit's embedded S3 server behind its
//! delaying TCP proxy (`--rtt`, 5 ms: object storage at a realistic distance;
//! feature `embedded-s3`), and cv reads them through a cache-mode mount of
//! it. The rows: the store read directly (the baseline), cv warm (the tail is
//! in the master's cache), cv cold (each file's first open: the master HEADs
//! the object and reads its tail through the proxy), the same files on the
//! local file system (a floor no remote store beats) and a null RPC.
//! `--baseline <url>` uses any store instead; `--local` measures cv against
//! local files only (the files written into cv; needs no feature).

use crate::cluster::ClusterOptions;
use crate::cmd::CmdResult;
use crate::connect::runtime;
use clap::Args;
use cv_benches::embedded_s3::DelayProxy;
use cv_benches::open_latency::{BenchError, BenchFile, measure, verify};
use cv_benches::report::print_latency_table;
use cv_benches::ufs_scan::open::{LocalFloor, MountedRun, OpenReport, measure_mounted};
use cv_benches::ufs_scan::store::{Store, StoreRequests};
use cv_client::Client;
use cv_net::config::{ByteSize, Dur};
use opendal::Operator;
use std::path::{Path, PathBuf};
use tokio::task::JoinSet;

/// Arguments of `cvctl bench open-latency`.
#[derive(Args, Debug)]
pub struct OpenLatencyArgs {
    /// Parquet files to write and open.
    #[arg(long, default_value_t = 1000)]
    files: usize,
    /// Approximate size of each file.
    #[arg(long, default_value = "3MiB")]
    file_size: ByteSize,
    /// Passes over all files (each pass measures every file once per series).
    #[arg(long, default_value_t = 3)]
    rounds: u32,
    /// Round-trip time added in front of the embedded store (a delaying TCP
    /// proxy; the cv cluster stays on loopback, beside the engine); 0 reads
    /// it on plain loopback.
    #[arg(long, default_value = "5ms", conflicts_with_all = ["baseline", "local"])]
    rtt: Dur,
    #[command(flatten)]
    target: super::Target,
    /// Object-store location (`s3://bucket/prefix`, `fs:///dir`) the files are
    /// written to instead of the embedded store; cv reads them through a
    /// cache-mode mount of it and the baseline straight from it.
    #[arg(long, conflicts_with_all = ["s3_embedded", "local"])]
    baseline: Option<String>,
    /// OpenDAL option of `--baseline` (and of the mount), `key=value`:
    /// endpoint, region, access_key_id, secret_access_key, …
    #[arg(long = "baseline-option", value_name = "KEY=VALUE", requires = "baseline")]
    baseline_options: Vec<String>,
    /// The embedded S3 server (cv-testkit: s3s + s3s-fs, real HTTP on
    /// 127.0.0.1, behind the `--rtt` proxy): the default, so this flag only
    /// keeps older command lines working. Its request log shows what each
    /// series cost at the store. Needs a cvctl built with `--features
    /// embedded-s3`.
    #[arg(long, hide = true)]
    s3_embedded: bool,
    /// No object store: the files are written into cv and the baseline reads
    /// the local directory they are generated in (cv against the local file
    /// system; needs no feature).
    #[arg(long, conflicts_with = "s3_embedded")]
    local: bool,
    /// Work directory (default: a temporary one, removed at the end).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

impl OpenLatencyArgs {
    /// Runs the benchmark.
    pub fn run(self) -> CmdResult {
        if !self.local {
            return self.run_mounted();
        }
        self.run_local()
    }

    /// `--local`: the files are written into cv and read back next to the local copy.
    fn run_local(self) -> CmdResult {
        let tmp = tempfile::Builder::new().prefix("cv-bench-").tempdir()?;
        let dir = self.dir.clone().unwrap_or_else(|| tmp.path().to_path_buf());
        let source = dir.join("source");
        std::fs::create_dir_all(&source)?;
        eprintln!("writing {} Parquet files of ~{} to {}", self.files, self.file_size, source.display());
        let names = cv_benches::parquet_gen::generate(&source, self.files, self.file_size.bytes())?;

        let res: Result<(), BenchError> = runtime()?.block_on(async move {
            // Room for every file with a margin: the benchmark measures opens, not eviction.
            let total = self.files as u64 * self.file_size.bytes();
            let (cluster, client) = super::cluster_or_master(&self.target, || ClusterOptions {
                capacity: ByteSize((total + total / 2).max(ByteSize::gib(2).bytes())),
                ..ClusterOptions::ephemeral(&dir.join("cluster"))
            })
            .await?;
            eprintln!("copying the files into cv under /bench/open-latency");
            client.mkdir("/bench/open-latency", true).await?;
            let files = upload(&client, &source, &names).await?;

            let op = Operator::new(opendal::services::Fs::default().root(&source.to_string_lossy()))?;
            let baseline_name = "OpenDAL fs".to_string();
            let groups = verify(&client, &op, &files[0]).await?;
            eprintln!("footers verified (first file: {groups} row groups); measuring {} rounds", self.rounds);
            let rows = measure(&client, &op, &files, self.rounds, &baseline_name).await?;
            client.close();
            if let Some(c) = cluster {
                c.shutdown().await?;
            }
            if self.json {
                println!("{}", serde_json::to_string_pretty(&serde_json::json!({ "rows": rows }))?);
            } else {
                print_latency_table(
                    &format!("open + footer of {} Parquet files × {} rounds, 1 client", files.len(), self.rounds),
                    &rows,
                );
                let (b, c) = (&rows[0], &rows[1]);
                // Local files are the floor cv approaches, not what it replaces: say so.
                println!(
                    "cv vs {baseline_name} (local files, the floor; cv's job is object storage: run without --local): \
                     {} at p50, {} at p99",
                    speed(b.p50_us, c.p50_us),
                    speed(b.p99_us, c.p99_us)
                );
            }
            Ok(())
        });
        res
    }
}

/// "2.0× faster" or "1.6× slower": cv's latency against the baseline's, said the right way up.
fn speed(baseline_us: f64, cv_us: f64) -> String {
    if cv_us <= baseline_us {
        format!("{:.1}× faster", baseline_us / cv_us)
    } else {
        format!("{:.1}× slower", cv_us / baseline_us)
    }
}

impl OpenLatencyArgs {
    /// The files live in object storage; cv reads them through a cache-mode mount.
    fn run_mounted(self) -> CmdResult {
        let embedded = self.baseline.is_none();
        if embedded {
            // Before any work: say how to get the store, or how to run without it.
            cv_benches::embedded_s3::require().map_err(|e| {
                format!("{e}; or measure cv against local files only with `bench open-latency --local`")
            })?;
        }
        let options = self
            .baseline_options
            .iter()
            .map(|kv| kv.split_once('=').map(|(k, v)| (k.to_string(), v.to_string())))
            .collect::<Option<Vec<_>>>()
            .ok_or("--baseline-option takes key=value")?;
        let tmp = tempfile::Builder::new().prefix("cv-bench-").tempdir()?;
        let dir = self.dir.clone().unwrap_or_else(|| tmp.path().to_path_buf());
        let source = dir.join("source");
        std::fs::create_dir_all(&source)?;
        eprintln!("writing {} Parquet files of ~{}", self.files, self.file_size);
        let names = cv_benches::parquet_gen::generate(&source, self.files, self.file_size.bytes())?;

        let res: Result<(), BenchError> = runtime()?.block_on(async move {
            let store = match &self.baseline {
                Some(url) => Store::external(url, options),
                None => Store::embedded(&dir.join("s3"))?,
            };
            let rtt = self.rtt.get();
            // The distance to the store: both the direct side and cv's master go through it.
            let proxy = match store.addr() {
                Some(target) if embedded && !rtt.is_zero() => Some(DelayProxy::start(target, rtt / 2)?),
                _ => None,
            };
            let endpoint = proxy.as_ref().map(DelayProxy::endpoint);
            let name = match (&self.baseline, &proxy) {
                (Some(url), _) => format!("OpenDAL {}", url.split("://").next().unwrap_or("url")),
                (None, Some(_)) => format!("OpenDAL s3 +{rtt:?} RTT"),
                (None, None) => "OpenDAL s3 (loopback)".to_string(),
            };
            eprintln!("putting them into {}", store.url());
            // In a table directory under the mounted root (see `ufs_scan::TABLE_DIR`).
            let mut keys = Vec::with_capacity(names.len());
            for n in &names {
                let key = format!("{}/{n}", cv_benches::ufs_scan::TABLE_DIR);
                store.put(&key, std::fs::read(source.join(n))?).await?;
                keys.push(key);
            }
            // The local floor reads the embedded store's own files (no second copy of the data
            // set on disk); for another store, the generated files.
            let (floor_root, floor_names) = match store.local_dir() {
                Some(d) => {
                    for n in &names {
                        std::fs::remove_file(source.join(n))?;
                    }
                    (d.to_path_buf(), keys.clone())
                }
                None => (source.clone(), names.clone()),
            };
            let floor_op = Operator::new(opendal::services::Fs::default().root(&floor_root.to_string_lossy()))?;
            let op = store.operator(endpoint.as_deref())?;

            let (cluster, client) =
                super::cluster_or_master(&self.target, || ClusterOptions::ephemeral(&dir.join("cluster"))).await?;
            let stamp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis());
            let mount = format!("/bench/open-latency-{}-{}", std::process::id(), stamp.unwrap_or(0));
            let mut mount_options = store.options(endpoint.as_deref());
            mount_options.push(("cv.ttl".into(), "1h".into()));
            let behind = if proxy.is_some() { format!(" behind +{rtt:?} RTT") } else { String::new() };
            eprintln!("mounting {}{behind} at {mount} (cache mode); measuring {} rounds", store.url(), self.rounds);
            client.mount(store.url(), &mount, cv_client::MountMode::Cache, mount_options).await?;
            let run = MountedRun {
                store: &store,
                op: &op,
                mount: &mount,
                keys: &keys,
                rounds: self.rounds,
                store_name: &name,
                floor: Some(LocalFloor { op: &floor_op, names: &floor_names }),
            };
            let report = measure_mounted(&client, run).await;
            let unmounted = client.unmount(&mount, false).await;
            client.close();
            if let Some(c) = cluster {
                c.shutdown().await?;
            }
            if let Some(p) = proxy {
                p.shutdown();
            }
            let report = report?;
            unmounted?;
            if self.json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                print_mounted(&report, self.files, self.rounds, &behind);
            }
            Ok(())
        });
        res
    }
}

fn requests_line(what: &str, r: &StoreRequests, per: u64) {
    let per = per.max(1) as f64;
    println!(
        "  {what:<34} {:>8.2} HEAD {:>8.2} GET {:>10.1} KiB GET per open",
        r.head as f64 / per,
        r.get as f64 / per,
        r.get_bytes as f64 / 1024.0 / per
    );
}

/// The table (ratios to the store read directly), then each cv row said against it.
fn print_mounted(r: &OpenReport, files: usize, rounds: u32, behind: &str) {
    print_latency_table(
        &format!(
            "open + footer of {files} Parquet files in {}{behind} ({} row groups each) through a cache-mode \
             mount; first open once per file (cold), then {rounds} warm rounds, 1 client",
            r.store, r.row_groups
        ),
        &r.rows,
    );
    let (b, warm, cold) = (&r.rows[0], &r.rows[1], &r.rows[2]);
    println!(
        "cv warm vs {}: {} at p50, {} at p99",
        b.name,
        speed(b.p50_us, warm.p50_us.max(1e-9)),
        speed(b.p99_us, warm.p99_us.max(1e-9))
    );
    println!(
        "cv cold first open vs {}: {:.2}× the time at p50, {:.2}× at p99",
        b.name,
        cold.p50_us / b.p50_us.max(1e-9),
        cold.p99_us / b.p99_us.max(1e-9)
    );
    if let Some(local) = r.rows.iter().find(|row| row.name.starts_with("local fs")) {
        println!(
            "cv warm vs the local file system (the floor): {:.2}× its time at p50, {:.2}× at p99",
            warm.p50_us / local.p50_us.max(1e-9),
            warm.p99_us / local.p99_us.max(1e-9)
        );
    }
    match &r.requests {
        Some(q) => {
            println!("requests at the store (embedded S3 server's log):");
            requests_line("direct", &q.direct, files as u64 * u64::from(rounds));
            requests_line("cv cold first open", &q.cv_cold, files as u64);
            requests_line("cv warm", &q.cv_warm, files as u64 * u64::from(rounds));
            if q.cv_warm.total() > 0 {
                println!("WARNING: warm cv opens reached the store {} times", q.cv_warm.total());
            }
        }
        None => println!("(requests at the store are counted only with the embedded store)"),
    }
}

/// Copies the files into cv, 8 at a time.
async fn upload(client: &Client, source: &Path, names: &[String]) -> Result<Vec<BenchFile>, BenchError> {
    let mut set = JoinSet::new();
    let mut out = Vec::with_capacity(names.len());
    for name in names {
        if set.len() >= 8
            && let Some(r) = set.join_next().await
        {
            r??;
        }
        let client = client.clone();
        let bytes = std::fs::read(source.join(name))?;
        let path = format!("/bench/open-latency/{name}");
        out.push(BenchFile { cv_path: path.clone(), key: name.clone() });
        set.spawn(async move {
            let mut w = client.create(&path, true).await?;
            w.write(&bytes).await?;
            w.close().await.map(|_| ())
        });
    }
    while let Some(r) = set.join_next().await {
        r??;
    }
    Ok(out)
}
