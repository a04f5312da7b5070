//! An open file: its block map and tail, and positioned reads.

use crate::block::{Dst, Received};
use crate::client::Client;
use crate::error::{Error, ErrorKind, Result};
use crate::reader::SequentialReader;
use cv_wire::msg::{BlockLoc, BlockSource, FileStatus, ReadBlock, SyncMount, UfsRef};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use tokio::task::JoinSet;
use tokio::time::{Instant, sleep};

/// An open file. Reads that fall inside the tail are served from memory.
#[derive(Clone, Debug)]
pub struct File {
    pub(crate) inner: Arc<FileInner>,
}

#[derive(Debug)]
pub(crate) struct FileInner {
    client: Client,
    status: FileStatus,
    blocks: Vec<BlockLoc>,
    tail: Option<(u64, Vec<u8>)>,
    /// The object behind a file cached from object storage.
    ufs: Option<UfsRef>,
    /// Blocks whose owner became unreachable after the open, where the master says they are
    /// now (by block id). Empty, and not locked, until a read fails over.
    moved: Mutex<HashMap<u64, BlockLoc>>,
    any_moved: AtomicBool,
    /// The chunks its last short-circuit reads ended in ([`crate::local::ChunkMemo`]).
    memo: Arc<crate::local::ChunkMemo>,
}

impl FileInner {
    /// What a shard needs to fetch block `loc` if it lacks it.
    fn source(&self, loc: &BlockLoc) -> Option<BlockSource> {
        let object = self.ufs.clone()?;
        Some(BlockSource { object, offset: loc.offset, len: loc.len })
    }

    /// Where block `loc` is read now: where the open said, or where a failover moved it.
    fn current(&self, loc: &BlockLoc) -> BlockLoc {
        if self.any_moved.load(Ordering::Acquire)
            && let Some(moved) = self.moved.lock().expect("moved lock").get(&loc.block_id)
        {
            return moved.clone();
        }
        loc.clone()
    }

    /// Asks the master where block `loc` is now (opening the file again: same id and version,
    /// or the file changed under the reader) and remembers the answer for later reads.
    async fn relocate(&self, loc: &BlockLoc) -> Result<BlockLoc> {
        let path = &self.status.path;
        let version = self.status.version;
        // Not `Unavailable`: the master answered, and the version read is gone.
        let again = match self.client.open(path).await {
            Err(e) if e.kind() == ErrorKind::NotFound => {
                let why = format!("{path} was removed after it was opened (version {version} read): open it again");
                return Err(Error::new(ErrorKind::Stale, why));
            }
            r => r?,
        };
        let st = again.status();
        if (st.id, st.version) != (self.status.id, version) {
            let why = format!("{path} was replaced after it was opened (version {version} read, now {})", st.version);
            return Err(Error::new(ErrorKind::Stale, format!("{why}: open it again")));
        }
        let Some(now) = again.blocks().iter().find(|b| b.block_id == loc.block_id) else {
            return Err(Error::new(ErrorKind::Protocol, format!("{path}: block {} left the block map", loc.block_id)));
        };
        // Every block that moved, not just this one: the file's other blocks on the same
        // worker are read where they are now without each finding out for itself.
        let mut moved = self.moved.lock().expect("moved lock");
        for (was, is) in self.blocks.iter().zip(again.blocks()) {
            if was.block_id == is.block_id && (was.addr != is.addr || was.lost != is.lost) {
                moved.insert(is.block_id, is.clone());
            }
        }
        self.any_moved.store(!moved.is_empty(), Ordering::Release);
        Ok(now.clone())
    }

