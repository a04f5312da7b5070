//! The cv series: a data set written through cv in verifiable bytes, one
//! warm pass, then sequential reads with the client's read-ahead and random
//! aligned reads from `depth` concurrent `read_at` callers.

use super::pattern::{fill, first_mismatch};
use super::series::{Series, Source, Workload};
use super::{ReadBenchError, ReadBenchErrorKind, Result};
use crate::report::histogram;
use cv_client::{Client, File};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::time::{Duration, Instant};
use tokio::task::JoinSet;

/// Measured reads are checked one in this many unless every read is asked for.
const SAMPLE_EVERY: u64 = 64;
/// Bytes handed to the writer per call.
const WRITE_PIECE: usize = 4 << 20;

/// Files written through cv; file `i` holds pattern seed `i`.
#[derive(Debug)]
pub struct DataSet {
    dir: String,
    files: Vec<File>,
}

fn wrong(path: &str, offset: u64, at: usize) -> ReadBenchError {
    ReadBenchError::new(
        ReadBenchErrorKind::WrongBytes,
        format!("{path}: bytes at offset {} differ from those written", offset + at as u64),
    )
}

fn join_err(e: tokio::task::JoinError) -> ReadBenchError {
    ReadBenchError::new(ReadBenchErrorKind::Cv, format!("reader task: {e}"))
}

impl DataSet {
    /// Writes `total` bytes as files of `file_size` under `dir` (replacing
    /// it), two files at a time, and opens them.
    pub async fn write(client: &Client, dir: &str, total: u64, file_size: u64) -> Result<DataSet> {
        if client.stat(dir).await.is_ok() {
            client.delete(dir, true).await.map_err(|e| ReadBenchError::cv("remove the old data set", e))?;
        }
        client.mkdir(dir, true).await.map_err(|e| ReadBenchError::cv("mkdir", e))?;
        let count = total.div_ceil(file_size);
        let mut set = JoinSet::new();
        let mut paths = Vec::new();
        for i in 0..count {
            if set.len() >= 2
                && let Some(r) = set.join_next().await
            {
                r.map_err(join_err)??;
            }
            let len = file_size.min(total - i * file_size);
            let path = format!("{dir}/part-{i:05}");
            paths.push(path.clone());
            let client = client.clone();
            set.spawn(async move { write_file(&client, &path, i, len).await });
        }
        while let Some(r) = set.join_next().await {
            r.map_err(join_err)??;
        }
        let mut files = Vec::with_capacity(paths.len());
        for p in &paths {
            files.push(client.open(p).await.map_err(|e| ReadBenchError::cv("open", e))?);
        }
        Ok(DataSet { dir: dir.to_string(), files })
    }

    /// The same files opened through another client.
    pub async fn reopen(&self, client: &Client) -> Result<DataSet> {
        let mut files = Vec::with_capacity(self.files.len());
        for f in &self.files {
            files.push(client.open(&f.status().path).await.map_err(|e| ReadBenchError::cv("open", e))?);
        }
        Ok(DataSet { dir: self.dir.clone(), files })
    }

    /// Files in the set.
    pub fn len(&self) -> usize {
        self.files.len()
    }

    /// Whether the set has no files.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// Reads every byte once and checks it; returns the bytes checked.
    pub async fn warm(&self, client: &Client) -> Result<u64> {
        let chunk = client.settings().read_chunk.bytes() as usize;
        let mut checked = 0;
        for (seed, f) in self.files.iter().enumerate() {
            let (_, n, _) = read_sequential(f, seed as u64, 1, chunk).await?;
            if n != f.len() {
                return Err(ReadBenchError::new(
                    ReadBenchErrorKind::WrongBytes,
                    format!("{}: read {n} of {} bytes", f.status().path, f.len()),
                ));
            }
            checked += n;
        }
        Ok(checked)
    }

    /// One sequential pass over every file; returns the series and the bytes checked.
    pub async fn sequential(&self, client: &Client, verify_all: bool) -> Result<(Series, u64)> {
        let every = if verify_all { 1 } else { SAMPLE_EVERY };
        let s = client.settings();
        let (block, depth) = (s.read_chunk.bytes(), s.prefetch_depth);
        let (mut ops, mut bytes, mut checked) = (0, 0, 0);
        let start = Instant::now();
        for (seed, f) in self.files.iter().enumerate() {
            let (o, b, c) = read_sequential(f, seed as u64, every, block as usize).await?;
            (ops, bytes, checked) = (ops + o, bytes + b, checked + c);
        }
        let label = format!("cv sequential reader, read-ahead {depth}");
        Ok((
            Series::new(Source::Cv, label, Workload::Sequential, block, depth, ops, bytes, start.elapsed(), None),
            checked,
        ))
    }

