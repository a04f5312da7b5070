//! Cached reads three ways in one run: the device file (fio or the in-tree
//! reader, as `bench read` does), the Rust client (the read benchmark's cv
//! series), and fio on the same cv file through the mount. fio reads the
//! mount with O_DIRECT: without it the kernel's page cache would answer
//! repeated reads and this would measure memory, not the mount.

use super::FuseBenchOptions;
use crate::read_bench::cv::DataSet;
use crate::read_bench::device::{DeviceFile, DeviceTool, parse_fio, run_fio_with};
use crate::read_bench::pattern::first_mismatch;
use crate::read_bench::{ReadBenchError, ReadBenchErrorKind, Result, Series, Source, Workload};
use cv_client::Client;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

fn fuse_err(what: String, e: impl std::error::Error + Send + Sync + 'static) -> ReadBenchError {
    ReadBenchError::new(ReadBenchErrorKind::Fuse, what).with_source(e)
}

/// Writes the data set (one file), warms it, and measures every series.
/// Returns the series (per workload: device, client, FUSE), the bytes
/// checked, and how the device was measured.
pub async fn measure(
    client: &Client,
    opts: &FuseBenchOptions,
    log: &dyn Fn(&str),
) -> Result<(Vec<Series>, u64, String)> {
    let ro = opts.read_options();
    let tool = DeviceTool::pick(opts.device)?;
    log(&format!("writing {} B through the client under {}", ro.total, ro.cv_dir));
    let data = DataSet::write(client, &ro.cv_dir, ro.total, ro.file_size).await?;
    log("warming: every byte once through the client, then once through the mount, both checked");
    let mut verified = data.warm(client).await?;
    let on_mount = opts.mountpoint.join(ro.cv_dir.trim_start_matches('/')).join("part-00000");
    verified += check_through_mount(on_mount.clone(), ro.total).await?;
    log(&format!("writing the {} B device file under {}", ro.total, ro.device_dir.display()));
    let dev = DeviceFile::create(&ro.device_dir, ro.total).await?;

    let s = client.settings();
    let (seq_block, seq_depth) = (s.read_chunk.bytes(), s.prefetch_depth);
    let mut series = Vec::new();
    log(&format!("sequential {seq_block} B reads, depth {seq_depth}: device, client, FUSE"));
    series.push(tool.sequential(&dev, seq_block, seq_depth).await?);
    let (cv, v) = data.sequential(client, ro.verify_all).await?;
    series.push(cv);
    verified += v;
    series.push(fio_on_mount(&on_mount, ro.total, Workload::Sequential, seq_block, seq_depth, None).await?);
    for &depth in &ro.rand_depths {
        log(&format!("random {} B reads, depth {depth}, {:?} each: device, client, FUSE", ro.rand_block, ro.duration));
        series.push(tool.random(&dev, ro.rand_block, depth, ro.duration).await?);
        let (cv, v) = data.random(ro.rand_block, depth, ro.duration, ro.verify_all).await?;
        series.push(cv);
        verified += v;
        let fuse = fio_on_mount(&on_mount, ro.total, Workload::Random, ro.rand_block, depth, Some(ro.duration));
        series.push(fuse.await?);
    }
    dev.remove();
    Ok((series, verified, tool.describe()))
}

/// Reads the file through the mount once and checks every byte (file 0 of
/// the data set holds pattern seed 0).
async fn check_through_mount(path: PathBuf, len: u64) -> Result<u64> {
    tokio::task::spawn_blocking(move || {
        let f = std::fs::File::open(&path).map_err(|e| fuse_err(format!("open {}", path.display()), e))?;
        let mut buf = vec![0u8; 1 << 20];
        let mut off = 0;
        while off < len {
            let n = (len - off).min(buf.len() as u64) as usize;
            f.read_exact_at(&mut buf[..n], off).map_err(|e| fuse_err(format!("read {}", path.display()), e))?;
            if let Some(at) = first_mismatch(0, off, &buf[..n]) {
                let m = format!("{}: wrong bytes at {} through the mount", path.display(), off + at as u64);
                return Err(ReadBenchError::new(ReadBenchErrorKind::WrongBytes, m));
            }
            off += n as u64;
        }
        Ok(len)
    })
    .await
    .map_err(|e| ReadBenchError::new(ReadBenchErrorKind::Fuse, format!("mount check task: {e}")))?
}

/// One fio job on the mount's file.
async fn fio_on_mount(
    path: &Path,
    len: u64,
    workload: Workload,
    block: u64,
    depth: u32,
    duration: Option<Duration>,
) -> Result<Series> {
    let path = path.to_path_buf();
    tokio::task::spawn_blocking(move || {
        // io_uring may do an O_DIRECT read of a FUSE file inside the submit
        // call, which puts its time in the submission latency, not the
        // completion latency: ask for total latency percentiles.
        let json = run_fio_with(&path, len, workload, block, depth, duration, &["--lat_percentiles=1"])
            .map_err(|e| ReadBenchError::new(ReadBenchErrorKind::Fuse, "fio on the mount").with_source(e))?;
        let label = format!("fio io_uring O_DIRECT on the mount, depth {depth}");
        let mut s = parse_fio(&json, label, workload, block, depth)?;
        s.source = Source::Fuse;
        Ok(s)
    })
    .await
    .map_err(|e| ReadBenchError::new(ReadBenchErrorKind::Fuse, format!("fio task: {e}")))?
}
