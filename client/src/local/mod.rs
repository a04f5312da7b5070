//! Short-circuit reads (`wire/FORMAT.md`, kinds 71–77): a client on a worker's host reads
//! that worker's committed blocks from its data files, without QUIC.
//!
//! Per shard, once: the shard says how (`LocalHello`), the client checks it is on the same
//! host (the same boot id, and the shard's address is one of its own), and trades the token
//! on the worker's Unix socket for descriptors of the shard's data files. Per block: a lease
//! (`LeaseBlock`) says where the block is and its chunk crcs, and promises the extent is not
//! reused until it runs out. A read reads whole chunks with O_DIRECT on the client's io_uring
//! thread, checks every chunk's crc32, and keeps the bytes only if, after the read, the lease
//! still holds and there is nothing on the worker's socket (a hang-up: a dead worker's leases
//! die with it; a `LocalRevoke`: a block went).
//! Anything else, and any failure, is answered by reading over QUIC as before.

mod io;
mod memo;
mod ring;

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use bytes::Bytes;
use cv_rt::AlignedBuf;
use cv_rt::fs::RingFile;
use cv_wire::msg::{
    BlockCap, LeaseBlock, LeaseBlockOk, LocalHello, LocalHelloOk, LocalOpen, LocalOpenOk, MAX_LOCAL_DIRS,
};
use tokio::sync::OnceCell;

use crate::call::{Calls, WorkerAt};
use crate::error::{Error, ErrorKind, Result};
use io::{Done, IoThread};
pub(crate) use memo::ChunkMemo;

/// O_DIRECT alignment of offsets and lengths: cv-rt's, which aligns the buffers read into and
/// the worker's extents.
const ALIGN: u64 = cv_rt::BUF_ALIGN as u64;
/// After a block was not leasable (not stored there yet), how long before asking again.
const MISS_FOR: Duration = Duration::from_millis(250);
/// Largest read buffer a file's memo may hold through a slice of it (per kept chunk): four
/// such per open file at most. A chunk of a larger buffer is copied.
const MEMO_PIN_MAX: usize = 256 << 10;
/// Frames on the Unix socket are small.
const SOCKET_LIMITS: cv_wire::Limits = cv_wire::Limits { max_body: 4096, max_payload: 0, ..cv_wire::Limits::DEFAULT };

/// Counters of short-circuit reads, for tests and benchmarks.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct LocalStats {
    /// Reads answered from the data files.
    pub reads: u64,
    /// Bytes they returned.
    pub bytes: u64,
    /// Reads that tried and went over QUIC after all (lease refused or lapsed, bad crc,
    /// worker gone).
    pub fallbacks: u64,
    /// Bytes read from the data files: whole chunks, less those a file's memo held.
    pub disk_bytes: u64,
    /// Reads a task submitted itself, alone, to its runtime's ring (the rest of a task's reads
    /// went through the io thread).
    pub task_ring_reads: u64,
}

/// Counts one read under way until dropped.
struct Counted<'a>(&'a AtomicUsize);

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// What a task's read goes through.
enum Via<'a> {
    /// The runtime's shared ring: the task submits, the runtime's reactor wakes it.
    Ring(Arc<cv_rt::shared::SharedRing>),
    /// The client's io thread, where the runtime has no ring.
    Io(&'a IoThread),
}

/// Whether a shard is local, found out once (`None`: it is not, or cannot be used).
type Slot = Arc<OnceCell<Option<Arc<LocalShard>>>>;

/// The client's short-circuit state: per shard address, whether it is local and its files.
#[derive(Debug, Default)]
pub(crate) struct Local {
    /// Looked up by every block read, written once per address (and when a shard goes):
    /// read without a lock, replaced whole under `shards_write`.
    shards: ArcSwap<HashMap<SocketAddr, Slot>>,
    shards_write: Mutex<()>,
    io: OnceLock<Option<IoThread>>,
    /// Where a task's read goes when it is the only one ([`ring`]); the io thread otherwise.
    task_ring: ring::TaskRing,
    /// Tasks' short-circuit reads under way.
    task_reads: AtomicUsize,
    counters: Arc<Counters>,
}

