//! The master over QUIC on loopback: masters the caller starts ([`MasterBed`]; cvctl runs them
//! in-process on a tokio runtime of their own), the load on the calling thread, the journal on a
//! real file with fsync on. With `masters > 1` a Raft group of that many masters on the same
//! disk and loopback (master/HA.md): every mutation is fsynced by a majority of them before it
//! is answered, on one shared device.
//!
//! - [`run_open`]: open latency (tail in the reply) next to a null RPC (Ping) on the same
//!   connection, interleaved, on files created beforehand with a small Parquet-shaped tail.
//! - [`run_meta`]: ops/s and p99 of create (+complete), open, stat, rename and delete at
//!   several concurrencies, next to the measured cost of one fdatasync in the same directory
//!   (1/fdatasync is what a mutation would cost without group commit).

use crate::report::{Latency, histogram};
use cv_net::quic::TransportSettings;
use cv_net::rpc::{self, Conn};
use cv_net::tls::Identity;
use cv_wire::msg::{
    AddBlock, AddBlockOk, BlockLen, Complete, Create, CreateOk, Delete, Mkdir, Open, OpenOk, Ping, RegisterOk,
    RegisterWorker, Rename, Role, Stat,
};
use cv_wire::{Limits, Message};
use hdrhistogram::Histogram;
use serde::Serialize;
use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Error of a benchmark run, for the command line.
pub type BenchError = Box<dyn std::error::Error + Send + Sync>;

/// How the leader of a Raft group proves to a read that it still leads (`[master] raft_reads`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reads {
    /// A lease renewed by a quorum round every heartbeat.
    Lease,
    /// Every read waits for a quorum round that started after it.
    ReadIndex,
}

/// Masters under measurement, started by whoever runs the bench (cvctl: cv-tools' local
/// cluster without a worker) and stopped when dropped. The bench reaches them only over the
/// network, as a client and as stand-in workers.
pub trait MasterBed {
    /// The master that leads.
    fn leader(&self) -> SocketAddr;
    /// The identity clients of the cluster present.
    fn client_identity(&self) -> &Identity;
    /// The identity workers present (the bench's stand-in workers).
    fn node_identity(&self) -> &Identity;
}

/// Starts `masters` masters (1, or a Raft group of that many reading with `Reads`) with their
/// files under the given directory, and returns once one leads.
pub type StartMasters<'a> = &'a dyn Fn(&Path, usize, Reads) -> Result<Box<dyn MasterBed>, BenchError>;

/// A [`MasterBed`] in a fresh directory under `parent`, removed after the masters stop.
struct Bed {
    masters: Option<Box<dyn MasterBed>>,
    dir: PathBuf,
}