    /// The object behind this file changed in its store since the master recorded it: the
    /// master is asked to look at the path again (`SyncMount` of it), best effort, so that the
    /// next open records the new version instead of failing the same way until `cv.ttl`.
    async fn object_changed(&self) {
        let req = SyncMount { cv_path: self.status.path.clone() };
        match tokio::time::timeout(RELOCATE_WITHIN, self.client.master("sync", &req, &[])).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => {
                tracing::debug!(path = %self.status.path, error = %e, "could not ask for the path to be checked again")
            }
            Err(_) => {
                tracing::debug!(path = %self.status.path, "the master did not answer the ask to check the path again")
            }
        }
    }

    /// Where the master says block `loc` is now (see [`Self::relocate`]), asked for at most
    /// [`RELOCATE_WITHIN`]: `Ok(Err(_))` when the master cannot answer (it did not answer a
    /// moment ago either, or the ask timed out or failed in transit, which marks it so);
    /// `Err` for an answer that ends the read (the file changed).
    async fn ask_master(&self, loc: &BlockLoc, deadline: Instant) -> Result<Result<BlockLoc>> {
        let pool = &self.client.inner.pool;
        let master = self.client.current_master();
        if let Some(since) = pool.down_since(master)
            && since < crate::pool::DOWN_FOR
        {
            let ms = since.as_millis();
            return Ok(Err(Error::new(ErrorKind::Unavailable, format!("master at {master} unreachable {ms} ms ago"))));
        }
        let ask = deadline.saturating_duration_since(Instant::now()).min(RELOCATE_WITHIN);
        let failed = match tokio::time::timeout(ask, self.relocate(loc)).await {
            Ok(Ok(now)) => {
                pool.mark_up(master);
                return Ok(Ok(now));
            }
            Ok(Err(e)) if !matches!(e.kind(), ErrorKind::Unavailable | ErrorKind::Timeout) => return Err(e),
            Ok(Err(e)) => e,
            Err(_) => Error::timeout("ask the master where the block is", ask),
        };
        pool.mark_down(master);
        Ok(Err(failed))
    }

    /// Another worker to read block `loc` through when its owner is unreachable and the master
    /// cannot say where it is now: a shard of the same index (a block id names its shard
    /// index) on another worker this file's block map knows and that is not known to be down,
    /// chosen by the block id so every reader picks the same one. It fills the block from the
    /// object store (the read carries the source) and is adopted as its owner when it reports it.
    fn other_worker(&self, loc: &BlockLoc) -> Option<BlockLoc> {
        let shard = cv_wire::block_shard(loc.block_id);
        let pool = &self.client.inner.pool;
        let mut others: Vec<&BlockLoc> = self
            .blocks
            .iter()
            .filter(|b| !b.lost && b.addr != loc.addr && cv_wire::block_shard(b.block_id) == shard)
            .filter(|b| pool.down_since(b.addr.socket_addr()).is_none())
            .collect();
        others.sort_by_key(|b| (b.addr.ip, b.addr.port));
        others.dedup_by_key(|b| b.addr);
        let pick =
            others.get((loc.block_id.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as usize % others.len().max(1))?;
        Some(BlockLoc { worker_id: pick.worker_id, shard: pick.shard, addr: pick.addr, ..loc.clone() })
    }

    /// Block `loc` read at its next copy: the first replica not known to be down (else the
    /// first), with the rest after it.
    fn next_copy(&self, loc: &BlockLoc) -> BlockLoc {
        let pool = &self.client.inner.pool;
        let mut rest = loc.replicas.clone();
        let i = rest.iter().position(|r| pool.down_since(r.addr.socket_addr()).is_none()).unwrap_or(0);
        let next = rest.remove(i);
        BlockLoc { worker_id: next.worker_id, addr: next.addr, replicas: rest, ..loc.clone() }
    }

    /// Reads of block `loc.block_id` go to `loc` from now on.
    fn remember(&self, loc: BlockLoc) {
        self.moved.lock().expect("moved lock").insert(loc.block_id, loc);
        self.any_moved.store(true, Ordering::Release);
    }

    /// The error a read of block `loc` gets when its only copy is gone.
    /// No copy of block `loc` can be reached now (retryable), naming the file and the block.
    fn unreachable(&self, loc: &BlockLoc, why: &str) -> Error {
        let (path, id, w) = (&self.status.path, loc.block_id, loc.worker_id);
        let range = format!("bytes {}..{}", loc.offset, loc.offset + loc.len);
        Error::new(ErrorKind::WorkerUnreachable, format!("{path}: block {id} ({range}), last on worker {w}: {why}"))
    }

    fn data_loss(&self, loc: &BlockLoc, why: &str) -> Error {
        let (path, id, w) = (&self.status.path, loc.block_id, loc.worker_id);
        let range = format!("bytes {}..{}", loc.offset, loc.offset + loc.len);
        Error::new(ErrorKind::DataLoss, format!("{path}: block {id} ({range}) on worker {w}: {why}"))
    }
}