/// [`LocalStats`] as they are counted (also on the io thread).
#[derive(Debug, Default)]
struct Counters {
    reads: AtomicU64,
    bytes: AtomicU64,
    fallbacks: AtomicU64,
    disk_bytes: AtomicU64,
    task_ring_reads: AtomicU64,
}

impl Counters {
    fn served(&self, b: &Bytes) {
        self.reads.fetch_add(1, Ordering::Relaxed);
        self.bytes.fetch_add(b.len() as u64, Ordering::Relaxed);
    }

    /// The bytes `plan` asks for if the file's memo holds them all (counted as served);
    /// otherwise `None`, and the disk read it is about to make is counted.
    fn memo_only(&self, plan: &Plan) -> Option<Bytes> {
        if plan.read_len == 0 {
            let b = plan.answer_in_head();
            self.served(&b);
            return Some(b);
        }
        self.disk_bytes.fetch_add(plan.read_len as u64, Ordering::Relaxed);
        None
    }

    /// Counts a finished read of `block_id`; its bytes, or `None` to read them over QUIC.
    fn settle(&self, block_id: u64, out: Result<Bytes>) -> Option<Bytes> {
        match &out {
            Ok(b) => self.served(b),
            Err(e) => {
                self.fallbacks.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(block = block_id, error = %e, "short-circuit read failed; read again");
            }
        }
        out.ok()
    }
}

/// A short-circuit read ready to start without waiting (see [`crate::File::local_read`]).
#[derive(Debug)]
pub struct LocalRead {
    shard: Arc<LocalShard>,
    io: IoThread,
    counters: Arc<Counters>,
    block_id: u64,
    lease: Lease,
    plan: Plan,
    memo: Arc<ChunkMemo>,
}

impl LocalRead {
    /// Starts the read; `done` is called on the client's io thread with the bytes, or with
    /// `None` if the read failed after all (lease lapsed, bad crc, worker gone): read them
    /// the usual way then. Bytes the file's memo holds whole are given at once, on this
    /// thread, with no disk read.
    pub fn start(self, done: impl FnOnce(Option<Bytes>) + Send + 'static) {
        let LocalRead { shard, io, counters, block_id, lease, plan, memo } = self;
        if let Some(b) = counters.memo_only(&plan) {
            return done(Some(b));
        }
        let file = plan.file.clone();
        io.read_then(
            file,
            plan.lead,
            plan.pos,
            plan.read_len,
            Done::Call(Box::new(move |res| {
                let out = shard.finish(block_id, &lease, &plan, res, Some(&memo));
                done(counters.settle(block_id, out));
            })),
        );
    }

    /// Reads on this thread, waiting (`RingFile::read_into_waiting`), without the io thread: for a caller
    /// that has threads of its own to block (a read-only FUSE mount's request threads), so
    /// a read costs no wake-up of another thread. `None` as for [`LocalRead::start`].
    pub fn read_blocking(self) -> Option<Bytes> {
        let LocalRead { shard, counters, block_id, lease, plan, memo, .. } = self;
        if let Some(b) = counters.memo_only(&plan) {
            return Some(b);
        }
        let buf = AlignedBuf::with_capacity(plan.lead + plan.read_len);
        let res = plan.file.read_into_waiting(buf, plan.lead, plan.read_len, plan.pos).map(|(n, buf)| (buf, n));
        let out = shard.finish(block_id, &lease, &plan, res, Some(&memo));
        counters.settle(block_id, out)
    }
}

/// Where a read of a leased block goes on disk.
#[derive(Debug)]
struct Plan {
    file: Arc<RingFile>,
    /// Aligned position and length of the read in the data file (0: nothing to read).
    pos: u64,
    read_len: usize,
    /// The chunks read, the first byte of the first in the block, and the bytes of data the
    /// read must return (it may be longer: the alignment).
    first: u64,
    last: u64,
    start: u64,
    data_len: usize,
    /// Whole chunks before `first` that the file's memo held (checked when they were read).
    head: Vec<Bytes>,
    /// Where the bytes asked for start in `head` followed by the read, and how many.
    from: usize,
    len: usize,
    /// Bytes of `head` the answer takes (all after `from`; 0 when `head` is empty).
    need: usize,
    /// Where the read goes in its buffer: after room for those `need` bytes (rounded up for
    /// O_DIRECT), which are copied in front of it, so the answer is one slice of the buffer
    /// and the read's bytes are not copied.
    lead: usize,
}

