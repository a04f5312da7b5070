//! The device limit on the worker's file system: a file of the data set's
//! size read with O_DIRECT through io_uring at the same request size and
//! depth as cv — by fio when it is installed (`scripts/install-bench-deps`),
//! else by an in-tree io_uring O_DIRECT reader (`cv_rt`) in its own thread.

use super::pattern::{fill, first_mismatch};
use super::series::{Series, Source, Workload};
use super::{ReadBenchError, ReadBenchErrorKind, Result};
use crate::report::histogram;
use cv_rt::fs::RingFile;
use cv_rt::{AlignedBuf, Runtime, RuntimeConfig};
use hdrhistogram::Histogram;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::cell::Cell;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::rc::Rc;
use std::str::FromStr;
use std::time::{Duration, Instant};

/// Pattern seed of the device file (cv files use their index).
const DEVICE_SEED: u64 = 0xdec0_de00;
/// The in-tree reader checks one read in this many, as the cv series does.
const SAMPLE_EVERY: u64 = 64;

/// Which tool measures the device.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DeviceChoice {
    /// fio if it is on PATH, else the in-tree reader.
    #[default]
    Auto,
    /// fio, or fail.
    Fio,
    /// The in-tree io_uring reader.
    Uring,
}

impl FromStr for DeviceChoice {
    type Err = ReadBenchError;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "auto" => Ok(DeviceChoice::Auto),
            "fio" => Ok(DeviceChoice::Fio),
            "uring" => Ok(DeviceChoice::Uring),
            _ => Err(ReadBenchError::new(ReadBenchErrorKind::Config, format!("`{s}`: expected auto, fio or uring"))),
        }
    }
}

/// A file of verifiable bytes next to the worker's data, removed on drop.
#[derive(Debug)]
pub struct DeviceFile {
    path: PathBuf,
    len: u64,
}

impl DeviceFile {
    /// Writes `len` bytes under `dir` and makes them durable.
    pub async fn create(dir: &Path, len: u64) -> Result<DeviceFile> {
        let path = dir.join("cv-bench-read-device.dat");
        let p = path.clone();
        tokio::task::spawn_blocking(move || -> std::io::Result<()> {
            std::fs::create_dir_all(p.parent().unwrap_or(Path::new(".")))?;
            let mut f = std::fs::File::create(&p)?;
            let mut buf = vec![0u8; 4 << 20];
            let mut off = 0;
            while off < len {
                let n = (buf.len() as u64).min(len - off) as usize;
                fill(DEVICE_SEED, off, &mut buf[..n]);
                f.write_all(&buf[..n])?;
                off += n as u64;
            }
            f.sync_all()
        })
        .await
        .map_err(|e| ReadBenchError::new(ReadBenchErrorKind::Io, format!("device file writer: {e}")))?
        .map_err(|e| ReadBenchError::io(&format!("write {}", path.display()), e))?;
        Ok(DeviceFile { path, len })
    }

    /// Where it is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Deletes the file now.
    pub fn remove(self) {}
}

impl Drop for DeviceFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The tool chosen for this run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeviceTool {
    /// fio with this version string.
    Fio(String),
    /// io_uring O_DIRECT reads (`cv_rt`) in a thread of their own.
    Uring,
}