    /// `depth` tasks issue `read_at` of `block` bytes at random aligned
    /// offsets for `duration`; returns the series and the bytes checked.
    pub async fn random(&self, block: u64, depth: u32, duration: Duration, verify_all: bool) -> Result<(Series, u64)> {
        let every = if verify_all { 1 } else { SAMPLE_EVERY };
        // Offsets below each file's tail: the tail is served from client memory, not the worker.
        let slots: Vec<u64> = self.files.iter().map(|f| f.tail().map_or(f.len(), |(o, _)| o) / block).collect();
        if slots.iter().all(|&s| s == 0) {
            return Err(ReadBenchError::new(ReadBenchErrorKind::Config, "files too small for the random block"));
        }
        let start = Instant::now();
        let deadline = start + duration;
        let mut set = JoinSet::new();
        for t in 0..depth {
            let (files, slots) = (self.files.clone(), slots.clone());
            set.spawn(async move {
                let mut r = RandomReads::new(t, block, every);
                while let Some((i, off)) = r.next(&slots, deadline) {
                    let t0 = Instant::now();
                    let n = files[i].read_at(off, &mut r.buf).await.map_err(|e| ReadBenchError::cv("read_at", e))?;
                    r.done(&files[i], i, off, n, t0)?;
                }
                Ok((r.h, r.ops, r.checked))
            });
        }
        let (mut h, mut ops, mut checked) = (histogram(), 0, 0);
        while let Some(r) = set.join_next().await {
            let (th, to, tc) = r.map_err(join_err)??;
            h.add(&th).map_err(|e| ReadBenchError::new(ReadBenchErrorKind::Cv, format!("merge histograms: {e}")))?;
            (ops, checked) = (ops + to, checked + tc);
        }
        let label = format!("cv read_at × {depth} concurrent");
        let s =
            Series::new(Source::Cv, label, Workload::Random, block, depth, ops, ops * block, start.elapsed(), Some(&h));
        Ok((s, checked))
    }

    /// `depth` threads of their own each read `block` bytes at random aligned offsets for
    /// `duration`, on the calling thread with a blocking read where the client can read the
    /// range at once from a local worker's files (`File::local_read`, `LocalRead::read_blocking`:
    /// how a read-only FUSE mount's request threads read), else with `read_at` on the runtime.
    /// Returns the series (its source `ShortCircuitBlocking`, its CPU counted from `since`
    /// until the threads are done but still alive) and the bytes checked.
    pub async fn random_on_threads(
        &self,
        block: u64,
        depth: u32,
        duration: Duration,
        verify_all: bool,
        since: super::cpu::Snapshot,
    ) -> Result<(Series, u64)> {
        let every = if verify_all { 1 } else { SAMPLE_EVERY };
        let slots: Vec<u64> = self.files.iter().map(|f| f.tail().map_or(f.len(), |(o, _)| o) / block).collect();
        if slots.iter().all(|&s| s == 0) {
            return Err(ReadBenchError::new(ReadBenchErrorKind::Config, "files too small for the random block"));
        }
        let (files, rt) = (self.files.clone(), tokio::runtime::Handle::current());
        let run = move || {
            let start = Instant::now();
            let deadline = start + duration;
            // The threads wait when done until their CPU has been read (while they live): a
            // barrier where they are counted done, and one that lets them go.
            let (done, go) = (std::sync::Barrier::new(depth as usize + 1), std::sync::Barrier::new(depth as usize + 1));
            let (per_thread, cpu_now) = std::thread::scope(|sc| {
                let threads: Vec<_> = (0..depth)
                    .map(|t| {
                        let (files, slots, rt, done, go) = (&files, &slots, &rt, &done, &go);
                        let name = format!("bench-sc-{t}");
                        let spawned = std::thread::Builder::new().name(name).spawn_scoped(sc, move || -> Result<_> {
                            let out = read_randomly(files, slots, rt, t, block, deadline, every);
                            done.wait();
                            go.wait();
                            out
                        });
                        spawned.expect("spawn a reader thread")
                    })
                    .collect();
                done.wait();
                let cpu_now = super::cpu::Snapshot::take();
                go.wait();
                (threads.into_iter().map(|t| t.join().expect("reader thread")).collect::<Vec<_>>(), cpu_now)
            });
            let (mut h, mut ops, mut checked) = (histogram(), 0, 0);
            for r in per_thread {
                let (th, to, tc) = r?;
                h.add(&th)
                    .map_err(|e| ReadBenchError::new(ReadBenchErrorKind::Cv, format!("merge histograms: {e}")))?;
                (ops, checked) = (ops + to, checked + tc);
            }
            let label = format!("cv local_read + read_blocking on {depth} threads");
            let mut s = Series::new(
                Source::ShortCircuitBlocking,
                label,
                Workload::Random,
                block,
                depth,
                ops,
                ops * block,
                start.elapsed(),
                Some(&h),
            );
            s.cpu = since.per_op_until(&cpu_now, ops);
            Ok((s, checked))
        };
        tokio::task::spawn_blocking(run).await.map_err(join_err)?
    }