impl Plan {
    /// The bytes of `head` from `from` on, part by part.
    fn head_from(&self) -> impl Iterator<Item = &[u8]> {
        let mut skip = self.from;
        self.head.iter().filter_map(move |part| match part.get(skip..) {
            Some(rest) if !rest.is_empty() => {
                skip = 0;
                Some(rest)
            }
            _ => {
                skip -= part.len();
                None
            }
        })
    }

    /// The bytes asked for when `head` holds them all (nothing to read).
    fn answer_in_head(&self) -> Bytes {
        if let [one] = &self.head[..] {
            return one.slice(self.from..self.from + self.len);
        }
        let mut out = Vec::with_capacity(self.len);
        for part in self.head_from() {
            out.extend_from_slice(&part[..part.len().min(self.len - out.len())]);
        }
        Bytes::from(out)
    }

    /// Copies the bytes of `head` the answer takes into `buf` just before the read, and
    /// returns where the answer starts in `buf`.
    fn put_head(&self, buf: &mut [u8]) -> usize {
        if self.head.is_empty() {
            return self.from;
        }
        let start = self.lead - self.need;
        let mut to = start;
        for part in self.head_from() {
            buf[to..to + part.len()].copy_from_slice(part);
            to += part.len();
        }
        start
    }
}

/// One local shard: the open socket (watched for the worker's death), its data files.
#[derive(Debug)]
struct LocalShard {
    socket: UnixStream,
    files: Vec<Arc<RingFile>>,
    leases: Mutex<HashMap<u64, Lease>>,
    /// Blocks not leasable a moment ago, and when.
    misses: Mutex<HashMap<u64, Instant>>,
    /// Blocks whose lease is being renewed in the background.
    renewing: Mutex<HashSet<u64>>,
}

#[derive(Debug, Clone)]
struct Lease {
    dir: u16,
    disk_offset: u64,
    len: u64,
    chunk_size: u64,
    crcs: Arc<[u32]>,
    /// From before the request was sent: never later than the worker's own end of it.
    granted: Instant,
    until: Instant,
}

impl Local {
    pub(crate) fn stats(&self) -> LocalStats {
        let c = &self.counters;
        LocalStats {
            reads: c.reads.load(Ordering::Relaxed),
            bytes: c.bytes.load(Ordering::Relaxed),
            fallbacks: c.fallbacks.load(Ordering::Relaxed),
            disk_bytes: c.disk_bytes.load(Ordering::Relaxed),
            task_ring_reads: c.task_ring_reads.load(Ordering::Relaxed),
        }
    }

    /// A read of `[offset, offset + len)` of block `block_id` at shard `addr` that can start
    /// now: the shard is known to be local, the io thread runs (started here at first use), and
    /// the block's lease is fresh.
    /// `None` otherwise (the async path then asks for what is missing).
    /// `memo` is the file's own (see [`ChunkMemo`]).
    pub(crate) fn ready(
        &self,
        addr: SocketAddr,
        block_id: u64,
        offset: u64,
        len: u64,
        memo: &Arc<ChunkMemo>,
    ) -> Option<LocalRead> {
        let shard = self.shards.load().get(&addr)?.get()?.clone()?;
        let io = self.io_thread()?.clone();
        let lease = shard.leases.lock().expect("lease lock").get(&block_id).cloned()?;
        if Instant::now() >= lease.granted + (lease.until - lease.granted) / 2 || len == 0 {
            return None;
        }
        let plan = shard.plan(block_id, &lease, offset, len, Some(memo)).ok()?;
        Some(LocalRead { shard, io, counters: self.counters.clone(), block_id, lease, plan, memo: memo.clone() })
    }