/// fio's version string, if fio is on PATH.
pub fn fio_version() -> Option<String> {
    let out = Command::new("fio").arg("--version").output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn dev_err(m: impl Into<String>) -> ReadBenchError {
    ReadBenchError::new(ReadBenchErrorKind::Device, m)
}

impl DeviceTool {
    /// Resolves the choice against what is installed.
    pub fn pick(choice: DeviceChoice) -> Result<DeviceTool> {
        match (choice, fio_version()) {
            (DeviceChoice::Uring, _) | (DeviceChoice::Auto, None) => Ok(DeviceTool::Uring),
            (_, Some(v)) => Ok(DeviceTool::Fio(v)),
            (DeviceChoice::Fio, None) => Err(dev_err("fio is not on PATH (run scripts/install-bench-deps)")),
        }
    }

    /// How the device is measured, in words.
    pub fn describe(&self) -> String {
        match self {
            DeviceTool::Fio(v) => format!(
                "{v}, ioengine=io_uring, direct=1 (O_DIRECT), same block size and depth; latency from submission to completion"
            ),
            DeviceTool::Uring => {
                "in-tree reader: io_uring O_DIRECT reads (cv_rt) in their own thread, same block size and depth".into()
            }
        }
    }

    fn label(&self) -> &'static str {
        match self {
            DeviceTool::Fio(_) => "fio io_uring O_DIRECT",
            DeviceTool::Uring => "in-tree io_uring O_DIRECT",
        }
    }

    /// One pass over the file in `block`-byte reads, `depth` in flight.
    pub async fn sequential(&self, file: &DeviceFile, block: u64, depth: u32) -> Result<Series> {
        self.measure(file, Workload::Sequential, block, depth, None).await
    }

    /// Random aligned `block`-byte reads, `depth` in flight, for `duration`.
    pub async fn random(&self, file: &DeviceFile, block: u64, depth: u32, duration: Duration) -> Result<Series> {
        self.measure(file, Workload::Random, block, depth, Some(duration)).await
    }

    async fn measure(
        &self,
        file: &DeviceFile,
        workload: Workload,
        block: u64,
        depth: u32,
        duration: Option<Duration>,
    ) -> Result<Series> {
        let (tool, path, len) = (self.clone(), file.path.clone(), file.len);
        tokio::task::spawn_blocking(move || {
            let label = format!("{}, depth {depth}", tool.label());
            match tool {
                DeviceTool::Fio(_) => {
                    let json = run_fio(&path, len, workload, block, depth, duration)?;
                    parse_fio(&json, label, workload, block, depth)
                }
                DeviceTool::Uring => {
                    let (ops, h, elapsed) = uring_reads(path, len, workload, block, depth, duration)?;
                    Ok(Series::new(Source::Device, label, workload, block, depth, ops, ops * block, elapsed, Some(&h)))
                }
            }
        })
        .await
        .map_err(|e| dev_err(format!("device task: {e}")))?
    }
}

fn run_fio(
    path: &Path,
    len: u64,
    workload: Workload,
    block: u64,
    depth: u32,
    duration: Option<Duration>,
) -> Result<String> {
    // A read's latency is its submission (the block layer's work and the doorbell, inside
    // io_uring_enter: ~20 µs of a 64 KiB read here) plus its completion, as the in-tree
    // reader and the cv series time it; fio's default percentiles leave the submission out.
    run_fio_with(path, len, workload, block, depth, duration, &["--lat_percentiles=1"])
}

/// Runs one fio read job on `path` (O_DIRECT, io_uring) with `extra`
/// arguments and returns its JSON report; also used on a file of the FUSE
/// mount (`cvctl bench fuse`).
pub fn run_fio_with(
    path: &Path,
    len: u64,
    workload: Workload,
    block: u64,
    depth: u32,
    duration: Option<Duration>,
    extra: &[&str],
) -> Result<String> {
    let mut cmd = Command::new("fio");
    cmd.args(extra);
    cmd.arg("--name=cv-bench-read")
        .arg(format!("--filename={}", path.display()))
        .args(["--ioengine=io_uring", "--direct=1", "--output-format=json", "--allow_file_create=0"])
        .arg(format!("--size={len}"))
        .arg(format!("--bs={block}"))
        .arg(format!("--iodepth={depth}"));
    match workload {
        Workload::Sequential => cmd.arg("--rw=read"),
        Workload::Random => cmd.args(["--rw=randread", "--norandommap", "--randrepeat=0"]),
    };
    if let Some(d) = duration {
        cmd.args(["--time_based".to_string(), format!("--runtime={}ms", d.as_millis().max(1))]);
    }
    let out = cmd.output().map_err(|e| dev_err("run fio").with_source(e))?;
    if !out.status.success() {
        return Err(dev_err(format!("fio failed: {}", String::from_utf8_lossy(&out.stderr).trim())));
    }
    String::from_utf8(out.stdout).map_err(|e| dev_err("fio output is not UTF-8").with_source(e))
}

