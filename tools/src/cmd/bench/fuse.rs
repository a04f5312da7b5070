//! `cvctl bench fuse`: cv through its FUSE mount (mounted here, in this
//! process) next to the Rust client and the device, in one run: cached
//! sequential and random reads, and open + first-read latency.

use crate::cluster::{ClusterOptions, LocalCluster};
use crate::cmd::CmdResult;
use crate::connect::runtime;
use clap::Args;
use cv_benches::fuse_bench::{self, FuseBenchOptions, FuseReport};
use cv_benches::read_bench::{Source, Workload};
use cv_benches::report::print_latency_table;
use cv_client::ClientSettings;
use cv_net::config::ByteSize;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

/// Arguments of `cvctl bench fuse`.
#[derive(Args, Debug)]
pub struct FuseArgs {
    /// Bytes of the read data set (one file, written through the client).
    #[arg(long, default_value = "1GiB")]
    size: ByteSize,
    /// Parquet files for the open + first-read latency.
    #[arg(long, default_value_t = 200)]
    open_files: usize,
    /// Bytes per Parquet file (about).
    #[arg(long, default_value = "1MiB")]
    open_file_size: ByteSize,
    #[command(flatten)]
    reads: super::ReadSeries,
    #[command(flatten)]
    target: super::Target,
    /// Work directory (default: a temporary one, removed at the end); the mount point is `<dir>/mnt`.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Print JSON instead of tables.
    #[arg(long)]
    json: bool,
}

impl FuseArgs {
    /// Runs the benchmark.
    pub fn run(self) -> CmdResult {
        // Mounting without fusermount needs root (CAP_SYS_ADMIN).
        if std::fs::metadata("/proc/self")?.uid() != 0 {
            return Err("cvctl bench fuse mounts cv with FUSE in this process: run it as root".into());
        }
        let tmp = tempfile::Builder::new().prefix("cv-bench-fuse-").tempdir()?;
        let dir = self.dir.clone().unwrap_or_else(|| tmp.path().to_path_buf());
        let mnt = std::fs::canonicalize(&dir)?.join("mnt");
        std::fs::create_dir_all(&mnt)?;
        let mut opts = FuseBenchOptions {
            cv_dir: "/bench/fuse".into(),
            mountpoint: mnt.clone(),
            size: self.size.bytes(),
            rand_block: self.reads.rand_block.bytes(),
            rand_depths: self.reads.rand_depths.clone(),
            duration: self.reads.duration.get(),
            verify_all: self.reads.verify_all,
            device_dir: PathBuf::from("/"),
            device: self.reads.device,
            open_files: self.open_files,
            open_file_size: self.open_file_size.bytes(),
        };
        // Fail on bad values before a cluster is started and data written.
        opts.validate(self.reads.seq_block.bytes())?;
        self.reads.tune(ClientSettings::default()).validate("bench")?;
        runtime()?.block_on(async move {
            let tuned = |s| self.reads.tune(s);
            // The mount has a connection of its own, as a separate process would.
            let (cluster, client, mount_client) = match self.target.master {
                Some(m) => {
                    let client = self.target.connect_tuned(m, tuned).await?;
                    let mount_client = self.target.connect_tuned(m, tuned).await?;
                    opts.device_dir = self.reads.device_dir.clone().unwrap_or_else(|| dir.clone());
                    (None, client, mount_client)
                }
                None => {
                    let total = self.size.bytes();
                    let cluster_opts = ClusterOptions {
                        shards: self.reads.shards,
                        capacity: ByteSize((total * 2).max(ByteSize::gib(1).bytes())),
                        memory_tier: self.reads.memory_tier,
                        ..ClusterOptions::ephemeral(&dir.join("cluster"))
                    };
                    eprintln!(
                        "starting an embedded cluster ({} shards) under {}",
                        self.reads.shards,
                        cluster_opts.dir.display()
                    );
                    let c = LocalCluster::start(&cluster_opts).await?;
                    opts.device_dir = self.reads.device_dir.clone().unwrap_or_else(|| cluster_opts.dir.join("worker"));
                    let settings = tuned(c.client_settings());
                    settings.validate("client")?;
                    let client = c.client_with(settings.clone()).await?;
                    let mount_client = c.client_with(settings).await?;
                    (Some(c), client, mount_client)
                }
            };
            let mounted = cv_fuse::mount(mount_client.clone(), &mnt, cv_fuse::MountOptions::default()).await?;
            eprintln!("cv / mounted at {}", mnt.display());
            let report = fuse_bench::run(&client, &opts, &|m| eprintln!("{m}")).await;
            tokio::task::spawn_blocking(move || mounted.unmount()).await??;
            mount_client.close();
            client.close();
            if let Some(c) = cluster {
                c.shutdown().await?;
            }
            let report = report?;
            if self.json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                print_tables(&report);
            }
            Ok(())
        })
    }
}

fn print_tables(r: &FuseReport) {
    println!(
        "cvctl bench fuse: one {} file, same run (sequential: GiB/s; random: IOPS p50/p99)",
        ByteSize(r.dataset_bytes)
    );
    println!("cached: {}", r.cached);
    println!("device: {}", r.device_tool);
    println!("FUSE:   {}", r.fuse_tool);
    println!(
        "{:<16} {:>5}  {:<28} {:<28} {:<28} {:>11} {:>11}",
        "workload", "depth", "device", "client", "FUSE", "FUSE/client", "FUSE/device"
    );
    for w in r.series.chunks(3) {
        let [dev, client, fuse] = w else { continue };
        if (dev.source, client.source, fuse.source) != (Source::Device, Source::Cv, Source::Fuse) {
            continue;
        }
        let kind = match fuse.workload {
            Workload::Sequential => format!("seq {}", ByteSize(fuse.block)),
            Workload::Random => format!("rand {}", ByteSize(fuse.block)),
        };
        println!(
            "{:<16} {:>5}  {:<28} {:<28} {:<28} {:>11} {:>11}",
            kind,
            fuse.depth,
            dev.summary(),
            client.summary(),
            fuse.summary(),
            fuse.percent_of(client),
            fuse.percent_of(dev)
        );
    }
    println!();
    print_latency_table(
        &format!("open + first read of {} Parquet files (each once per path, no page cache)", r.open_files),
        &r.open,
    );
    println!(
        "{} bytes checked against what was written. The machine's cores are shared: ratios from one run, not absolutes.",
        r.verified_bytes
    );
}