    /// Block `block_id`'s `[offset, offset + len)` from the shard's data file, if the shard
    /// is local and the block leasable; `None` to read over QUIC.
    pub(crate) async fn read(
        &self,
        c: &Arc<Calls>,
        at: WorkerAt,
        block_id: u64,
        cap: BlockCap,
        offset: u64,
        len: u64,
    ) -> Option<Bytes> {
        let shard = self.shard(c, at).await?;
        // A read alone goes through the runtime's ring: no thread in between. Reads in a crowd
        // go through the io thread, which takes them in batches, one submission and one
        // wake-up for many (measured: at depth 32 the ring alone cost ~1.5x the CPU per read).
        let alone = self.task_reads.fetch_add(1, Ordering::AcqRel) == 0;
        let _counted = Counted(&self.task_reads);
        let via = match if alone { self.task_ring.get() } else { None } {
            Some(ring) => {
                self.counters.task_ring_reads.fetch_add(1, Ordering::Relaxed);
                Via::Ring(ring)
            }
            None => Via::Io(self.io_thread()?),
        };
        match shard.read(c, at, &via, (block_id, cap), offset, len).await {
            Ok(Some((b, disk))) => {
                self.counters.disk_bytes.fetch_add(disk as u64, Ordering::Relaxed);
                self.counters.served(&b);
                Some(b)
            }
            Ok(None) => None,
            Err(e) => {
                self.counters.fallbacks.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(block = block_id, shard = %at.addr, error = %e, "short-circuit read fell back to QUIC");
                if shard.gone() {
                    // The worker went away, or revoked a block: ask again next time.
                    self.forget(at.addr, &shard);
                }
                None
            }
        }
    }

    fn io_thread(&self) -> Option<&IoThread> {
        self.io
            .get_or_init(|| {
                IoThread::start()
                    .inspect_err(|e| tracing::warn!(error = %e, "no io thread for short-circuit reads"))
                    .ok()
            })
            .as_ref()
    }

    /// Drops `shard` as the one at `addr` (not one opened again since), so the next read
    /// asks the shard again.
    fn forget(&self, addr: SocketAddr, shard: &Arc<LocalShard>) {
        let _write = self.shards_write.lock().expect("local lock");
        let shards = self.shards.load();
        let same =
            shards.get(&addr).and_then(|s| s.get()).is_some_and(|s| s.as_ref().is_some_and(|s| Arc::ptr_eq(s, shard)));
        if same {
            let mut fewer = HashMap::clone(&shards);
            fewer.remove(&addr);
            self.shards.store(Arc::new(fewer));
        }
    }

    /// The slot of the shard at `addr`, made empty if there is none.
    fn slot(&self, addr: SocketAddr) -> Slot {
        if let Some(slot) = self.shards.load().get(&addr) {
            return slot.clone();
        }
        let _write = self.shards_write.lock().expect("local lock");
        let shards = self.shards.load();
        if let Some(slot) = shards.get(&addr) {
            return slot.clone();
        }
        let slot = Slot::default();
        let mut more = HashMap::clone(&shards);
        more.insert(addr, slot.clone());
        self.shards.store(Arc::new(more));
        slot
    }

    /// The shard at `at` as a local one, asked once per address until a read finds its
    /// socket says otherwise (the worker went, or revoked a block; the read's check after
    /// the disk read is the one that counts, so none is made before it).
    async fn shard(&self, c: &Calls, at: WorkerAt) -> Option<Arc<LocalShard>> {
        let cell = self.slot(at.addr);
        cell.get_or_init(|| async {
            LocalShard::open(c, at)
                .await
                .inspect_err(
                    |e| tracing::debug!(shard = %at.addr, error = %e, "no short-circuit reads from this shard"),
                )
                .ok()
                .flatten()
                .map(Arc::new)
        })
        .await
        .clone()
    }
}

impl LocalShard {
    /// `None` if the shard is not on this host or does not serve short-circuit reads.
    async fn open(c: &Calls, at: WorkerAt) -> Result<Option<LocalShard>> {
        // An address of this host is one a socket can be bound to (loopback always is); a
        // shard elsewhere (another host, another network namespace) is read over QUIC.
        if std::net::UdpSocket::bind(SocketAddr::new(at.addr.ip(), 0)).is_err() {
            return Ok(None);
        }
        let hello: LocalHelloOk = match c.worker(at, "local hello", &LocalHello {}, &[]).await {
            Ok(f) => f.decode_body()?,
            Err(e) if e.kind() == ErrorKind::Unsupported => return Ok(None),
            Err(e) => return Err(e),
        };
        let ours = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap_or_default();
        if ours.trim() != hello.boot_id || hello.boot_id.is_empty() {
            return Ok(None);
        }
        let path = hello.socket.clone();
        let req = LocalOpen { token: hello.token, shard: hello.shard };
        let opened = tokio::task::spawn_blocking(move || open_files(&path, &req))
            .await
            .map_err(|e| Error::new(ErrorKind::Other, format!("local open: {e}")))??;
        let (socket, files) = opened;
        tracing::debug!(shard = %at.addr, socket = %hello.socket, files = files.len(), "short-circuit reads on");
        Ok(Some(LocalShard {
            socket,
            files,
            leases: Mutex::default(),
            misses: Mutex::default(),
            renewing: Mutex::default(),
        }))
    }

