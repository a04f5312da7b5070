//! The master over QUIC on loopback, in-process: the server on its own tokio runtime, the load
//! on the calling thread, the journal on a real file with fsync on. With `masters > 1` a Raft
//! group of that many masters on the same runtime, disk and loopback (master/HA.md): every
//! mutation is fsynced by a majority of them before it is answered, on one shared device.
//!
//! - [`run_open`]: open latency (tail in the reply) next to a null RPC (Ping) on the same
//!   connection, interleaved, on files created beforehand with a small Parquet-shaped tail.
//! - [`run_meta`]: ops/s and p99 of create (+complete), open, stat, rename and delete at
//!   several concurrencies, next to the measured cost of one fdatasync in the same directory
//!   (1/fdatasync is what a mutation would cost without group commit).

use crate::report::{Latency, histogram};
use cv_master::server::{MasterServer, PeerConfig, RaftReads, ServerConfig};
use cv_net::config::Dur;
use cv_net::quic::TransportSettings;
use cv_net::rpc::{self, Conn};
use cv_net::tls::{ClusterCa, Identity, Usage};
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

/// A master (or a Raft group of masters) serving from fresh journal directories under
/// `parent`, removed on drop; `addr` is the one that leads.
struct Bed {
    server_rt: tokio::runtime::Runtime,
    servers: Vec<MasterServer>,
    addr: SocketAddr,
    client: Identity,
    node: Identity,
    dir: PathBuf,
}

