//! `cvctl bench scan`: M Parquet files in an S3 store (the embedded testkit
//! server: feature `embedded-s3`), each opened, footer parsed, K column
//! chunks read — direct from the store through OpenDAL, and through a
//! cache-mode mount in cv, cold and warm; with the store on loopback and
//! behind a delay proxy. The work is in `cv_benches::ufs_scan`; this file is
//! the command line and the cluster.

use crate::cluster::ClusterOptions;
use crate::cmd::CmdResult;
use crate::connect::runtime;
use clap::{ArgAction, Args};
use cv_benches::open_latency::BenchError;
use cv_benches::ufs_scan::ops::{ChunkPlan, ChunkReads};
use cv_benches::ufs_scan::store::Store;
use cv_benches::ufs_scan::{self, ScanConfig};
use cv_net::config::{ByteSize, Dur};
use std::path::PathBuf;

/// Arguments of `cvctl bench scan`.
#[derive(Args, Debug)]
pub struct ScanArgs {
    /// Parquet files in the store (M).
    #[arg(long, default_value_t = 50)]
    files: usize,
    /// Approximate size of each file (several row groups of 5 columns each).
    #[arg(long, default_value = "6MiB")]
    file_size: ByteSize,
    /// Column chunks read per file (K), picked from the parsed footer.
    #[arg(long, default_value_t = 3)]
    chunks: usize,
    /// Columns the chunks come from, by index, e.g. `0,1,2` (the generated
    /// files have id, ts, amount, region and a wide payload column); default:
    /// spread from the last (widest) column down.
    #[arg(long, value_delimiter = ',')]
    columns: Vec<usize>,
    /// Read the K chunks one after another (default: all at once, on both sides).
    #[arg(long)]
    sequential_chunks: bool,
    /// Cold rounds (mount sync + free) after the first-sight round; warm and
    /// direct run in every round.
    #[arg(long, default_value_t = 3)]
    rounds: u32,
    /// Round-trip time added in front of the store for the second run (a
    /// delaying TCP proxy; the cv cluster stays on loopback); 0 skips it.
    #[arg(long, default_value = "5ms")]
    rtt: Dur,
    /// fdatasync block data on the embedded worker (as deployed); false shows
    /// what it costs a cold fill.
    #[arg(long, default_value_t = true, action = ArgAction::Set)]
    sync_data: bool,
    #[command(flatten)]
    target: super::Target,
    /// Work directory (default: a temporary one, removed at the end).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

impl ScanArgs {
    /// Runs the benchmark.
    pub fn run(self) -> CmdResult {
        cv_benches::embedded_s3::require()?;
        if self.files == 0 || self.chunks == 0 {
            return Err("--files and --chunks must be at least 1".into());
        }
        if let Some(c) = self.columns.iter().find(|c| **c >= 5) {
            return Err(format!("--columns {c}: the generated files have columns 0 to 4").into());
        }
        if self.file_size.bytes() < 256 << 10 {
            return Err("--file-size must be at least 256KiB (a few row groups)".into());
        }
        let tmp = tempfile::Builder::new().prefix("cv-bench-scan-").tempdir()?;
        let dir = self.dir.clone().unwrap_or_else(|| tmp.path().to_path_buf());
        let source = dir.join("source");
        std::fs::create_dir_all(&source)?;
        eprintln!("writing {} Parquet files of ~{}", self.files, self.file_size);
        let names = cv_benches::parquet_gen::generate(&source, self.files, self.file_size.bytes())?;

        let res: Result<(), BenchError> = runtime()?.block_on(async move {
            let store = Store::embedded(&dir.join("s3"))?;
            eprintln!("putting them into the embedded S3 server ({})", store.url());
            let plan = ChunkPlan { k: self.chunks, columns: self.columns.clone() };
            let files = ufs_scan::load_store(&store, &source, &names, &plan).await?;

            let total: u64 = files.iter().map(|f| f.len).sum();
            let (cluster, client) = super::cluster_or_master(&self.target, || ClusterOptions {
                capacity: ByteSize((3 * total).max(ByteSize::gib(2).bytes())),
                sync_data: self.sync_data,
                ..ClusterOptions::ephemeral(&dir.join("cluster"))
            })
            .await?;
            let stamp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis());
            let cfg = ScanConfig {
                plan,
                reads: if self.sequential_chunks { ChunkReads::Sequential } else { ChunkReads::Parallel },
                rounds: self.rounds,
                rtt: self.rtt.0,
                mount_root: format!("/bench/scan-{}-{}", std::process::id(), stamp.unwrap_or(0)),
                ttl: "1h".into(),
            };
            let report = ufs_scan::run(&client, &store, &files, &cfg).await;
            client.close();
            if let Some(c) = cluster {
                c.shutdown().await?;
            }
            let report = report?;
            if self.json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                ufs_scan::print::print_scan(&report);
            }
            Ok(())
        });
        res
    }
}
