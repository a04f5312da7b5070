//! Cached reads through cv next to their two ceilings, in one run: the device
//! (fio, or an in-tree io_uring O_DIRECT reader, on the same file system as
//! the worker's data) and bare QUIC (quinn on tokio streaming the same byte
//! counts at the same concurrency). Series: sequential 1 MiB reads with the
//! client's read-ahead, random 64 KiB reads at each queue depth. The
//! workloads are interleaved source by source so machine noise hits all
//! three alike.
//!
//! Layout: [`pattern`] the verifiable bytes, [`cv`] the cv series,
//! [`device`] the device limit, [`quic`] the transport limit, [`series`] the
//! result rows and goals, [`timeline`] where cv's requests spend their time
//! (`--timeline`); this file the error type and the run order.

pub mod cpu;
pub mod cv;
pub mod device;
pub mod pattern;
pub mod quic;
pub mod series;
pub mod timeline;

use cv_client::Client;
use serde::Serialize;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

pub use device::DeviceChoice;
pub use series::{SerialBound, Series, Source, Verdict, Workload, serial_bounds, short_circuit_verdicts, verdicts};

/// What went wrong in the read benchmark.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum ReadBenchErrorKind {
    /// Options that cannot work together (sizes, depths).
    Config,
    /// A local file (the device file) could not be written or read.
    Io,
    /// A cv call failed.
    Cv,
    /// The bare QUIC baseline failed.
    Quic,
    /// fio or the in-tree device reader failed.
    Device,
    /// A read returned bytes other than those written.
    WrongBytes,
    /// A read through the FUSE mount failed (`cvctl bench fuse`).
    Fuse,
}

/// Error of the read benchmark: a kind, what was being done, and the cause.
#[derive(Debug)]
pub struct ReadBenchError {
    kind: ReadBenchErrorKind,
    message: String,
    retryable: bool,
    source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

impl ReadBenchError {
    /// An error of `kind`; not retryable unless said so.
    pub fn new(kind: ReadBenchErrorKind, message: impl Into<String>) -> Self {
        ReadBenchError { kind, message: message.into(), retryable: false, source: None }
    }

    /// Attaches the cause.
    pub fn with_source(mut self, source: impl std::error::Error + Send + Sync + 'static) -> Self {
        self.source = Some(Box::new(source));
        self
    }

    /// The kind.
    pub fn kind(&self) -> ReadBenchErrorKind {
        self.kind
    }

    /// Whether running the benchmark again may succeed (a transient cv error).
    pub fn retryable(&self) -> bool {
        self.retryable
    }

    /// A failed cv call while `what`; retryable when cv says so.
    pub fn cv(what: &str, e: cv_client::Error) -> Self {
        let retryable = e.retryable();
        ReadBenchError { retryable, ..Self::new(ReadBenchErrorKind::Cv, what).with_source(e) }
    }

    /// A local I/O error while `what`.
    pub fn io(what: &str, e: std::io::Error) -> Self {
        Self::new(ReadBenchErrorKind::Io, what).with_source(e)
    }
}

impl fmt::Display for ReadBenchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}: {}", self.kind, self.message)?;
        if let Some(s) = &self.source {
            write!(f, ": {s}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ReadBenchError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source.as_deref().map(|s| s as &(dyn std::error::Error + 'static))
    }
}

/// Result of the read benchmark.
pub type Result<T, E = ReadBenchError> = std::result::Result<T, E>;

/// What to run. Sequential request size and depth are the client's
/// `read_chunk` and `prefetch_depth`: the device and QUIC series copy them.
#[derive(Clone, Debug)]
pub struct ReadBenchOptions {
    /// Directory in cv the data set is written under (replaced if present).
    pub cv_dir: String,
    /// Bytes in the data set.
    pub total: u64,
    /// Bytes per file (the last file may be shorter); a multiple of 1 MiB.
    pub file_size: u64,
    /// Random read size.
    pub rand_block: u64,
    /// Queue depths of the random series.
    pub rand_depths: Vec<u32>,
    /// Length of each random series.
    pub duration: Duration,
    /// Check every byte of every measured read (slower; for tests), not a sample.
    pub verify_all: bool,
    /// Where the device file is written: the worker's file system.
    pub device_dir: PathBuf,
    /// fio, the in-tree reader, or fio when it is on PATH.
    pub device: DeviceChoice,
    /// Bare QUIC server endpoints, one per worker shard (cv's topology).
    pub quic_endpoints: usize,
    /// Times every series is measured (see [`series`]: goals are judged on the median round).
    pub rounds: u32,
    /// Collects the cv series' request marks (its layer installed in the global subscriber)
    /// and attaches their stages to the series.
    pub timeline: Option<timeline::Timeline>,
}