/// One piece of a read: `len` bytes at `offset` of block `loc`, landing at
/// `dst` in the output.
struct Piece {
    loc: BlockLoc,
    offset: u64,
    len: u64,
    dst: usize,
}

impl File {
    pub(crate) fn new(
        client: Client,
        status: FileStatus,
        blocks: Vec<BlockLoc>,
        tail: Option<(u64, Vec<u8>)>,
        ufs: Option<UfsRef>,
    ) -> Result<File> {
        let mut expect = 0;
        for b in &blocks {
            if b.offset != expect {
                return Err(Error::new(ErrorKind::Protocol, format!("block map has a hole at {expect}")));
            }
            expect += b.len;
        }
        if expect != status.length {
            return Err(Error::new(
                ErrorKind::Protocol,
                format!("block map covers {expect} bytes of a {}-byte file", status.length),
            ));
        }
        if let Some((off, bytes)) = &tail
            && off + bytes.len() as u64 != status.length
        {
            return Err(Error::new(ErrorKind::Protocol, "tail does not end at the file's end"));
        }
        let (moved, any_moved) = (Mutex::new(HashMap::new()), AtomicBool::new(false));
        Ok(File {
            inner: Arc::new(FileInner { client, status, blocks, tail, ufs, moved, any_moved, memo: Arc::default() }),
        })
    }

    /// File length in bytes.
    pub fn len(&self) -> u64 {
        self.inner.status.length
    }

    /// Whether the file is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The object behind a file cached from object storage.
    pub fn ufs(&self) -> Option<&UfsRef> {
        self.inner.ufs.as_ref()
    }

    /// Makes sure every block is cached on its shard (fetching blocks of a
    /// cached object from the store), moving no bytes to this client.
    /// Returns the bytes of the blocks asked for.
    pub async fn load(&self, parallel: usize) -> Result<u64> {
        let mut set = JoinSet::new();
        let mut loaded = 0;
        for loc in self.inner.blocks.iter().cloned() {
            while set.len() >= parallel.max(1) {
                if let Some(r) = set.join_next().await {
                    loaded += r.map_err(|e| Error::new(ErrorKind::Other, format!("load task: {e}")))??;
                }
            }
            let client = self.inner.client.clone();
            let source = self.inner.source(&loc);
            set.spawn(async move {
                let addr = loc.addr.socket_addr();
                let req =
                    ReadBlock { block_id: loc.block_id, offset: 0, len: 0, source, fill_only: true, verify: false };
                client.call(addr, "load block", &req, &[]).await?;
                Ok::<u64, Error>(loc.len)
            });
        }
        while let Some(r) = set.join_next().await {
            loaded += r.map_err(|e| Error::new(ErrorKind::Other, format!("load task: {e}")))??;
        }
        Ok(loaded)
    }

    /// Version: changes whenever the content does.
    pub fn version(&self) -> u64 {
        self.inner.status.version
    }

    /// Metadata from the open reply.
    pub fn status(&self) -> &FileStatus {
        &self.inner.status
    }

    /// The block map.
    pub fn blocks(&self) -> &[BlockLoc] {
        &self.inner.blocks
    }

    /// The tail held in memory (offset, bytes), if the master had it cached.
    pub fn tail(&self) -> Option<(u64, &[u8])> {
        self.inner.tail.as_ref().map(|(o, b)| (*o, b.as_slice()))
    }

