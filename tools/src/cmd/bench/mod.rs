//! `cvctl bench …`: each benchmark prints the baseline and cv side by side
//! from one run, with their ratio; `--json` prints the same as JSON.

mod duckdb;
mod engines;
mod failover;
mod fuse;
mod gateway;
mod meta;
mod open;
mod open_latency;
mod put;
mod read;
mod rtt;
mod scan;
mod spark;
mod wire;

use super::CmdResult;
use crate::cluster::{ClusterOptions, LocalCluster};
use crate::config::CvConfig;
use crate::connect::ClientArgs;
use clap::{Args, Subcommand};
use cv_benches::read_bench::DeviceChoice;
use cv_client::{Client, ClientSettings};
use cv_net::config::{ByteSize, Dur};
use cv_net::tls::Identity;
use std::net::SocketAddr;
use std::path::PathBuf;

/// Which cluster a benchmark measures (flattened into the benchmarks that can use either).
#[derive(Args, Debug)]
struct Target {
    /// Run against an existing cluster at this master address (needs `--config` with a client
    /// identity); default: an embedded local cluster.
    #[arg(long)]
    master: Option<SocketAddr>,
    /// Client config for `--master`.
    #[arg(long, default_value = "cv-client.toml")]
    config: PathBuf,
}

/// The read series shared by `bench read` and `bench fuse`, and the embedded cluster they run on.
#[derive(Args, Debug)]
struct ReadSeries {
    /// Sequential request size (the client's read_chunk; fio's block size).
    #[arg(long, default_value = "1MiB")]
    seq_block: ByteSize,
    /// Sequential requests in flight (the client's read-ahead, prefetch_depth; fio's depth).
    #[arg(long, default_value_t = ClientSettings::default().prefetch_depth)]
    seq_depth: u32,
    /// Random request size.
    #[arg(long, default_value = "64KiB")]
    rand_block: ByteSize,
    /// Queue depths of the random series (concurrent reads).
    #[arg(long, value_delimiter = ',', default_value = "1,32")]
    rand_depths: Vec<u32>,
    /// Length of each random series.
    #[arg(long, default_value = "8s")]
    duration: Dur,
    /// Worker shards of the embedded cluster (`bench read`: also the bare QUIC server endpoints).
    #[arg(long, default_value_t = 2)]
    shards: u16,
    /// Worker memory tier of the embedded cluster; 0 measures the disk tier alone.
    #[arg(long, default_value = "0")]
    memory_tier: ByteSize,
    /// Device limit tool: auto (fio if on PATH), fio, or uring (in-tree reader). `bench fuse`
    /// needs fio for the mount either way.
    #[arg(long, default_value = "auto")]
    device: DeviceChoice,
    /// Directory of the device file; default: the embedded worker's data directory.
    /// With `--master`, give a directory on the worker's disk.
    #[arg(long)]
    device_dir: Option<PathBuf>,
    /// Check every byte of every measured read instead of one read in 64.
    #[arg(long)]
    verify_all: bool,
}

impl ReadSeries {
    /// `s` with this run's sequential request size and read-ahead.
    fn tune(&self, s: ClientSettings) -> ClientSettings {
        ClientSettings { prefetch_depth: self.seq_depth, read_chunk: self.seq_block, ..s }
    }
}

impl Target {
    /// A client of the cluster at `master` with this target's config, its client settings
    /// changed by `tune` and validated.
    async fn connect_tuned(
        &self,
        master: SocketAddr,
        tune: impl Fn(ClientSettings) -> ClientSettings,
    ) -> Result<Client, Box<dyn std::error::Error + Send + Sync>> {
        let cfg = CvConfig::load(&self.config)?;
        let settings = tune(ClientSettings { master, ..cfg.common.client.clone() });
        settings.validate("client")?;
        Ok(Client::connect(settings, &Identity::load(&cfg.common.tls)?, &cfg.common.transport).await?)
    }
}

/// The cluster a benchmark measures: the one at `target.master` (client identity from its
/// config), or an embedded one started with `opts`, returned so the caller shuts it down.
async fn cluster_or_master(
    target: &Target,
    opts: impl FnOnce() -> ClusterOptions,
) -> Result<(Option<LocalCluster>, Client), Box<dyn std::error::Error + Send + Sync>> {
    if let Some(m) = target.master {
        let args = ClientArgs { config: target.config.clone(), master: Some(m), leader_hint: Some("off".into()) };
        return Ok((None, args.connect().await?));
    }
    let opts = opts();
    eprintln!("starting an embedded cluster (master + 1 worker) under {}", opts.dir.display());
    let c = LocalCluster::start(&opts).await?;
    let client = c.client().await?;
    Ok((Some(c), client))
}