    /// Whether the worker's end of the socket is gone.
    fn gone(&self) -> bool {
        cv_net::local::hung_up(&self.socket)
    }

    async fn read(
        self: &Arc<Self>,
        c: &Arc<Calls>,
        at: WorkerAt,
        via: &Via<'_>,
        (block_id, cap): (u64, BlockCap),
        offset: u64,
        len: u64,
    ) -> Result<Option<(Bytes, usize)>> {
        let Some(lease) = self.lease(c, at, block_id, cap).await? else {
            return Ok(None);
        };
        if len == 0 {
            return Ok(Some((Bytes::new(), 0)));
        }
        let plan = self.plan(block_id, &lease, offset, len, None)?;
        let out = match via {
            Via::Ring(ring) => {
                let buf = AlignedBuf::with_capacity(plan.read_len);
                let res = ring.read(&plan.file, buf, 0, plan.read_len, plan.pos).await.map(|(n, buf)| (buf, n));
                self.finish(block_id, &lease, &plan, res, None)
            }
            Via::Io(io) => {
                let res = io.read(plan.file.clone(), plan.pos, plan.read_len).await;
                self.finish(block_id, &lease, &plan, res, None)
            }
        };
        out.map(|b| Some((b, plan.read_len)))
    }

    /// Where `[offset, offset + len)` (not empty) of the leased block is read from: whole
    /// chunks, aligned for O_DIRECT, after those at its start that `memo` holds.
    fn plan(&self, block_id: u64, lease: &Lease, offset: u64, len: u64, memo: Option<&ChunkMemo>) -> Result<Plan> {
        let end = offset.checked_add(len).filter(|&e| e <= lease.len && len > 0).ok_or_else(|| {
            Error::new(
                ErrorKind::InvalidArgument,
                format!("block {block_id}: {offset}+{len} is not inside its {} bytes", lease.len),
            )
        })?;
        let cs = lease.chunk_size;
        let (asked, last) = (offset / cs, (end - 1) / cs);
        let mut head = Vec::new();
        if let Some(memo) = memo {
            memo.leading(block_id, asked..=last, &mut head);
        }
        let first = asked + head.len() as u64;
        let start = first * cs;
        let data_end = ((last + 1) * cs).min(lease.len).max(start);
        let read_len = ((data_end - start).div_ceil(ALIGN) * ALIGN) as usize;
        let file = self.files.get(usize::from(lease.dir)).cloned().ok_or_else(|| {
            Error::new(
                ErrorKind::Protocol,
                format!("block {block_id}: lease names data file {}, {} passed", lease.dir, self.files.len()),
            )
        })?;
        let pos = lease.disk_offset + start;
        let (from, data_len) = ((offset - asked * cs) as usize, (data_end - start) as usize);
        let need = head.iter().map(Bytes::len).sum::<usize>().saturating_sub(from);
        let lead = (need as u64).div_ceil(ALIGN) as usize * ALIGN as usize;
        Ok(Plan { file, pos, read_len, first, last, start, data_len, head, from, len: len as usize, need, lead })
    }