    /// Reads up to `buf.len()` bytes at `offset`; returns how many (0 at the
    /// end). Tail ranges cost no round trip; other ranges go to the owning
    /// shards in parallel.
    pub async fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<usize> {
        let len = self.len();
        if offset >= len || buf.is_empty() {
            return Ok(0);
        }
        let n = (buf.len() as u64).min(len - offset) as usize;
        let buf = &mut buf[..n];
        // The suffix of the range that the tail covers is copied from memory.
        let mut fetch_end = offset + n as u64;
        if let Some((tail_off, tail)) = &self.inner.tail
            && fetch_end > *tail_off
        {
            let from = offset.max(*tail_off);
            let src = &tail[(from - tail_off) as usize..(fetch_end - tail_off) as usize];
            buf[(from - offset) as usize..].copy_from_slice(src);
            fetch_end = from;
        }
        if fetch_end > offset {
            let len = fetch_end - offset;
            if let Some((loc, at)) = self.one_block(offset, len) {
                // The common case: the reply lands in the caller's buffer, no copy of our own.
                let dst = Dst::Slice(&mut buf[..len as usize]);
                fetch(&self.inner, loc, at, len, dst).await?;
            } else {
                let pieces = self.pieces(offset, len, 0);
                self.fetch_into(pieces, buf).await?;
            }
        }
        Ok(n)
    }

    /// A read of `[offset, offset + len)` that can start now from the data files of a worker
    /// on this host, with nothing to wait for first: the range is inside one block and before
    /// the tail, the block's shard is known to be local and its lease is fresh. `None`
    /// otherwise: [`File::read_at`] reads it and gets what is missing (a lease, the files).
    /// For callers that can finish on the client's io thread (a FUSE reply), saving wake-ups.
    pub fn local_read(&self, offset: u64, len: usize) -> Option<crate::LocalRead> {
        let client = &self.inner.client;
        let end = offset.checked_add(len as u64)?;
        if !client.settings().short_circuit || len == 0 || end > self.len() {
            return None;
        }
        if self.inner.tail.as_ref().is_some_and(|(t, _)| end > *t) {
            return None;
        }
        let (loc, at) = self.one_block(offset, len as u64)?;
        let loc = self.inner.current(loc);
        if loc.lost {
            return None;
        }
        client.local().ready(loc.addr.socket_addr(), loc.block_id, at, len as u64, &self.inner.memo)
    }

    /// Reads up to `len` bytes at `offset` (empty at the end). A range inside one block and
    /// outside the tail is kept as the reply's received pieces, not copied.
    pub(crate) async fn read_owned(&self, offset: u64, len: usize) -> Result<Received> {
        let end = offset.saturating_add(len as u64).min(self.len());
        if offset >= end {
            return Ok(Received::default());
        }
        let in_tail = self.inner.tail.as_ref().is_some_and(|(t, _)| end > *t);
        if !in_tail && let Some((loc, at)) = self.one_block(offset, end - offset) {
            return fetch_owned(&self.inner, loc, at, end - offset).await;
        }
        let mut buf = vec![0u8; (end - offset) as usize];
        let n = self.read_at(offset, &mut buf).await?;
        buf.truncate(n);
        Ok(Received::from(buf))
    }