    /// Deletes the data set from cv.
    /// Deletes the data set from cv.
    pub async fn remove(&self, client: &Client) -> Result<()> {
        client.delete(&self.dir, true).await.map_err(|e| ReadBenchError::cv("remove the data set", e))
    }
}

/// One reader of a random series: where it reads next, its latencies and its checks.
struct RandomReads {
    rng: SmallRng,
    block: u64,
    every: u64,
    buf: Vec<u8>,
    h: hdrhistogram::Histogram<u64>,
    ops: u64,
    checked: u64,
}

impl RandomReads {
    /// Reader `t` (its own seed) of `block`-byte reads, checking one in `every`.
    fn new(t: u32, block: u64, every: u64) -> RandomReads {
        let rng = SmallRng::seed_from_u64(u64::from(t) + 1);
        RandomReads { rng, block, every, buf: vec![0u8; block as usize], h: histogram(), ops: 0, checked: 0 }
    }

    /// The next file and aligned offset below its `slots`, until `deadline`.
    fn next(&mut self, slots: &[u64], deadline: Instant) -> Option<(usize, u64)> {
        while Instant::now() < deadline {
            let i = self.rng.gen_range(0..slots.len());
            if slots[i] > 0 {
                return Some((i, self.rng.gen_range(0..slots[i]) * self.block));
            }
        }
        None
    }

    /// Counts a read of `n` bytes into `buf` at `off` of file `i` (`file`) that began at `t0`,
    /// and checks its bytes if it is one to check.
    fn done(&mut self, file: &File, i: usize, off: u64, n: usize, t0: Instant) -> Result<()> {
        self.h.saturating_record(t0.elapsed().as_nanos() as u64);
        if n != self.buf.len() {
            return Err(ReadBenchError::new(ReadBenchErrorKind::WrongBytes, format!("short read {n}")));
        }
        if self.ops.is_multiple_of(self.every) {
            if let Some(at) = first_mismatch(i as u64, off, &self.buf) {
                return Err(wrong(&file.status().path, off, at));
            }
            self.checked += n as u64;
        }
        self.ops += 1;
        Ok(())
    }
}

/// One reader thread of [`DataSet::random_on_threads`]: reads until `deadline`, each read on
/// this thread where the client can read at once from the files, else through `rt`; returns
/// its latencies, reads and bytes checked.
fn read_randomly(
    files: &[File],
    slots: &[u64],
    rt: &tokio::runtime::Handle,
    t: u32,
    block: u64,
    deadline: Instant,
    every: u64,
) -> Result<(hdrhistogram::Histogram<u64>, u64, u64)> {
    let mut r = RandomReads::new(t, block, every);
    while let Some((i, off)) = r.next(slots, deadline) {
        let t0 = Instant::now();
        let n = match files[i].local_read(off, block as usize).and_then(|l| l.read_blocking()) {
            Some(b) if b.len() == r.buf.len() => {
                r.buf.copy_from_slice(&b);
                b.len()
            }
            _ => rt.block_on(files[i].read_at(off, &mut r.buf)).map_err(|e| ReadBenchError::cv("read_at", e))?,
        };
        r.done(&files[i], i, off, n, t0)?;
    }
    Ok((r.h, r.ops, r.checked))
}

async fn write_file(client: &Client, path: &str, seed: u64, len: u64) -> Result<()> {
    let mut w = client.create(path, true).await.map_err(|e| ReadBenchError::cv("create", e))?;
    let mut buf = vec![0u8; WRITE_PIECE];
    let mut off = 0;
    while off < len {
        let n = (WRITE_PIECE as u64).min(len - off) as usize;
        fill(seed, off, &mut buf[..n]);
        w.write(&buf[..n]).await.map_err(|e| ReadBenchError::cv("write", e))?;
        off += n as u64;
    }
    w.close().await.map_err(|e| ReadBenchError::cv("close", e))?;
    Ok(())
}

/// Reads `f` front to back in `chunk`-byte reads with read-ahead; checks
/// one read in `every`.
/// Returns (reads, bytes, bytes checked).
async fn read_sequential(f: &File, seed: u64, every: u64, chunk: usize) -> Result<(u64, u64, u64)> {
    let mut reader = f.sequential(0);
    let mut buf = vec![0u8; chunk];
    let (mut ops, mut bytes, mut checked) = (0u64, 0u64, 0u64);
    loop {
        let off = reader.position();
        let n = reader.read(&mut buf).await.map_err(|e| ReadBenchError::cv("sequential read", e))?;
        if n == 0 {
            return Ok((ops, bytes, checked));
        }
        if ops.is_multiple_of(every) {
            if let Some(at) = first_mismatch(seed, off, &buf[..n]) {
                return Err(wrong(&f.status().path, off, at));
            }
            checked += n as u64;
        }
        ops += 1;
        bytes += n as u64;
    }
}
