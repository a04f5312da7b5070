//! `cvctl bench open-latency`: cv's main job. Opens N real Parquet files and
//! reads each footer, through cv and straight from their source through
//! OpenDAL, with a null RPC as the floor; one table, same run, with ratios.

use crate::cluster::{ClusterOptions, LocalCluster};
use crate::cmd::CmdResult;
use crate::connect::{ClientArgs, runtime};
use clap::Args;
use cv_benches::open_latency::{BenchError, BenchFile, measure, verify};
use cv_benches::report::print_latency_table;
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
    /// Run against an existing cluster at this master address (needs `--config`
    /// with a client identity); default: an embedded local cluster.
    #[arg(long)]
    master: Option<std::net::SocketAddr>,
    /// Client config for `--master`.
    #[arg(long, default_value = "cv-client.toml")]
    config: PathBuf,
    /// Baseline OpenDAL URL (e.g. `s3://bucket/prefix?endpoint=…`) the files are
    /// also written to; default: the local directory they are generated in.
    #[arg(long)]
    baseline: Option<String>,
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
        let tmp = tempfile::Builder::new().prefix("cv-bench-").tempdir()?;
        let dir = self.dir.clone().unwrap_or_else(|| tmp.path().to_path_buf());
        let source = dir.join("source");
        std::fs::create_dir_all(&source)?;
        eprintln!("writing {} Parquet files of ~{} to {}", self.files, self.file_size, source.display());
        let names = generate(&source, self.files, self.file_size.bytes())?;

        let res: Result<(), BenchError> = runtime()?.block_on(async move {
            let (cluster, client) = match self.master {
                Some(m) => {
                    let args = ClientArgs { config: self.config.clone(), master: Some(m) };
                    (None, args.connect().await?)
                }
                None => {
                    eprintln!("starting an embedded cluster (master + 1 worker) under {}", dir.display());
                    // Room for every file with a margin: the benchmark measures opens, not eviction.
                    let total = self.files as u64 * self.file_size.bytes();
                    let opts = ClusterOptions {
                        capacity: ByteSize((total + total / 2).max(ByteSize::gib(2).bytes())),
                        ..ClusterOptions::ephemeral(&dir.join("cluster"))
                    };
                    let c = LocalCluster::start(&opts).await?;
                    let client = c.client().await?;
                    (Some(c), client)
                }
            };
            eprintln!("copying the files into cv under /bench/open-latency");
            client.mkdir("/bench/open-latency", true).await?;
            let files = upload(&client, &source, &names).await?;

            let (op, baseline_name) = match &self.baseline {
                None => (
                    Operator::new(opendal::services::Fs::default().root(&source.to_string_lossy()))?,
                    "OpenDAL fs".to_string(),
                ),
                Some(url) => {
                    let op = Operator::from_uri(url.as_str())?;
                    for f in &files {
                        op.write(&f.key, std::fs::read(source.join(&f.key))?).await?;
                    }
                    (op, format!("OpenDAL {}", url.split("://").next().unwrap_or("url")))
                }
            };
            let groups = verify(&client, &op, &files[0]).await?;
            eprintln!("footers verified (first file: {groups} row groups); measuring {} rounds", self.rounds);
            let rows = measure(&client, &op, &files, self.rounds, &baseline_name).await?;
            client.close();
            if let Some(c) = cluster {
                c.shutdown().await?;
            }
            if self.json {
                println!("{}", serde_json::to_string_pretty(&rows)?);
            } else {
                print_latency_table(
                    &format!("open + footer of {} Parquet files × {} rounds, 1 client", files.len(), self.rounds),
                    &rows,
                );
                let (b, c) = (&rows[0], &rows[1]);
                println!(
                    "cv vs {baseline_name}: {:.1}× faster at p50, {:.1}× at p99",
                    b.p50_us / c.p50_us,
                    b.p99_us / c.p99_us
                );
            }
            Ok(())
        });
        res
    }
}

/// Writes `n` files on 2 threads; returns their names.
fn generate(dir: &Path, n: usize, size: u64) -> std::io::Result<Vec<String>> {
    let names: Vec<String> = (0..n).map(|i| format!("part-{i:05}.parquet")).collect();
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..2)
            .map(|t| {
                let names = &names;
                s.spawn(move || -> std::io::Result<()> {
                    for (i, name) in names.iter().enumerate().skip(t).step_by(2) {
                        cv_benches::parquet_gen::write_file(&dir.join(name), size, i as u64)?;
                    }
                    Ok(())
                })
            })
            .collect();
        handles.into_iter().try_for_each(|h| h.join().map_err(|_| std::io::Error::other("writer panicked"))?)
    })?;
    Ok(names)
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