    /// Reads several ranges; adjacent and overlapping ones are coalesced and
    /// every block piece is fetched in parallel. Ranges past the end are cut.
    pub async fn read_vectored(&self, ranges: &[(u64, usize)]) -> Result<Vec<Vec<u8>>> {
        let len = self.len();
        let clipped: Vec<(u64, u64)> =
            ranges.iter().map(|&(o, l)| (o.min(len), (o.saturating_add(l as u64)).min(len))).collect();
        let mut spans: Vec<(u64, u64)> = clipped.iter().copied().filter(|(s, e)| e > s).collect();
        spans.sort_unstable();
        let mut merged: Vec<(u64, u64)> = Vec::with_capacity(spans.len());
        for (s, e) in spans {
            match merged.last_mut() {
                Some(last) if s <= last.1 => last.1 = last.1.max(e),
                _ => merged.push((s, e)),
            }
        }
        // Bytes from the tail on are copied from it; the rest of every span is fetched, all
        // pieces of all spans in one parallel fan-out, and kept as received.
        let tail_off = self.inner.tail.as_ref().map_or(len, |(o, _)| *o);
        let mut set = JoinSet::new();
        for &(s, e) in merged.iter().filter(|(s, _)| *s < tail_off) {
            for p in self.pieces(s, e.min(tail_off) - s, 0) {
                let file = self.inner.clone();
                let at = s + p.dst as u64;
                set.spawn(async move { fetch_owned(&file, &p.loc, p.offset, p.len).await.map(|b| (at, b)) });
            }
        }
        let mut fetched: Vec<(u64, Received)> = Vec::with_capacity(set.len());
        while let Some(res) = set.join_next().await {
            fetched.push(res.map_err(|e| Error::new(ErrorKind::Other, format!("read task: {e}")))??);
        }
        fetched.sort_unstable_by_key(|(at, _)| *at);
        // Each range is copied once, from the received pieces and the tail.
        Ok(clipped
            .iter()
            .map(|&(s, e)| {
                let mut out = Vec::with_capacity(e.saturating_sub(s) as usize);
                let mut at = s;
                let mut i = fetched.partition_point(|(o, _)| *o <= at).saturating_sub(1);
                while at < e.min(tail_off) {
                    let (o, b) = &fetched[i];
                    let n = (o + b.len() as u64).min(e.min(tail_off)) - at;
                    b.extend_range((at - o) as usize, n as usize, &mut out);
                    (at, i) = (at + n, i + 1);
                }
                if let Some((t, tail)) = &self.inner.tail
                    && e > at
                {
                    out.extend_from_slice(&tail[(at - t) as usize..(e - t) as usize]);
                }
                out
            })
            .collect())
    }

    /// A sequential reader starting at `offset`, with read-ahead.
    pub fn sequential(&self, offset: u64) -> SequentialReader {
        SequentialReader::new(self.clone(), offset)
    }

    pub(crate) fn client(&self) -> &Client {
        &self.inner.client
    }

    /// The block that holds all of `[offset, offset+len)`, and where in it the range starts,
    /// if one block does.
    fn one_block(&self, offset: u64, len: u64) -> Option<(&BlockLoc, u64)> {
        let blocks = &self.inner.blocks;
        let b = blocks.get(blocks.partition_point(|b| b.offset + b.len <= offset))?;
        (b.offset <= offset && offset + len <= b.offset + b.len).then_some((b, offset - b.offset))
    }

    /// Splits `[offset, offset+len)` into per-block pieces; `dst` is the output
    /// position of `offset`.
    fn pieces(&self, offset: u64, len: u64, dst: usize) -> Vec<Piece> {
        let end = offset + len;
        let first = self.inner.blocks.partition_point(|b| b.offset + b.len <= offset);
        self.inner.blocks[first..]
            .iter()
            .take_while(|b| b.offset < end)
            .map(|b| {
                let s = offset.max(b.offset);
                let e = end.min(b.offset + b.len);
                Piece { loc: b.clone(), offset: s - b.offset, len: e - s, dst: dst + (s - offset) as usize }
            })
            .collect()
    }

    /// Fetches pieces of several blocks in parallel, each into a buffer of its own, and copies
    /// them into `buf`.
    async fn fetch_into(&self, pieces: Vec<Piece>, buf: &mut [u8]) -> Result<()> {
        let mut set = JoinSet::new();
        for p in pieces {
            let file = self.inner.clone();
            set.spawn(async move { fetch_owned(&file, &p.loc, p.offset, p.len).await.map(|b| (p.dst, b)) });
        }
        while let Some(res) = set.join_next().await {
            let (dst, bytes) = res.map_err(|e| Error::new(ErrorKind::Other, format!("read task: {e}")))??;
            bytes.copy_to(&mut buf[dst..dst + bytes.len()]);
        }
        Ok(())
    }
}