/// A fresh directory under `parent` for one bed's files.
fn fresh_dir(parent: &Path) -> Result<PathBuf, BenchError> {
    let stamp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_nanos();
    let dir = parent.join(format!("cv-master-bench-{}-{stamp}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

impl Bed {
    fn start(start: StartMasters, parent: &Path, masters: usize, reads: Reads) -> Result<Bed, BenchError> {
        let dir = fresh_dir(parent)?;
        match start(&dir, masters, reads) {
            Ok(m) => Ok(Bed { masters: Some(m), dir }),
            Err(e) => {
                let _ = std::fs::remove_dir_all(&dir);
                Err(e)
            }
        }
    }

    fn masters(&self) -> &dyn MasterBed {
        self.masters.as_deref().expect("a bed's masters run until it is dropped")
    }

    async fn connect(&self, role: Role) -> Result<Conn, BenchError> {
        let m = self.masters();
        // A worker role needs a node certificate.
        let id = if role == Role::Worker { m.node_identity() } else { m.client_identity() };
        let ep = rpc::client_endpoint(id, &TransportSettings::default())?;
        Ok(Conn::connect(&ep, m.leader(), role, "bench-load", Limits::DEFAULT).await?)
    }
}

impl Drop for Bed {
    fn drop(&mut self) {
        drop(self.masters.take());
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn load_runtime() -> Result<tokio::runtime::Runtime, BenchError> {
    Ok(tokio::runtime::Builder::new_current_thread().enable_all().build()?)
}

async fn call<M: Message, R: Message>(c: &Conn, msg: &M, payload: &[u8]) -> Result<R, BenchError> {
    Ok(c.call(msg, &[payload]).await?.decode_body::<R>()?)
}

/// A Parquet-shaped file: `len` bytes ending in a `footer`-byte footer, its length and `PAR1`.
fn parquet_bytes(len: usize, footer: u32) -> Vec<u8> {
    let mut v: Vec<u8> = (0..len).map(|i| (i * 31 % 251) as u8).collect();
    v[len - 8..len - 4].copy_from_slice(&footer.to_le_bytes());
    v[len - 4..].copy_from_slice(b"PAR1");
    v
}

/// Sizes of the open benchmark.
#[derive(Clone, Debug)]
pub struct OpenOptions {
    /// Files created beforehand (opened round robin).
    pub files: u32,
    /// Length of each file.
    pub file_len: u32,
    /// Footer length of each file (the tail is footer + 8 bytes).
    pub footer: u32,
    /// Measured opens (and as many pings).
    pub requests: u32,
    /// Unmeasured pairs first.
    pub warmup: u32,
    /// Parent directory of the journal (a real disk).
    pub dir: PathBuf,
    /// The masters to measure, one after another in the run: `(1, _)` is one master, `(3,
    /// Lease)` a Raft group of three whose leader proves leadership to reads by a lease.
    pub groups: Vec<(usize, Reads)>,
}

/// How a group of the open benchmark is named in its rows.
pub fn group_label(masters: usize, reads: Reads) -> String {
    match (masters, reads) {
        (0 | 1, _) => "1 master".into(),
        (n, Reads::Lease) => format!("{n} masters, lease reads"),
        (n, Reads::ReadIndex) => format!("{n} masters, ReadIndex reads"),
    }
}

/// Open latency next to Ping on one connection, interleaved, for each group of `o.groups`.
pub fn run_open(o: &OpenOptions, start: StartMasters) -> Result<Vec<Latency>, BenchError> {
    let mut rows = Vec::new();
    for &(masters, reads) in &o.groups {
        let label = group_label(masters, reads);
        let (ping, open, want_tail) = open_one(o, start, masters, reads)?;
        rows.push(Latency::from_hist(&format!("null RPC (Ping), {label}"), &ping));
        rows.push(Latency::from_hist(&format!("open + {want_tail} B tail, {label}"), &open));
    }
    Ok(rows)
}

/// Open latency next to Ping on one connection, interleaved.
fn open_one(
    o: &OpenOptions,
    start: StartMasters,
    masters: usize,
    reads: Reads,
) -> Result<(Histogram<u64>, Histogram<u64>, usize), BenchError> {
    if o.files == 0 || o.file_len < 16 || o.footer == 0 || u64::from(o.footer) + 8 > u64::from(o.file_len) {
        return Err("need files >= 1, file_len >= 16 and footer + 8 <= file_len".into());
    }
    let bed = Bed::start(start, &o.dir, masters, reads)?;
    let rt = load_runtime()?;
    rt.block_on(async {
        let worker = bed.connect(Role::Worker).await?;
        let reg = RegisterWorker {
            worker_id: None,
            host: "127.0.0.1".into(),
            shard_ports: vec![7001],
            capacity: 1 << 40,
            used: 0,
            zone: String::new(),
        };
        let _: RegisterOk = call(&worker, &reg, &[]).await?;
        let c = bed.connect(Role::Client).await?;
        c.call(&Mkdir { path: "/bench/open".into(), parents: true, mode: 0o755 }, &[]).await?;
        let bytes = Arc::new(parquet_bytes(o.file_len as usize, o.footer));
        let next = Arc::new(AtomicU64::new(0));
        let writers: Vec<_> = (0..32)
            .map(|_| {
                let (c, bytes, next, files) = (c.clone(), bytes.clone(), next.clone(), u64::from(o.files));
                tokio::spawn(async move {
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= files {
                            return Ok::<(), BenchError>(());
                        }
                        write_file(&c, &format!("/bench/open/f{i}"), &bytes).await?;
                    }
                })
            })
            .collect();
        for w in writers {
            w.await??;
        }
        let want_tail = o.footer as usize + 8;
        let (mut ping_h, mut open_h) = (histogram(), histogram());
        for i in 0..(o.warmup + o.requests) {
            let t = Instant::now();
            c.call(&Ping { nonce: u64::from(i) }, &[]).await?;
            let ping = t.elapsed();
            let open = Open { path: format!("/bench/open/f{}", i % o.files) };
            let t = Instant::now();
            let reply = c.call(&open, &[]).await?;
            let took = t.elapsed();
            let ok = reply.access::<OpenOk>()?;
            if !ok.tail_cached || reply.payload().len() != want_tail {
                return Err(
                    format!("open {}: tail of {} bytes, want {want_tail}", open.path, reply.payload().len()).into()
                );
            }
            if i >= o.warmup {
                ping_h.record(ping.as_nanos() as u64)?;
                open_h.record(took.as_nanos() as u64)?;
            }
        }
        Ok((ping_h, open_h, want_tail))
    })
}

/// Create, add one block, complete with the last 64 KiB as the tail.
async fn write_file(c: &Conn, path: &str, bytes: &[u8]) -> Result<(), BenchError> {
    let cr: CreateOk =
        call(c, &Create { path: path.into(), overwrite: false, mode: 0o644, block_size: 0 }, &[]).await?;
    let ab: AddBlockOk = call(c, &AddBlock { file_id: cr.file_id, index: 0, exclude: vec![] }, &[]).await?;
    let len = bytes.len() as u64;
    let tail = bytes.len().min(64 << 10);
    let complete = Complete {
        file_id: cr.file_id,
        length: len,
        blocks: vec![BlockLen { block_id: ab.block.block_id, len }],
        tail_offset: len - tail as u64,
    };
    c.call(&complete, &[&bytes[bytes.len() - tail..]]).await?;
    Ok(())
}

/// Sizes of the metadata benchmark.
#[derive(Clone, Debug)]
pub struct MetaOptions {
    /// Concurrency levels (requests in flight on one connection).
    pub concurrency: Vec<u32>,
    /// Time each operation runs at each level.
    pub phase: Duration,
    /// Most files created per level.
    pub max_files: u64,
    /// fdatasync samples for the baseline.
    pub fsync_samples: u32,
    /// Parent directory of the journal (a real disk).
    pub dir: PathBuf,
    /// Master counts to measure, one after another in the run (1, or a Raft group).
    pub masters: Vec<usize>,
}

/// One row of the metadata table.
#[derive(Clone, Debug, Serialize)]
pub struct MetaRow {
    /// Operation.
    pub op: String,
    /// Masters serving (1, or a Raft group whose majority fsyncs every mutation).
    pub masters: usize,
    /// Requests in flight.
    pub concurrency: u32,
    /// Operations done.
    pub ops: u64,
    /// Operations per second.
    pub ops_per_sec: f64,
    /// Median latency.
    pub p50_us: f64,
    /// 99th percentile latency.
    pub p99_us: f64,
    /// `ops_per_sec` over the fdatasync baseline's.
    pub ratio_to_fdatasync: f64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Create,
    Open,
    Stat,
    Rename,
    Delete,
}

impl Op {
    const ALL: [Op; 5] = [Op::Create, Op::Open, Op::Stat, Op::Rename, Op::Delete];

    fn name(self) -> &'static str {
        match self {
            Op::Create => "create+complete",
            Op::Open => "open",
            Op::Stat => "stat",
            Op::Rename => "rename",
            Op::Delete => "delete",
        }
    }

    async fn run(self, c: &Conn, dir: &str, i: u64) -> Result<(), BenchError> {
        match self {
            Op::Create => {
                let cr: CreateOk =
                    call(c, &Create { path: format!("{dir}/f{i}"), overwrite: false, mode: 0o644, block_size: 0 }, &[])
                        .await?;
                c.call(&Complete { file_id: cr.file_id, length: 0, blocks: vec![], tail_offset: 0 }, &[]).await?;
            }
            Op::Open => {
                c.call(&Open { path: format!("{dir}/f{i}") }, &[]).await?;
            }
            Op::Stat => {
                c.call(&Stat { path: format!("{dir}/f{i}") }, &[]).await?;
            }
            Op::Rename => {
                c.call(&Rename { src: format!("{dir}/f{i}"), dst: format!("{dir}/r{i}") }, &[]).await?;
            }
            Op::Delete => {
                c.call(&Delete { path: format!("{dir}/r{i}"), recursive: false }, &[]).await?;
            }
        }
        Ok(())
    }
}

/// Runs `op` with `conc` tasks until `phase` ends or `limit` items are used (reads cycle over
/// `limit` files instead). Returns how many ran, the wall time and the latency histogram.
async fn phase(
    c: &Conn,
    op: Op,
    dir: &str,
    conc: u32,
    phase: Duration,
    limit: u64,
) -> Result<(u64, Duration, Histogram<u64>), BenchError> {
    let next = Arc::new(AtomicU64::new(0));
    let reads = matches!(op, Op::Open | Op::Stat);
    let start = Instant::now();
    let deadline = start + phase;
    let tasks: Vec<_> = (0..conc)
        .map(|_| {
            let (c, next, dir) = (c.clone(), next.clone(), dir.to_owned());
            tokio::spawn(async move {
                let mut h = histogram();
                let mut n = 0u64;
                while Instant::now() < deadline {
                    let k = next.fetch_add(1, Ordering::Relaxed);
                    let i = if reads { k % limit } else { k };
                    if i >= limit {
                        break;
                    }
                    let t = Instant::now();
                    op.run(&c, &dir, i).await?;
                    h.record(t.elapsed().as_nanos() as u64)?;
                    n += 1;
                }
                Ok::<_, BenchError>((n, h))
            })
        })
        .collect();
    let (mut total, mut hist) = (0, histogram());
    for t in tasks {
        let (n, h) = t.await??;
        total += n;
        hist.add(&h)?;
    }
    Ok((total, start.elapsed(), hist))
}

/// Latency of one 4 KiB write + fdatasync in `dir`, the cost of one durable commit.
fn fdatasync_cost(dir: &Path, samples: u32) -> Result<Histogram<u64>, BenchError> {
    let path = dir.join("fdatasync-probe");
    let mut f = std::fs::OpenOptions::new().create(true).write(true).truncate(true).open(&path)?;
    let block = [0x5au8; 4096];
    let mut h = histogram();
    for _ in 0..samples {
        let t = Instant::now();
        f.write_all(&block)?;
        f.sync_data()?;
        h.record(t.elapsed().as_nanos() as u64)?;
    }
    drop(f);
    std::fs::remove_file(&path)?;
    Ok(h)
}

/// Metadata throughput and latency, with the fdatasync baseline as the first row.
pub fn run_meta(o: &MetaOptions, start: StartMasters) -> Result<Vec<MetaRow>, BenchError> {
    if o.concurrency.is_empty() || o.concurrency.contains(&0) || o.max_files == 0 || o.fsync_samples == 0 {
        return Err("need concurrency levels >= 1, max_files >= 1 and fsync_samples >= 1".into());
    }
    // The journal's directory, where a master would write.
    let dir = fresh_dir(&o.dir)?;
    let sync = fdatasync_cost(&dir, o.fsync_samples);
    let _ = std::fs::remove_dir_all(&dir);
    let sync = sync?;
    let sync_ops = 1e9 / sync.mean().max(1.0);
    let mut rows = vec![MetaRow {
        op: "baseline: 4 KiB write + fdatasync".into(),
        masters: 1,
        concurrency: 1,
        ops: sync.len(),
        ops_per_sec: sync_ops,
        p50_us: sync.value_at_quantile(0.5) as f64 / 1e3,
        p99_us: sync.value_at_quantile(0.99) as f64 / 1e3,
        ratio_to_fdatasync: 1.0,
    }];
    for &masters in &o.masters {
        meta_one(o, start, masters.max(1), sync_ops, &mut rows)?;
    }
    Ok(rows)
}

fn meta_one(
    o: &MetaOptions,
    start: StartMasters,
    masters: usize,
    sync_ops: f64,
    rows: &mut Vec<MetaRow>,
) -> Result<(), BenchError> {
    let bed = Bed::start(start, &o.dir, masters, Reads::Lease)?;
    let rt = load_runtime()?;
    rt.block_on(async {
        let c = bed.connect(Role::Client).await?;
        for &conc in &o.concurrency {
            let dir = format!("/bench/meta/c{conc}");
            c.call(&Mkdir { path: dir.clone(), parents: true, mode: 0o755 }, &[]).await?;
            let mut limit = o.max_files;
            for op in Op::ALL {
                let (n, took, h) = phase(&c, op, &dir, conc, o.phase, limit).await?;
                if op == Op::Create {
                    limit = n;
                } else if op == Op::Rename {
                    limit = n; // delete removes the renamed files
                }
                if limit == 0 {
                    return Err(format!("no {} completed at concurrency {conc}", op.name()).into());
                }
                let ops_per_sec = n as f64 / took.as_secs_f64().max(1e-9);
                rows.push(MetaRow {
                    op: op.name().into(),
                    masters,
                    concurrency: conc,
                    ops: n,
                    ops_per_sec,
                    p50_us: h.value_at_quantile(0.5) as f64 / 1e3,
                    p99_us: h.value_at_quantile(0.99) as f64 / 1e3,
                    ratio_to_fdatasync: ops_per_sec / sync_ops,
                });
            }
        }
        Ok::<_, BenchError>(())
    })
}

/// Prints the metadata table: baseline first, ratios to it.
pub fn print_meta_table(rows: &[MetaRow]) {
    println!("master metadata ops over QUIC on loopback, journal fsync on (group commit)");
    println!(
        "{:<36} {:>7} {:>5} {:>9} {:>11} {:>10} {:>10} {:>9}",
        "series", "masters", "conc", "ops", "ops/s", "p50 µs", "p99 µs", "ops/s ×"
    );
    for r in rows {
        println!(
            "{:<36} {:>7} {:>5} {:>9} {:>11.0} {:>10.1} {:>10.1} {:>9.2}",
            r.op, r.masters, r.concurrency, r.ops, r.ops_per_sec, r.p50_us, r.p99_us, r.ratio_to_fdatasync
        );
    }
    println!("(× = ops/s over one fdatasync per op, measured in the same run and directory)");
    // Each op at each concurrency against one master, where the run measured both.
    for r in rows.iter().filter(|r| r.masters > 1) {
        if let Some(one) = rows.iter().find(|o| o.masters == 1 && o.op == r.op && o.concurrency == r.concurrency) {
            println!(
                "{} masters / 1: {:<16} conc {:>3}: ops/s {:.2}×, p99 {:.2}×",
                r.masters,
                r.op,
                r.concurrency,
                r.ops_per_sec / one.ops_per_sec.max(1e-9),
                r.p99_us / one.p99_us.max(1e-9)
            );
        }
    }
}
