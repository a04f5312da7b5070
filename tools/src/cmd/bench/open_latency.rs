//! `cvctl bench open-latency`: cv's main job. Opens N real Parquet files and
//! reads each footer, through cv and straight from their source through
//! OpenDAL, with a null RPC as the floor; one table, same run, with ratios.
//!
//! By default the files are written into cv and into a local directory (the
//! baseline). With `--baseline <url>` or `--s3-embedded` they live in object
//! storage only, and cv reads them through a cache-mode mount of that
//! location: the first open of each file is cold (reported on its own row),
//! the measured rounds are warm.

use crate::cluster::ClusterOptions;
use crate::cmd::CmdResult;
use crate::connect::runtime;
use clap::Args;
use cv_benches::open_latency::{BenchError, BenchFile, measure, verify};
use cv_benches::report::print_latency_table;
use cv_benches::ufs_scan::open::{OpenReport, measure_mounted};
use cv_benches::ufs_scan::store::{Store, StoreRequests};
use cv_client::Client;
use cv_net::config::ByteSize;
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
    #[command(flatten)]
    target: super::Target,
    /// Object-store location (`s3://bucket/prefix`, `fs:///dir`) the files are
    /// written to; cv reads them through a cache-mode mount of it and the
    /// baseline straight from it. Default: the files are written into cv and
    /// the baseline reads the local directory they are generated in.
    #[arg(long, conflicts_with = "s3_embedded")]
    baseline: Option<String>,
    /// OpenDAL option of `--baseline` (and of the mount), `key=value`:
    /// endpoint, region, access_key_id, secret_access_key, …
    #[arg(long = "baseline-option", value_name = "KEY=VALUE", requires = "baseline")]
    baseline_options: Vec<String>,
    /// Start cv-testkit's S3 server (s3s + s3s-fs, real HTTP on 127.0.0.1) in
    /// this process and use it as `--baseline`; its request log shows what
    /// each series cost at the store. Needs a cvctl built with `--features
    /// embedded-s3`.
    #[arg(long)]
    s3_embedded: bool,
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
        if self.baseline.is_some() || self.s3_embedded {
            return self.run_mounted();
        }
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
                println!(
                    "cv vs {baseline_name}: {} at p50, {} at p99",
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
        if self.s3_embedded {
            cv_benches::embedded_s3::require()?;
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
            let scheme = store.url().split("://").next().unwrap_or("url").to_string();
            let name = if self.s3_embedded { "OpenDAL s3 (embedded)".to_string() } else { format!("OpenDAL {scheme}") };
            eprintln!("putting them into {}", store.url());
            // In a table directory under the mounted root (see `ufs_scan::TABLE_DIR`).
            let mut keys = Vec::with_capacity(names.len());
            for n in &names {
                let p = source.join(n);
                let key = format!("{}/{n}", cv_benches::ufs_scan::TABLE_DIR);
                store.put(&key, std::fs::read(&p)?).await?;
                std::fs::remove_file(&p)?;
                keys.push(key);
            }
            let op = store.operator(None)?;

            let (cluster, client) =
                super::cluster_or_master(&self.target, || ClusterOptions::ephemeral(&dir.join("cluster"))).await?;
            let stamp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis());
            let mount = format!("/bench/open-latency-{}-{}", std::process::id(), stamp.unwrap_or(0));
            let mut mount_options = store.options(None);
            mount_options.push(("cv.ttl".into(), "1h".into()));
            eprintln!("mounting {} at {mount} (cache mode); measuring {} rounds", store.url(), self.rounds);
            client.mount(store.url(), &mount, cv_client::MountMode::Cache, mount_options).await?;
            let report = measure_mounted(&client, &store, &op, &mount, &keys, self.rounds, &name).await;
            let unmounted = client.unmount(&mount, false).await;
            client.close();
            if let Some(c) = cluster {
                c.shutdown().await?;
            }
            let report = report?;
            unmounted?;
            if self.json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                print_mounted(&report, self.files, self.rounds);
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

fn print_mounted(r: &OpenReport, files: usize, rounds: u32) {
    print_latency_table(
        &format!(
            "open + footer of {files} Parquet files in {} ({} row groups each) through a cache-mode mount; \
             first open once per file (cold), then {rounds} warm rounds, 1 client",
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
        None => println!("(requests at the store are counted only with --s3-embedded)"),
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