impl Bed {
    fn start(parent: &Path, masters: usize, reads: RaftReads) -> Result<Bed, BenchError> {
        let stamp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_nanos();
        let dir = parent.join(format!("cv-master-bench-{}-{stamp}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let ca = ClusterCa::generate("bench")?;
        let id = |name: &str, usage| -> Result<Identity, BenchError> {
            let issued = ca.issue(name, usage, &[])?;
            Ok(Identity::from_pem(&ca.cert_pem(), &issued.cert_pem, &issued.key_pem)?)
        };
        let (node, client) = (id("bench-master", Usage::Node)?, id("bench-client", Usage::Client)?);
        let base = ServerConfig {
            listen: "127.0.0.1:0".parse()?,
            journal_dir: dir.join("journal"),
            heartbeat_timeout: Dur::secs(600),
            // The master alone is measured: its workers are stand-ins with no blocks to read.
            check_tails: false,
            ..ServerConfig::default()
        };
        let configs = if masters <= 1 {
            vec![base]
        } else {
            // Ports known before any master binds: each must name the others.
            let socks: Vec<_> =
                (0..masters).map(|_| std::net::UdpSocket::bind("127.0.0.1:0")).collect::<Result<_, _>>()?;
            let peers: Vec<PeerConfig> = socks
                .iter()
                .enumerate()
                .map(|(i, s)| Ok(PeerConfig { id: i as u64 + 1, addr: s.local_addr()? }))
                .collect::<Result<_, std::io::Error>>()?;
            drop(socks);
            (0..masters)
                .map(|i| ServerConfig {
                    listen: peers[i].addr,
                    journal_dir: dir.join(format!("journal{}", i + 1)),
                    node_id: i as u64 + 1,
                    peers: peers.clone(),
                    bootstrap: i == 0,
                    raft_reads: reads,
                    ..base.clone()
                })
                .collect()
        };
        let server_rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(masters.clamp(1, 2))
            .enable_all()
            .thread_name("bench-master")
            .build()?;
        let started = server_rt.block_on(async {
            let mut servers = Vec::new();
            for c in &configs {
                match MasterServer::start(c, &node, &TransportSettings::default()).await {
                    Ok(s) => servers.push(s),
                    Err(e) => {
                        for s in servers {
                            s.shutdown().await;
                        }
                        return Err(BenchError::from(e));
                    }
                }
            }
            // The one that leads (at once for a single master).
            let deadline = Instant::now() + Duration::from_secs(20);
            loop {
                if let Some(s) = servers.iter().find(|s| s.core().is_leading()) {
                    let addr = s.local_addr();
                    return Ok((servers, addr));
                }
                if Instant::now() > deadline {
                    for s in servers {
                        s.shutdown().await;
                    }
                    return Err("no master of the group leads after 20 s".into());
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        });
        let (servers, addr) = match started {
            Ok(s) => s,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&dir);
                return Err(e);
            }
        };
        Ok(Bed { server_rt, servers, addr, client, node, dir })
    }

    async fn connect(&self, role: Role) -> Result<Conn, BenchError> {
        // A worker role needs a node certificate.
        let id = if role == Role::Worker { &self.node } else { &self.client };
        let ep = rpc::client_endpoint(id, &TransportSettings::default())?;
        Ok(Conn::connect(&ep, self.addr, role, "bench-load", Limits::DEFAULT).await?)
    }
}

impl Drop for Bed {
    fn drop(&mut self) {
        for s in self.servers.drain(..) {
            self.server_rt.block_on(s.shutdown());
        }
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
    pub groups: Vec<(usize, RaftReads)>,
}

/// How a group of the open benchmark is named in its rows.
pub fn group_label(masters: usize, reads: RaftReads) -> String {
    match (masters, reads) {
        (0 | 1, _) => "1 master".into(),
        (n, RaftReads::Lease) => format!("{n} masters, lease reads"),
        (n, RaftReads::ReadIndex) => format!("{n} masters, ReadIndex reads"),
    }
}

/// Open latency next to Ping on one connection, interleaved, for each group of `o.groups`.
pub fn run_open(o: &OpenOptions) -> Result<Vec<Latency>, BenchError> {
    let mut rows = Vec::new();
    for &(masters, reads) in &o.groups {
        let label = group_label(masters, reads);
        let (ping, open, want_tail) = open_one(o, masters, reads)?;
        rows.push(Latency::from_hist(&format!("null RPC (Ping), {label}"), &ping));
        rows.push(Latency::from_hist(&format!("open + {want_tail} B tail, {label}"), &open));
    }
    Ok(rows)
}

/// Open latency next to Ping on one connection, interleaved.
fn open_one(
    o: &OpenOptions,
    masters: usize,
    reads: RaftReads,
) -> Result<(Histogram<u64>, Histogram<u64>, usize), BenchError> {
    if o.files == 0 || o.file_len < 16 || o.footer == 0 || u64::from(o.footer) + 8 > u64::from(o.file_len) {
        return Err("need files >= 1, file_len >= 16 and footer + 8 <= file_len".into());
    }
    let bed = Bed::start(&o.dir, masters, reads)?;
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
pub fn run_meta(o: &MetaOptions) -> Result<Vec<MetaRow>, BenchError> {
    if o.concurrency.is_empty() || o.concurrency.contains(&0) || o.max_files == 0 || o.fsync_samples == 0 {
        return Err("need concurrency levels >= 1, max_files >= 1 and fsync_samples >= 1".into());
    }
    let bed = Bed::start(&o.dir, 1, RaftReads::Lease)?;
    let sync = fdatasync_cost(&bed.dir, o.fsync_samples)?;
    drop(bed);
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
        meta_one(o, masters.max(1), sync_ops, &mut rows)?;
    }
    Ok(rows)
}

fn meta_one(o: &MetaOptions, masters: usize, sync_ops: f64, rows: &mut Vec<MetaRow>) -> Result<(), BenchError> {
    let bed = Bed::start(&o.dir, masters, RaftReads::Lease)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_and_meta_run_small_and_clean_up() {
        let dir = tempfile::tempdir().unwrap();
        let o = OpenOptions {
            files: 5,
            file_len: 4096,
            footer: 100,
            requests: 50,
            warmup: 5,
            dir: dir.path().into(),
            groups: vec![(1, RaftReads::Lease), (3, RaftReads::ReadIndex)],
        };
        let rows = run_open(&o).unwrap();
        assert_eq!(rows.len(), 4);
        assert!(rows.iter().all(|r| r.count == 50 && r.p50_us > 0.0));
        assert!(rows[1].name.contains("108 B tail") && rows[3].name.contains("3 masters, ReadIndex"));

        let m = MetaOptions {
            concurrency: vec![1, 4],
            phase: Duration::from_millis(100),
            max_files: 20,
            fsync_samples: 3,
            dir: dir.path().into(),
            masters: vec![1],
        };
        let rows = run_meta(&m).unwrap();
        assert_eq!(rows.len(), 1 + 2 * 5);
        assert!(rows.iter().all(|r| r.ops > 0 && r.ops_per_sec > 0.0), "{rows:?}");
        // Renames and deletes never exceed the files created.
        assert!(rows[4].ops <= rows[1].ops && rows[5].ops <= rows[4].ops);
        // The journal directories were removed.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);

        let bad = OpenOptions { footer: 5000, ..o };
        assert!(run_open(&bad).is_err());
    }
}