/// Reads fio's JSON report of one job: totals and completion-latency percentiles.
pub fn parse_fio(json: &str, label: String, workload: Workload, block: u64, depth: u32) -> Result<Series> {
    // fio may print warnings before the JSON object.
    let start = json.find('{').ok_or_else(|| dev_err("fio printed no JSON"))?;
    let v: serde_json::Value =
        serde_json::from_str(&json[start..]).map_err(|e| dev_err("fio JSON does not parse").with_source(e))?;
    let job = &v["jobs"][0];
    if job["error"].as_i64().unwrap_or(0) != 0 {
        return Err(dev_err(format!("fio job error {}", job["error"])));
    }
    let read = &job["read"];
    let num = |x: &serde_json::Value, what: &str| x.as_f64().ok_or_else(|| dev_err(format!("fio JSON lacks {what}")));
    let ops = num(&read["total_ios"], "read.total_ios")? as u64;
    let bytes = num(&read["io_bytes"], "read.io_bytes")? as u64;
    let ms = num(&read["runtime"], "read.runtime")?;
    if ops == 0 || ms <= 0.0 {
        return Err(dev_err("fio read nothing"));
    }
    let mut s = Series::new(
        Source::Device,
        label,
        workload,
        block,
        depth,
        ops,
        bytes,
        Duration::from_secs_f64(ms / 1000.0),
        None::<&Histogram<u64>>,
    );
    // Total latency when the job asked for it (`--lat_percentiles=1`): a read
    // done inside the submit call (io_uring on FUSE) has its time in the
    // submission latency, not the completion latency.
    let pct = match &read["lat_ns"]["percentile"] {
        p if p.is_object() => p,
        _ => &read["clat_ns"]["percentile"],
    };
    s.p50_us = pct["50.000000"].as_f64().map(|ns| ns / 1000.0);
    s.p99_us = pct["99.000000"].as_f64().map(|ns| ns / 1000.0);
    // fio's own CPU (user + system, % of the job's run time): what the reads cost the kernel
    // and fio, the floor under any reader of the same bytes from this disk.
    if let (Some(usr), Some(sys), Some(run_ms)) =
        (job["usr_cpu"].as_f64(), job["sys_cpu"].as_f64(), job["job_runtime"].as_f64())
    {
        let us = (usr + sys) / 100.0 * run_ms * 1000.0 / ops as f64;
        s.cpu = Some(super::cpu::CpuPerOp { server_us: Some(us), client_us: 0.0 });
    }
    Ok(s)
}

type UringResult = Result<(u64, Histogram<u64>, Duration)>;