    /// The bytes a completed read returns, if they can be trusted: the read was whole, the
    /// lease held and the worker's socket was up after it, and every chunk's crc matches.
    fn finish<B: AsRef<[u8]> + AsMut<[u8]> + Send + 'static>(
        &self,
        block_id: u64,
        lease: &Lease,
        plan: &Plan,
        res: std::io::Result<(B, usize)>,
        memo: Option<&ChunkMemo>,
    ) -> Result<Bytes> {
        let (mut buf, n) =
            res.map_err(|e| Error::new(ErrorKind::Other, format!("block {block_id}: local read: {e}")))?;
        if n < plan.data_len {
            return Err(Error::new(ErrorKind::Other, format!("block {block_id}: local read returned {n} bytes")));
        }
        // Only now, after the read: bytes read under a lease that has run out, or from a
        // worker that has died (and may have restarted without our lease), are not trusted.
        if Instant::now() >= lease.until || self.gone() {
            self.leases.lock().expect("lease lock").remove(&block_id);
            return Err(Error::new(ErrorKind::Unavailable, format!("block {block_id}: lease lapsed during the read")));
        }
        let (bytes, cs) = (&buf.as_ref()[plan.lead..], lease.chunk_size);
        for ch in plan.first..=plan.last {
            let (lo, hi) = ((ch * cs - plan.start) as usize, (((ch + 1) * cs).min(lease.len) - plan.start) as usize);
            if Some(crc32fast::hash(&bytes[lo..hi])) != lease.crcs.get(ch as usize).copied() {
                self.leases.lock().expect("lease lock").remove(&block_id);
                return Err(Error::new(
                    ErrorKind::Corrupt,
                    format!("block {block_id} chunk {ch}: checksum mismatch in the local file"),
                ));
            }
        }
        let at = plan.put_head(buf.as_mut());
        let whole = Bytes::from_owner(buf);
        // The last chunk read is where the next read in file order starts: kept. As a slice
        // it holds the read's whole buffer until the memo lets it go, so the chunk of a large
        // buffer is copied instead.
        if let Some(memo) = memo {
            let lo = plan.lead + ((plan.last - plan.first) * cs) as usize;
            let chunk = whole.slice(lo..plan.lead + plan.data_len);
            memo.put(
                block_id,
                plan.last,
                if whole.len() <= MEMO_PIN_MAX { chunk } else { Bytes::copy_from_slice(&chunk) },
            );
        }
        Ok(whole.slice(at..at + plan.len))
    }

    /// A lease on `block_id` with at least a quarter of its time left, asked for if needed;
    /// `None` if the shard does not hold the block (it is read over QUIC, which fills it).
    /// One past half its time is renewed in the background, so reads of a block in use do
    /// not wait for its lease (and the renewal keeps the block recent on the worker).
    async fn lease(
        self: &Arc<Self>,
        c: &Arc<Calls>,
        at: WorkerAt,
        block_id: u64,
        cap: BlockCap,
    ) -> Result<Option<Lease>> {
        let now = Instant::now();
        let cached = self.leases.lock().expect("lease lock").get(&block_id).cloned();
        if let Some(l) = cached {
            let term = l.until - l.granted;
            if now < l.granted + term / 2 {
                return Ok(Some(l));
            }
            if now < l.until - term / 4 {
                if self.renewing.lock().expect("lease lock").insert(block_id) {
                    let (me, c) = (self.clone(), c.clone());
                    tokio::spawn(async move {
                        if let Err(e) = me.ask_lease(&c, at, block_id, cap).await {
                            tracing::debug!(block = block_id, error = %e, "lease renewal failed");
                        }
                        me.renewing.lock().expect("lease lock").remove(&block_id);
                    });
                }
                return Ok(Some(l));
            }
        }
        if self.misses.lock().expect("lease lock").get(&block_id).is_some_and(|t| now.duration_since(*t) < MISS_FOR) {
            return Ok(None);
        }
        self.ask_lease(c, at, block_id, cap).await
    }

    /// Asks the shard for a lease on `block_id` and keeps it.
    async fn ask_lease(&self, c: &Calls, at: WorkerAt, block_id: u64, cap: BlockCap) -> Result<Option<Lease>> {
        let granted = Instant::now();
        let ok: LeaseBlockOk = match c.worker(at, "lease block", &LeaseBlock { block_id, cap }, &[]).await {
            Ok(f) => f.decode_body()?,
            Err(e) if e.kind() == ErrorKind::NotFound => {
                let mut misses = self.misses.lock().expect("lease lock");
                if misses.len() > 4096 {
                    misses.retain(|_, t| granted.duration_since(*t) < MISS_FOR);
                }
                misses.insert(block_id, granted);
                return Ok(None);
            }
            Err(e) => return Err(e),
        };
        let whole = ok.chunk_size > 0
            && ok.disk_offset.is_multiple_of(ALIGN)
            && ok.crcs.len() as u64 == ok.len.div_ceil(u64::from(ok.chunk_size));
        if !whole {
            return Err(Error::new(ErrorKind::Protocol, format!("block {block_id}: lease {ok:?} is not a block's")));
        }
        let lease = Lease {
            dir: ok.dir,
            disk_offset: ok.disk_offset,
            len: ok.len,
            chunk_size: u64::from(ok.chunk_size),
            crcs: ok.crcs.into(),
            granted,
            until: granted + Duration::from_millis(u64::from(ok.lease_ms)),
        };
        let mut leases = self.leases.lock().expect("lease lock");
        if leases.len() > 4096 {
            leases.retain(|_, l| l.until > granted);
        }
        leases.insert(block_id, lease.clone());
        Ok(Some(lease))
    }
}