/// Reads `len` bytes at `offset` of block `loc` of `file` into `dst`, within one call
/// deadline however many owners it takes.
///
/// Failover: an owner that is unreachable (`WorkerUnreachable`, after the transport's idle
/// timeout at most) is not waited on again; the master is asked where the block is now and
/// the read goes there. A block the object store holds has a new owner as soon as the master
/// has noticed the loss (its connection to the worker times out the same way), which fills it
/// from the store; if the master still names the dead owner, or cannot answer, such a block is
/// read through another worker at once. A cv-only block waits for the master's word, asking
/// again with backoff. A block whose only copy is gone fails with `DataLoss` naming the file: marked lost
/// by the master, or missing from the worker that should hold it while the master still names
/// that worker for this version. One missing because the version read was replaced or removed
/// (its blocks deleted) fails with `Stale`.
pub(crate) async fn fetch(file: &FileInner, loc: &BlockLoc, offset: u64, len: u64, mut dst: Dst<'_>) -> Result<()> {
    let settings = file.client.settings();
    let deadline = Instant::now() + settings.deadline.get();
    let mut pause = settings.backoff.get();
    let mut loc = file.current(loc);
    // Whether the master named `loc` after it was found unreachable (so it is dialed again).
    let mut confirmed = false;
    // Until when a block no live worker holds is waited for: a worker the master lost for a
    // moment (stalled, restarting) comes back with its copies.
    let lost_until = Instant::now() + RELOCATE_WITHIN;
    // Copies tried in this read, and the workers that dropped theirs for failing its checksum.
    let (mut tried, mut dropped_on) = (0usize, Vec::<u64>::new());
    loop {
        if loc.lost {
            // No copy on a live worker says nothing of whether one exists: unreachable
            // (retryable), not lost. `DataLoss` is only a worker the master names answering
            // that it holds no copy (below).
            let why = "no live worker holds a copy: the master lost its worker, which may come back with it";
            let err = file.unreachable(&loc, why);
            if Instant::now() + pause >= deadline.min(lost_until) {
                return Err(err);
            }
            sleep(pause).await;
            pause = pause.saturating_mul(2).min(std::time::Duration::from_millis(500));
            match file.ask_master(&loc, deadline).await? {
                Ok(now) => (loc, confirmed) = (now, false),
                Err(m) => {
                    return Err(Error::new(err.kind(), format!("{}; the master cannot say more: {m}", err.message())));
                }
            }
            continue;
        }
        let source = file.source(&loc);
        let cv_only = source.is_none();
        let req = ReadBlock { block_id: loc.block_id, offset, len, source, fill_only: false, verify: false };
        let err = match file.client.read_block(&loc, &req, dst.reborrow(), deadline, confirmed).await {
            Ok(()) => return Ok(()),
            // Another copy can serve: the next one is read at once. One that is unreachable
            // is not dialed again by later reads of this block.
            Err(e) if !loc.replicas.is_empty() && copy_failed(&e, cv_only) => {
                tried += 1;
                if dropped_corrupt(&e) {
                    dropped_on.push(loc.worker_id);
                }
                let next = file.next_copy(&loc);
                tracing::debug!(block = loc.block_id, from = %loc.addr.socket_addr(), to = %next.addr.socket_addr(), error = %e, "reading another copy");
                if e.kind() == ErrorKind::WorkerUnreachable {
                    file.remember(next.clone());
                }
                (loc, confirmed) = (next, false);
                continue;
            }
            // The last copy failed its checksum and was dropped, as every other one was:
            // nothing is left to read it from.
            Err(e) if dropped_corrupt(&e) && cv_only && dropped_on.len() == tried => {
                dropped_on.push(loc.worker_id);
                let why = match dropped_on.len() {
                    1 => format!("its only copy failed its checksum and was dropped: {}", e.message()),
                    _ => format!(
                        "every copy failed its checksum and was dropped (workers {dropped_on:?}): {}",
                        e.message()
                    ),
                };
                return Err(file.data_loss(&loc, &why));
            }
            // The block is gone: the version read was replaced or removed (its blocks are
            // deleted), the block moved, or its only copy is lost. The master tells which.
            Err(e) if e.kind() == ErrorKind::NotFound && cv_only => {
                let why = format!("the worker holds no copy ({})", e.message());
                match file.ask_master(&loc, deadline).await? {
                    Ok(now) if now.addr != loc.addr && !now.lost => {
                        tracing::debug!(block = loc.block_id, to = %now.addr.socket_addr(), "block moved; read there");
                        (loc, confirmed) = (now, false);
                        continue;
                    }
                    Ok(_) => return Err(file.data_loss(&loc, &why)),
                    Err(m) => {
                        let why = format!("{why}; the master could not say whether the file changed: {m}");
                        return Err(file.data_loss(&loc, &why));
                    }
                }
            }
            Err(e) if e.kind() == ErrorKind::WorkerUnreachable => e,
            // The store's object is not the version recorded (a fill found it changed): the
            // master is told, so the next open sees the new version.
            Err(e) if e.kind() == ErrorKind::Stale && !cv_only => {
                file.object_changed().await;
                return Err(e);
            }
            Err(e) => return Err(e),
        };
        if Instant::now() + pause >= deadline {
            return Err(err);
        }
        let asked = file.ask_master(&loc, deadline).await?;
        let named_again = asked.as_ref().is_ok_and(|now| now.addr == loc.addr && !now.lost);
        // A block the store holds waits neither for a master that cannot answer nor for one
        // that has not noticed yet: it is read through another worker now.
        if !cv_only
            && (asked.is_err() || named_again)
            && let Some(other) = file.other_worker(&loc)
        {
            tracing::debug!(block = loc.block_id, to = %other.addr.socket_addr(), error = %err, "reading through another worker");
            file.remember(other.clone());
            (loc, confirmed) = (other, false);
            continue;
        }
        let now = match asked {
            Ok(now) => now,
            Err(master) => {
                let why = format!("{}; the master cannot say where else: {master}", err.message());
                return Err(Error::new(err.kind(), why));
            }
        };
        confirmed = named_again;
        if named_again {
            // The master has not noticed yet, or the worker is back.
            tracing::debug!(block = loc.block_id, error = %err, "owner unreachable; asking the master again");
            sleep(pause).await;
            pause = pause.saturating_mul(2).min(std::time::Duration::from_millis(500));
        } else {
            tracing::debug!(block = loc.block_id, from = %loc.addr.socket_addr(), to = %now.addr.socket_addr(), "read fails over");
        }
        loc = now;
    }
}

