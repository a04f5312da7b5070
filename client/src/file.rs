//! An open file: its block map and tail, and positioned reads. Ranges inside the tail are
//! copied from memory; block ranges are read through the route (`route/`), a block at a time.

use crate::block::{Dst, ReadBlockRef, Received};
use crate::config::ClientSettings;
use crate::error::{Error, ErrorKind, Result};
use crate::local::LocalRead;
use crate::route::{Blocks, Opened, Route};
use cv_wire::msg::{BlockLoc, FileStatus, UfsRef};
use std::sync::Arc;
use tokio::task::JoinSet;

/// An open file. Reads that fall inside the tail are served from memory.
#[derive(Clone, Debug)]
pub struct File {
    inner: Arc<FileInner>,
}

#[derive(Debug)]
struct FileInner {
    route: Arc<Route>,
    blocks: Blocks,
    tail: Option<(u64, Vec<u8>)>,
}

impl FileInner {
    /// Reads `len` bytes at `offset` of block `loc` into `dst`, failing over as the route does.
    async fn fetch(&self, loc: &BlockLoc, offset: u64, len: u64, dst: Dst<'_>) -> Result<()> {
        self.route.read(&self.blocks, loc, offset, len, dst).await
    }

    /// [`Self::fetch`], keeping the reply's bytes as they were received.
    async fn fetch_owned(&self, loc: &BlockLoc, offset: u64, len: u64) -> Result<Received> {
        let mut bytes = Received::default();
        self.fetch(loc, offset, len, Dst::Received(&mut bytes)).await?;
        Ok(bytes)
    }

    /// The bytes of piece `p`, as received.
    async fn fetch_piece(&self, p: &Piece) -> Result<Received> {
        self.fetch_owned(&self.blocks.list()[p.block], p.offset, p.len).await
    }
}

/// One piece of a read: `len` bytes at `offset` of block `loc`, landing at
/// `dst` in the output.
struct Piece {
    /// The block's index in the block map.
    block: usize,
    offset: u64,
    len: u64,
    dst: usize,
}

impl File {
    pub(crate) fn new(route: Arc<Route>, opened: Opened) -> File {
        let Opened { status, blocks, tail, ufs } = opened;
        File { inner: Arc::new(FileInner { route, blocks: Blocks::new(status, blocks, ufs), tail }) }
    }

    /// File length in bytes.
    pub fn len(&self) -> u64 {
        self.inner.blocks.status().length
    }

    /// Whether the file is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The object behind a file cached from object storage.
    pub fn ufs(&self) -> Option<&UfsRef> {
        self.inner.blocks.ufs()
    }

    /// Makes sure every block is cached on its shard (fetching blocks of a
    /// cached object from the store), moving no bytes to this client.
    /// Returns the bytes of the blocks asked for.
    pub async fn load(&self, parallel: usize) -> Result<u64> {
        let mut set = JoinSet::new();
        let mut loaded = 0;
        for block in 0..self.inner.blocks.list().len() {
            while set.len() >= parallel.max(1) {
                if let Some(r) = set.join_next().await {
                    loaded += r.map_err(|e| Error::new(ErrorKind::Other, format!("load task: {e}")))??;
                }
            }
            let file = self.inner.clone();
            set.spawn(async move {
                let loc = &file.blocks.list()[block];
                let source = file.blocks.source(loc);
                let req = ReadBlockRef {
                    block_id: loc.block_id,
                    offset: 0,
                    len: 0,
                    source,
                    fill_only: true,
                    verify: false,
                    cap: loc.cap,
                };
                file.route.call(loc.addr.socket_addr(), "load block", &req, &[]).await?;
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
        self.inner.blocks.status().version
    }

    /// Metadata from the open reply.
    pub fn status(&self) -> &FileStatus {
        self.inner.blocks.status()
    }

    /// The block map.
    pub fn blocks(&self) -> &[BlockLoc] {
        self.inner.blocks.list()
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
                self.inner.fetch(loc, at, len, dst).await?;
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
    pub fn local_read(&self, offset: u64, len: usize) -> Option<LocalRead> {
        let route = &self.inner.route;
        let end = offset.checked_add(len as u64)?;
        if !route.settings().short_circuit || len == 0 || end > self.len() {
            return None;
        }
        if self.inner.tail.as_ref().is_some_and(|(t, _)| end > *t) {
            return None;
        }
        let (loc, at) = self.one_block(offset, len as u64)?;
        let blocks = &self.inner.blocks;
        let loc = blocks.current(loc);
        if loc.lost {
            return None;
        }
        route.local_ready(loc.addr.socket_addr(), loc.block_id, at, len as u64, blocks.memo())
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
            return self.inner.fetch_owned(loc, at, end - offset).await;
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
                set.spawn(async move { file.fetch_piece(&p).await.map(|b| (at, b)) });
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

    /// The settings of the client that opened the file.
    pub(crate) fn settings(&self) -> &ClientSettings {
        self.inner.route.settings()
    }

    /// The block that holds all of `[offset, offset+len)`, and where in it the range starts,
    /// if one block does.
    fn one_block(&self, offset: u64, len: u64) -> Option<(&BlockLoc, u64)> {
        let blocks = self.inner.blocks.list();
        let b = blocks.get(blocks.partition_point(|b| b.offset + b.len <= offset))?;
        (b.offset <= offset && offset + len <= b.offset + b.len).then_some((b, offset - b.offset))
    }

    /// Splits `[offset, offset+len)` into per-block pieces; `dst` is the output
    /// position of `offset`.
    fn pieces(&self, offset: u64, len: u64, dst: usize) -> Vec<Piece> {
        let end = offset + len;
        let blocks = self.inner.blocks.list();
        let first = blocks.partition_point(|b| b.offset + b.len <= offset);
        blocks[first..]
            .iter()
            .take_while(|b| b.offset < end)
            .enumerate()
            .map(|(i, b)| {
                let s = offset.max(b.offset);
                let e = end.min(b.offset + b.len);
                Piece { block: first + i, offset: s - b.offset, len: e - s, dst: dst + (s - offset) as usize }
            })
            .collect()
    }

    /// Fetches pieces of several blocks in parallel, each into a buffer of its own, and copies
    /// them into `buf`.
    async fn fetch_into(&self, pieces: Vec<Piece>, buf: &mut [u8]) -> Result<()> {
        let mut set = JoinSet::new();
        for p in pieces {
            let file = self.inner.clone();
            set.spawn(async move { file.fetch_piece(&p).await.map(|b| (p.dst, b)) });
        }
        while let Some(res) = set.join_next().await {
            let (dst, bytes) = res.map_err(|e| Error::new(ErrorKind::Other, format!("read task: {e}")))??;
            bytes.copy_to(&mut buf[dst..dst + bytes.len()]);
        }
        Ok(())
    }
}