impl ReadBenchOptions {
    /// Checks sizes and depths against each other.
    pub fn validate(&self, seq_block: u64) -> Result<()> {
        let bad = |m: String| Err(ReadBenchError::new(ReadBenchErrorKind::Config, m));
        const MIB: u64 = 1 << 20;
        if self.file_size == 0 || !self.file_size.is_multiple_of(MIB) {
            return bad(format!("file size {} is not a positive multiple of 1 MiB", self.file_size));
        }
        if self.total < self.file_size {
            return bad(format!("data set ({} B) is smaller than one file ({} B)", self.total, self.file_size));
        }
        if self.rand_block == 0 || !self.rand_block.is_multiple_of(4096) || self.rand_block > self.file_size / 2 {
            return bad(format!(
                "random block {} must be a multiple of 4 KiB and at most half a file",
                self.rand_block
            ));
        }
        if !seq_block.is_multiple_of(4096) || seq_block > self.file_size {
            return bad(format!("sequential block {seq_block} must be a multiple of 4 KiB and at most a file"));
        }
        if self.rand_depths.is_empty() || self.rand_depths.iter().any(|&d| d == 0 || d > 1024) {
            return bad("random depths must be 1..=1024, at least one".into());
        }
        if self.duration.is_zero() || self.quic_endpoints == 0 {
            return bad("duration and QUIC endpoints must be > 0".into());
        }
        if !(1..=20).contains(&self.rounds) {
            return bad(format!("rounds must be 1..=20, not {}", self.rounds));
        }
        Ok(())
    }
}

/// Everything one run measured.
#[derive(Clone, Debug, Serialize)]
pub struct ReadReport {
    /// What "cached" means in this run.
    pub cached: String,
    /// The worker's memory tier, when the caller knows it (0: every cv read is a disk read).
    pub memory_tier_bytes: Option<u64>,
    /// How the device limit was measured.
    pub device_tool: String,
    /// Files in the data set.
    pub files: usize,
    /// Bytes in the data set.
    pub dataset_bytes: u64,
    /// Bytes compared against the written pattern (warm pass + measured reads).
    pub verified_bytes: u64,
    /// Every measured series, grouped by round, then by workload: device, QUIC, cv.
    pub series: Vec<Series>,
    /// The goals against this run's limits (the median round's value of each).
    pub verdicts: Vec<Verdict>,
    /// Issue 23's goals for the short-circuit series, when measured.
    pub short_circuit_verdicts: Vec<Verdict>,
    /// What the short-circuit client read from the worker's files and where it fell back to
    /// QUIC, over the whole run (warm pass included), when it was measured.
    pub short_circuit: Option<cv_client::LocalStats>,
    /// Not goals: where depth-1 reads stand against a disk read and a QUIC request in series.
    pub serial_bounds: Vec<SerialBound>,
}

/// Writes the data set through `client`, warms it, then measures every
/// series; the data set is removed from cv afterwards, also on error. `log`
/// receives progress lines. With `local`, a client that reads short-circuit (`client` then
/// should not), every workload is also measured through it.
pub async fn run(
    client: &Client,
    local: Option<&Client>,
    opts: &ReadBenchOptions,
    log: &dyn Fn(&str),
) -> Result<ReadReport> {
    opts.validate(client.settings().read_chunk.bytes())?;
    let tool = device::DeviceTool::pick(opts.device)?;

    log(&format!("writing {} B through cv under {} ({} B files)", opts.total, opts.cv_dir, opts.file_size));
    let data = cv::DataSet::write(client, &opts.cv_dir, opts.total, opts.file_size).await?;
    let measured = measure(client, local, opts, &data, &tool, log).await;
    let removed = data.remove(client).await;
    let (series, verified) = measured?;
    removed?;

    Ok(ReadReport {
        cached: "blocks already on the worker's disk tier, read with O_DIRECT through io_uring: the page cache \
                 is bypassed, so a cv read that misses the worker's memory tier is a device read"
            .into(),
        memory_tier_bytes: None,
        device_tool: tool.describe(),
        files: data.len(),
        dataset_bytes: opts.total,
        verified_bytes: verified,
        verdicts: verdicts(&series),
        short_circuit_verdicts: short_circuit_verdicts(&series),
        short_circuit: local.map(Client::short_circuit_stats),
        serial_bounds: serial_bounds(&series),
        series,
    })
}

