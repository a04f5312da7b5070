//! cv through its FUSE mount next to the Rust client and the device, in one
//! run (`cvctl bench fuse`; the caller mounts). Two parts:
//! - [`reads`]: cached sequential 1 MiB and random 64 KiB reads — fio
//!   (io_uring, O_DIRECT, so the kernel page cache is bypassed and every
//!   read reaches the mount) on a file of the mount, the same reads through
//!   the client, and fio on a device file; interleaved workload by workload.
//! - [`open`]: open + first read latency of Parquet files — `open()`,
//!   `pread()` of the last 16 KiB, `close()` through the mount against the
//!   client's open + read of the same 16 KiB (the footer, served from the
//!   tail of the open reply).
//!
//! Errors are the read benchmark's ([`ReadBenchError`]), kind `Fuse` for a
//! failed read through the mount.

pub mod open;
pub mod reads;

use crate::read_bench::{DeviceChoice, ReadBenchError, ReadBenchErrorKind, Result, Series};
use crate::report::Latency;
use cv_client::Client;
use serde::Serialize;
use std::path::PathBuf;
use std::time::Duration;

/// What to run.
#[derive(Clone, Debug)]
pub struct FuseBenchOptions {
    /// cv directory of the data (replaced if present, removed afterwards).
    pub cv_dir: String,
    /// Where the cv root is mounted.
    pub mountpoint: PathBuf,
    /// Bytes of the read data set (one file).
    pub size: u64,
    /// Random read size.
    pub rand_block: u64,
    /// Queue depths of the random series.
    pub rand_depths: Vec<u32>,
    /// Length of each random series.
    pub duration: Duration,
    /// Check every byte of every client read, not one in 64.
    pub verify_all: bool,
    /// Directory of the device file (the worker's file system).
    pub device_dir: PathBuf,
    /// Device tool; fio is needed for the mount's series either way.
    pub device: DeviceChoice,
    /// Parquet files for the open latency.
    pub open_files: usize,
    /// Bytes per Parquet file (about).
    pub open_file_size: u64,
}

impl FuseBenchOptions {
    /// Checks the values against each other.
    pub fn validate(&self, seq_block: u64) -> Result<()> {
        let bad = |m: &str| Err(ReadBenchError::new(ReadBenchErrorKind::Config, m));
        if !self.mountpoint.is_absolute() || !self.cv_dir.starts_with('/') {
            return bad("mountpoint and cv_dir must be absolute");
        }
        if self.open_files == 0 || self.open_file_size < (64 << 10) {
            return bad("open latency needs at least one file of at least 64 KiB");
        }
        self.read_options().validate(seq_block)
    }

    /// The read benchmark's options for the same data set (one file).
    pub(crate) fn read_options(&self) -> crate::read_bench::ReadBenchOptions {
        crate::read_bench::ReadBenchOptions {
            cv_dir: format!("{}/reads", self.cv_dir),
            total: self.size,
            file_size: self.size,
            rand_block: self.rand_block,
            rand_depths: self.rand_depths.clone(),
            duration: self.duration,
            verify_all: self.verify_all,
            device_dir: self.device_dir.clone(),
            device: self.device,
            quic_endpoints: 1,
            rounds: 1,
            timeline: None,
        }
    }
}

/// Everything one run measured.
#[derive(Clone, Debug, Serialize)]
pub struct FuseReport {
    /// What "cached" means here.
    pub cached: String,
    /// How the mount's reads are made.
    pub fuse_tool: String,
    /// How the device is measured.
    pub device_tool: String,
    /// Bytes of the read data set.
    pub dataset_bytes: u64,
    /// Bytes checked against what was written.
    pub verified_bytes: u64,
    /// Read series, per workload: device, client, FUSE.
    pub series: Vec<Series>,
    /// Parquet files measured for the open latency (each opened once per path).
    pub open_files: usize,
    /// Open latency rows: client, FUSE.
    pub open: Vec<Latency>,
}

/// Runs both parts with `client` against the cluster mounted at
/// `opts.mountpoint`; the data is removed from cv afterwards, also on error.
pub async fn run(client: &Client, opts: &FuseBenchOptions, log: &dyn Fn(&str)) -> Result<FuseReport> {
    opts.validate(client.settings().read_chunk.bytes())?;
    let fio = crate::read_bench::device::fio_version().ok_or_else(|| {
        ReadBenchError::new(ReadBenchErrorKind::Config, "fio is not on PATH (scripts/install-bench-deps)")
    })?;
    let measured = async {
        let (series, verified, device_tool) = reads::measure(client, opts, log).await?;
        let open = open::measure(client, opts, log).await?;
        Ok::<_, ReadBenchError>((series, verified, device_tool, open))
    }
    .await;
    let removed = client.delete(&opts.cv_dir, true).await;
    let (series, verified_bytes, device_tool, open) = measured?;
    removed.map_err(|e| ReadBenchError::cv("remove the data", e))?;
    Ok(FuseReport {
        cached: "blocks on the worker's disk tier; every series reads with O_DIRECT (the mount's file too), so \
                 no page cache answers: a FUSE read is kernel → mount → client → worker shard"
            .into(),
        fuse_tool: format!("{fio}, ioengine=io_uring, direct=1, on the file through the mount"),
        device_tool,
        dataset_bytes: opts.size,
        verified_bytes,
        series,
        open_files: opts.open_files,
        open,
    })
}