/// Whether a read of one copy found it corrupt and its worker dropped it (`Client::read_block`
/// makes that final): not bytes spoiled on the way, which a later read may get right.
fn dropped_corrupt(e: &Error) -> bool {
    e.kind() == ErrorKind::Corrupt && !e.retryable()
}

/// Whether a read of one copy failed so that another copy may serve: its worker is
/// unreachable, holds no copy of a cv-only block, or found its copy corrupt (and dropped it).
fn copy_failed(e: &Error, cv_only: bool) -> bool {
    match e.kind() {
        ErrorKind::WorkerUnreachable | ErrorKind::Corrupt => true,
        ErrorKind::NotFound => cv_only,
        _ => false,
    }
}

/// How long a read that lost its owner waits for the master's answer before it reads a block
/// the store holds through another worker instead: over the transport's idle timeout, so a
/// connection to a master that just died is seen closing.
const RELOCATE_WITHIN: std::time::Duration = std::time::Duration::from_secs(2);

/// [`fetch`], keeping the reply's bytes as they were received.
pub(crate) async fn fetch_owned(file: &FileInner, loc: &BlockLoc, offset: u64, len: u64) -> Result<Received> {
    let mut bytes = Received::default();
    fetch(file, loc, offset, len, Dst::Received(&mut bytes)).await?;
    Ok(bytes)
}