/// Warm pass, then every series in order, `rounds` times: for each workload the
/// device, QUIC and cv back to back. Returns the series and the bytes checked.
async fn measure(
    client: &Client,
    local: Option<&Client>,
    opts: &ReadBenchOptions,
    data: &cv::DataSet,
    tool: &device::DeviceTool,
    log: &dyn Fn(&str),
) -> Result<(Vec<Series>, u64)> {
    let settings = client.settings();
    let (seq_block, seq_depth) = (settings.read_chunk.bytes(), settings.prefetch_depth);
    log("warming: reading every byte once through cv and checking it");
    let mut verified = data.warm(client).await?;
    let local = match local {
        Some(c) => {
            log("warming the short-circuit client (a lease per block)");
            let set = data.reopen(c).await?;
            verified += set.warm(c).await?;
            Some((c, set))
        }
        None => None,
    };

    log(&format!("writing the {} B device file under {}", opts.total, opts.device_dir.display()));
    let dev_file = device::DeviceFile::create(&opts.device_dir, opts.total).await?;
    let quic = quic::QuicBaseline::start(opts.quic_endpoints).await?;

    let mut series = Vec::new();
    for r in 0..opts.rounds {
        let round = if opts.rounds > 1 { format!("round {}/{}: ", r + 1, opts.rounds) } else { String::new() };
        log(&format!("{round}sequential {seq_block} B reads, depth {seq_depth}: device, QUIC, cv"));
        series.push(tool.sequential(&dev_file, seq_block, seq_depth).await?.in_round(r));
        let cpu = cpu::Snapshot::take();
        series.push(quic.sequential(opts.total, seq_block, seq_depth).await?.with_cpu(&cpu).in_round(r));
        let cpu = cpu::Snapshot::take();
        arm(opts);
        let (s, v) = data.sequential(client, opts.verify_all).await?;
        series.push(s.with_cpu(&cpu).with_stages(stages(opts)).in_round(r));
        verified += v;
        if let Some((c, set)) = &local {
            let cpu = cpu::Snapshot::take();
            let (s, v) = set.sequential(c, opts.verify_all).await?;
            series.push(short_circuit(s).with_cpu(&cpu).in_round(r));
            verified += v;
        }
        for &depth in &opts.rand_depths {
            let (block, secs) = (opts.rand_block, opts.duration);
            log(&format!("{round}random {block} B reads, depth {depth}, {secs:?} each: device, QUIC, cv"));
            series.push(tool.random(&dev_file, block, depth, secs).await?.in_round(r));
            let cpu = cpu::Snapshot::take();
            series.push(quic.random(block, depth, secs).await?.with_cpu(&cpu).in_round(r));
            let cpu = cpu::Snapshot::take();
            arm(opts);
            let (s, v) = data.random(block, depth, secs, opts.verify_all).await?;
            series.push(s.with_cpu(&cpu).with_stages(stages(opts)).in_round(r));
            verified += v;
            if let Some((_, set)) = &local {
                let cpu = cpu::Snapshot::take();
                let (s, v) = set.random(block, depth, secs, opts.verify_all).await?;
                series.push(short_circuit(s).with_cpu(&cpu).in_round(r));
                verified += v;
                let cpu = cpu::Snapshot::take();
                let (s, v) = set.random_on_threads(block, depth, secs, opts.verify_all, cpu).await?;
                series.push(s.in_round(r));
                verified += v;
            }
        }
    }
    quic.shutdown();
    dev_file.remove();
    Ok((series, verified))
}

/// A cv series measured through the short-circuit client.
fn short_circuit(mut s: Series) -> Series {
    s.source = Source::ShortCircuit;
    s.label = format!("{} (short-circuit)", s.label);
    s
}

fn arm(opts: &ReadBenchOptions) {
    if let Some(t) = &opts.timeline {
        t.arm();
    }
}

fn stages(opts: &ReadBenchOptions) -> Option<timeline::Stages> {
    opts.timeline.as_ref().and_then(timeline::Timeline::take)
}