/// The in-tree reader: `depth` tasks on one shard runtime (`cv_rt`, io_uring) in a
/// new thread, each with one read in flight. Returns (reads, latency histogram, wall time).
fn uring_reads(
    path: PathBuf,
    len: u64,
    workload: Workload,
    block: u64,
    depth: u32,
    duration: Option<Duration>,
) -> UringResult {
    let run = move || -> UringResult {
        let rt = Runtime::new(RuntimeConfig::default()).map_err(|e| dev_err(format!("device runtime: {e}")))?;
        rt.block_on(async move {
            let file = Rc::new(
                RingFile::open_direct(&path, false)
                    .map_err(|e| dev_err(format!("open {} O_DIRECT: {e}", path.display())))?,
            );
            let next = Rc::new(Cell::new(0u64));
            let start = Instant::now();
            let deadline = duration.map(|d| start + d);
            let tasks: Vec<_> = (0..depth)
                .map(|t| {
                    let (file, next) = (file.clone(), next.clone());
                    cv_rt::spawn_local(async move {
                        let mut rng = SmallRng::seed_from_u64(u64::from(t) + 1);
                        let (mut h, mut ops) = (histogram(), 0u64);
                        let mut buf = AlignedBuf::with_capacity(block as usize);
                        loop {
                            let off = match workload {
                                Workload::Sequential => {
                                    let off = next.get();
                                    if off >= len {
                                        break;
                                    }
                                    next.set(off + block);
                                    off
                                }
                                Workload::Random => {
                                    if deadline.is_some_and(|d| Instant::now() >= d) {
                                        break;
                                    }
                                    rng.gen_range(0..len / block) * block
                                }
                            };
                            let size = block.min(len - off) as usize;
                            let t0 = Instant::now();
                            let (got, back) = file.read_at(buf, size, off).await;
                            buf = back;
                            let got = got.map_err(|e| dev_err(format!("read: {e}")))?;
                            h.saturating_record(t0.elapsed().as_nanos() as u64);
                            if got != size
                                || (ops.is_multiple_of(SAMPLE_EVERY)
                                    && first_mismatch(DEVICE_SEED, off, &buf.as_slice()[..size]).is_some())
                            {
                                return Err(ReadBenchError::new(
                                    ReadBenchErrorKind::WrongBytes,
                                    format!("device file: wrong bytes at {off}"),
                                ));
                            }
                            ops += 1;
                        }
                        Ok((h, ops))
                    })
                })
                .collect();
            let (mut h, mut ops) = (histogram(), 0);
            let mut first_err = None;
            for t in tasks {
                match t.await {
                    Ok((th, to)) => {
                        let _ = h.add(&th);
                        ops += to;
                    }
                    Err(e) => first_err = first_err.or(Some(e)),
                }
            }
            let elapsed = start.elapsed();
            match first_err {
                Some(e) => Err(e),
                None => Ok((ops, h, elapsed)),
            }
        })
    };
    let handle = std::thread::Builder::new()
        .name("cv-bench-device".into())
        .spawn(run)
        .map_err(|e| dev_err(format!("start the device thread: {e}")))?;
    handle.join().map_err(|_| dev_err("device thread panicked"))?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fio_report_is_read_with_leading_noise() {
        let json = r#"note: both iodepth >= 1 and synchronous I/O engine are selected
{"jobs":[{"error":0,"read":{"io_bytes":1048576000,"total_ios":16000,"runtime":1000,
 "clat_ns":{"percentile":{"50.000000":82000,"99.000000":150000}}}}]}"#;
        let s = parse_fio(json, "fio".into(), Workload::Random, 65536, 1).unwrap();
        assert_eq!((s.ops, s.bytes), (16000, 1048576000));
        assert!((s.iops - 16000.0).abs() < 1e-6);
        assert_eq!((s.p50_us, s.p99_us), (Some(82.0), Some(150.0)));
        assert!(parse_fio(r#"{"jobs":[{"error":5,"read":{}}]}"#, "f".into(), Workload::Random, 1, 1).is_err());
        assert!(parse_fio("no json", "f".into(), Workload::Random, 1, 1).is_err());
        let total = r#"{"jobs":[{"error":0,"read":{"io_bytes":65536,"total_ios":1,"runtime":1,
 "clat_ns":{"percentile":{"50.000000":2000}},"lat_ns":{"percentile":{"50.000000":900000}}}}]}"#;
        let s = parse_fio(total, "fio".into(), Workload::Random, 65536, 1).unwrap();
        assert_eq!(s.p50_us, Some(900.0), "total latency when fio reports it");
    }

    #[test]
    fn choice_parses_and_rejects_unknown_names() {
        assert_eq!("uring".parse::<DeviceChoice>().unwrap(), DeviceChoice::Uring);
        assert_eq!("nvme".parse::<DeviceChoice>().unwrap_err().kind(), ReadBenchErrorKind::Config);
    }

    #[tokio::test]
    async fn in_tree_reader_reads_the_real_file_with_o_direct() {
        let dir = tempfile::tempdir().unwrap();
        let f = DeviceFile::create(dir.path(), 8 << 20).await.unwrap();
        let seq = DeviceTool::Uring.sequential(&f, 1 << 20, 4).await.unwrap();
        assert_eq!((seq.ops, seq.bytes), (8, 8 << 20), "one pass over the file");
        let rnd = DeviceTool::Uring.random(&f, 64 << 10, 8, Duration::from_millis(200)).await.unwrap();
        assert!(rnd.ops > 0 && rnd.p99_us.is_some(), "{rnd:?}");
        let path = f.path().to_path_buf();
        f.remove();
        assert!(!path.exists());
    }
}