/// Connects to the worker's socket and trades the token for the shard's data files.
fn open_files(path: &str, req: &LocalOpen) -> Result<(UnixStream, Vec<Arc<RingFile>>)> {
    let io = |what: &str, e: std::io::Error| Error::new(ErrorKind::Other, format!("{what} {path}: {e}"));
    let socket = UnixStream::connect(path).map_err(|e| io("connect to", e))?;
    socket.set_read_timeout(Some(Duration::from_secs(5))).map_err(|e| io("set a timeout on", e))?;
    let frame = cv_wire::encode(req, 1, &[]).map_err(|e| Error::new(ErrorKind::Protocol, e.to_string()))?;
    cv_net::local::send_frame(&socket, frame.head(), &[])?;
    let (reply, fds) = cv_net::local::recv_frame(&socket, &SOCKET_LIMITS, MAX_LOCAL_DIRS)?;
    if reply.kind() == cv_wire::Kind::Error {
        let e: cv_wire::msg::ErrorReply = reply.decode_body()?;
        return Err(Error::new(ErrorKind::PermissionDenied, format!("{path} refused: {}", e.message)));
    }
    let ok: LocalOpenOk = reply.decode_body()?;
    if usize::from(ok.dirs) != fds.len() {
        return Err(Error::new(
            ErrorKind::Protocol,
            format!("{path}: {} descriptors for {} data files", fds.len(), ok.dirs),
        ));
    }
    let files = fds.into_iter().map(|fd| Arc::new(RingFile::new(std::fs::File::from(fd)))).collect();
    Ok((socket, files))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(head: &[&'static [u8]], from: usize, len: usize) -> Plan {
        let file = Arc::new(RingFile::new(std::fs::File::open("/dev/null").unwrap()));
        let head: Vec<Bytes> = head.iter().map(|h| Bytes::from_static(h)).collect();
        let need = head.iter().map(Bytes::len).sum::<usize>().saturating_sub(from);
        let lead = (need as u64).div_ceil(ALIGN) as usize * ALIGN as usize;
        Plan { file, pos: 0, read_len: 8, first: 0, last: 0, start: 0, data_len: 8, head, from, len, need, lead }
    }

    #[test]
    fn the_head_goes_just_before_the_read_so_the_answer_is_one_slice() {
        // Kept chunks "abcdefgh" and "ijklmnop", the answer from byte 5 on, into the read.
        let p = plan(&[b"abcdefgh", b"ijklmnop"], 5, 14);
        assert_eq!((p.need, p.lead), (11, ALIGN as usize));
        let mut buf = vec![0u8; p.lead + 8];
        buf[p.lead..].copy_from_slice(b"qrstuvwx");
        let at = p.put_head(&mut buf);
        assert_eq!(&buf[at..at + p.len], b"fghijklmnopqrs");
        // Nothing kept: the answer is where it is in the read.
        let p = plan(&[], 3, 4);
        assert_eq!(p.lead, 0);
        let mut buf = b"qrstuvwx".to_vec();
        let at = p.put_head(&mut buf);
        assert_eq!(&buf[at..at + 4], b"tuvw");
    }

    #[test]
    fn an_answer_inside_the_kept_chunks_is_taken_from_them() {
        assert_eq!(&plan(&[b"abcdefgh"], 2, 3).answer_in_head()[..], b"cde");
        assert_eq!(&plan(&[b"abcdefgh", b"ijklmnop"], 6, 5).answer_in_head()[..], b"ghijk");
    }
}