/// Benchmarks.
#[derive(Subcommand, Debug)]
pub enum Bench {
    /// cv's main job: open N real Parquet files in object storage (an embedded
    /// S3 server behind a `--rtt` 5 ms delay proxy, or `--baseline <url>`) and
    /// read their footers through a cache-mode mount in cv, warm and cold, and
    /// straight from the store (OpenDAL), with the local file system and a null
    /// RPC as floors. Starts an embedded cluster unless `--master` is given.
    /// Needs feature `embedded-s3` for the embedded store; `--local` measures cv
    /// against local files only.
    OpenLatency(open_latency::OpenLatencyArgs),
    /// Frame encode + validate + access of an open reply with a 64 KiB tail,
    /// against a bincode serialize + deserialize copy.
    Wire(wire::WireArgs),
    /// QUIC loopback round trip of a 64-byte request: bare quinn echo against a
    /// cv Ping call (the latency floor).
    Rtt(rtt::RttArgs),
    /// Master open latency (block map + footer in one reply) next to a null RPC.
    Open(open::OpenArgs),
    /// Master metadata ops/s and p99 at concurrency 1 and 40, journal fsync on.
    Meta(meta::MetaArgs),
    /// Whole-file put latency to a new path and over an existing file (atomic replace), on
    /// this build's cluster and, with `--baseline-config`, another one side by side.
    Put(put::PutArgs),
    /// Cached sequential 1 MiB and random 64 KiB reads through cv, next to the
    /// device limit (fio/io_uring O_DIRECT) and bare QUIC (quinn) in one run.
    Read(read::ReadArgs),
    /// cv through its FUSE mount (mounted in this process; root) next to the
    /// Rust client and the device: fio 1 MiB sequential and 64 KiB random
    /// reads (O_DIRECT), and open + pread of the last 16 KiB + close latency.
    Fuse(fuse::FuseArgs),
    /// Parquet files in object storage (an embedded S3 server): open, footer,
    /// K column chunks — direct through OpenDAL, and through a cache-mode
    /// mount cold and warm; store on loopback and behind an added round trip.
    /// Needs a cvctl built with `--features embedded-s3`.
    Scan(scan::ScanArgs),
    /// Spark SQL TPC-H (PySpark local mode, `scripts/install-spark`) over `file://` and over
    /// `cv://` on a cache-mode mount of an embedded S3 server behind an added round trip, warm
    /// and cold, with every answer checked equal. Needs feature `embedded-s3` and
    /// libcv_capi.so (`cargo build --release -p cv-capi`).
    SparkTpch(spark::SparkTpchArgs),
    /// DuckDB TPC-H (duckdb from PyPI, `scripts/install-spark`'s venv) on local disk and through
    /// a `cvctl fuse` mount of a cache-mode mount of an embedded S3 server behind an added round
    /// trip: warm, and with the page cache dropped before every query; cv's CPU per pass. Needs
    /// root and feature `embedded-s3`.
    DuckdbTpch(duckdb::DuckdbTpchArgs),
    /// DuckDB TPC-H through S3 (httpfs): cv's S3 gateway in front of a cache-mode mount of an
    /// embedded S3 server behind an added round trip, against the store directly and local
    /// disk (and cv's FUSE mount, as root); warm, and with cv's cache freed before each pass.
    /// Needs feature `embedded-s3`.
    GatewayTpch(gateway::GatewayTpchArgs),
    /// The floor of `duckdb-tpch --fuse-floor`: a bare read-only FUSE file system over a local
    /// directory (O_DIRECT reads, nothing else), served until unmounted. Started by that
    /// benchmark as a process of its own, so its CPU is counted apart.
    #[command(hide = true)]
    FuseFloor(duckdb::FuseFloorArgs),
    /// kill -9 one of three workers (each in its own network namespace, a real S3 server on
    /// the rig's bridge) while readers loop over cache-mode files: failed reads, wrong bytes,
    /// read latency before, during and after the failover, time until every read is served
    /// again. Needs root and a cvctl built with `--features embedded-s3`.
    Failover(failover::FailoverArgs),
    /// kill -9 the master during a put storm on the multi-host rig and start it again:
    /// acknowledged puts lost, puts failing after it is back, unfinished entries left. Needs
    /// root and a cvctl built with `--features embedded-s3`.
    MasterCrash(failover::MasterCrashArgs),
    /// A 4th worker joins three that cache a mount's blocks, on the multi-host rig (root):
    /// the blocks that move to it against the ideal quarter. Needs feature `embedded-s3`.
    Join(failover::JoinArgs),
    /// Fill three workers past capacity with cv-only files on the multi-host rig (root):
    /// acknowledged files lost (none), puts refused with NoSpace. Needs feature `embedded-s3`.
    Fill(failover::FillArgs),
}

impl Bench {
    /// `bench read --timeline`'s collector of request marks, the only bench with a layer.
    pub fn log_layer(&self) -> Option<crate::logging::ExtraLayer> {
        matches!(self, Bench::Read(a) if a.timeline).then(read::timeline_layer)
    }

    /// Runs the benchmark.
    pub fn run(self) -> CmdResult {
        match self {
            Bench::OpenLatency(a) => a.run(),
            Bench::Wire(a) => a.run(),
            Bench::Rtt(a) => a.run(),
            Bench::Open(a) => a.run(),
            Bench::Meta(a) => a.run(),
            Bench::Put(a) => a.run(),
            Bench::Read(a) => a.run(),
            Bench::Scan(a) => a.run(),
            Bench::SparkTpch(a) => a.run(),
            Bench::DuckdbTpch(a) => a.run(),
            Bench::GatewayTpch(a) => a.run(),
            Bench::FuseFloor(a) => a.run(),
            Bench::Fuse(a) => a.run(),
            Bench::Failover(a) => a.run(),
            Bench::MasterCrash(a) => a.run(),
            Bench::Join(a) => a.run(),
            Bench::Fill(a) => a.run(),
        }
    }
}
