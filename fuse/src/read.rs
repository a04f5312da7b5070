//! Reads of one open file. Reads go straight to the owning shards (`read_at`) for exactly
//! the bytes the kernel asks for, which already include the kernel's own read-ahead (up to
//! `max_readahead`, 1 MiB). Only a long run of reads in file order, a scan, gets the client's
//! sequential reader with its deeper read-ahead. Engines reading Parquet or ORC read column
//! chunks, runs of a few MiB with gaps between them: a read-ahead past such a run, or a
//! reader that reads through the gap, fetches bytes nobody asked for (with the page cache
//! dropped, DuckDB's TPC-H made the worker read 10× the bytes it asked for that way).
//! The tail is served from memory by the client either way.

use crate::errno::errno_of;
use crate::pages::PagesOf;
use crate::recent::Recent;
use crate::stats::FuseStats;
use cv_client::{File, SequentialReader};
use fuser::{Errno, ReplyData};
use std::sync::Arc;
use tokio::sync::Mutex;

/// Bytes read in file order before the sequential reader takes over: more than a column
/// chunk (its reads, with the kernel's read-ahead, come as a few in-order requests).
const SCAN_AFTER: u64 = 16 << 20;
/// How far past the end of the run a read may start and still continue it: the kernel's
/// read-ahead requests run in parallel and may arrive out of order, up to one request apart.
const RUN_SLACK: u64 = 1 << 20;

/// One open file being read.
#[derive(Debug)]
pub(crate) struct ReadHandle {
    file: File,
    seq: Mutex<Seq>,
    /// Where a read-only mount keeps opened files (`open_ttl`): a failed read forgets this
    /// file's version there, so the next open asks the master.
    recent: Option<Arc<Recent>>,
    /// The mount's counters: a read of a version replaced or removed is counted.
    stats: Arc<FuseStats>,
    /// The version the kernel's pages of this inode are of ([`crate::pages`]).
    pages: Arc<PagesOf>,
}

/// The run of in-order reads seen so far, and the reader once it is a scan.
#[derive(Debug, Default)]
struct Seq {
    reader: Option<SequentialReader>,
    /// First byte of the run.
    run_start: u64,
    /// Furthest byte the run has read to.
    run_end: u64,
}

impl Seq {
    /// A read of `[offset, end)`: it continues the run if it starts in it or just past it,
    /// else it starts a new one.
    fn extend(&mut self, offset: u64, end: u64) {
        if offset >= self.run_start && offset <= self.run_end + RUN_SLACK {
            self.run_end = self.run_end.max(end);
        } else {
            (self.run_start, self.run_end) = (offset, end);
        }
    }
}

impl ReadHandle {
    pub(crate) fn new(file: File, recent: &Arc<Recent>, stats: &Arc<FuseStats>, pages: Arc<PagesOf>) -> Self {
        let recent = recent.enabled().then(|| recent.clone());
        ReadHandle { file, seq: Mutex::new(Seq::default()), recent, stats: stats.clone(), pages }
    }

    /// Whether this handle's reads may fill the kernel's pages of its inode: not once an open
    /// of another version made the kernel drop them. Such a read is refused with ESTALE, as
    /// it would be a moment later anyway, once the old version's blocks are deleted.
    pub(crate) fn may_fill_pages(&self) -> bool {
        self.pages.allow(self.file.version())
    }

    pub(crate) fn file(&self) -> &File {
        &self.file
    }

    /// Answers `reply` with up to `size` bytes at `offset` from the client's io thread (or,
    /// `blocking`, on this thread with a blocking read), if the client can read them at once
    /// from a local worker's files (`File::local_read`) and no scan's reader has the handle;
    /// gives `reply` back otherwise. A read that fails after it started is read again through
    /// [`ReadHandle::read`] on `rt`.
    pub(crate) fn read_now(
        self: &Arc<Self>,
        offset: u64,
        size: u32,
        reply: ReplyData,
        rt: &tokio::runtime::Handle,
        blocking: bool,
    ) -> Result<(), ReplyData> {
        let len = self.file.len();
        if offset >= len || size == 0 {
            return Err(reply);
        }
        let want = (u64::from(size)).min(len - offset) as usize;
        let end = offset + want as u64;
        let Ok(mut seq) = self.seq.try_lock() else { return Err(reply) };
        if seq.reader.is_some() {
            return Err(reply);
        }
        let Some(read) = self.file.local_read(offset, want) else { return Err(reply) };
        // The run is kept as `read` keeps it, so a scan is still seen as one.
        seq.extend(offset, end);
        drop(seq);
        let (me, rt) = (self.clone(), rt.clone());
        let answer = move |bytes: Option<bytes::Bytes>| match bytes {
            Some(b) => reply.data(&b),
            None => {
                rt.spawn(async move {
                    match me.read(offset, size).await {
                        Ok(b) => reply.data(&b),
                        Err(e) => reply.error(e),
                    }
                });
            }
        };
        if blocking {
            answer(read.read_blocking());
        } else {
            read.start(answer);
        }
        Ok(())
    }

    /// Up to `size` bytes at `offset`; fewer only at the end of the file. ESTALE once the
    /// kernel's pages are of another version ([`Self::may_fill_pages`]), or once this
    /// version's blocks are gone.
    pub(crate) async fn read(&self, offset: u64, size: u32) -> Result<Vec<u8>, Errno> {
        if !self.may_fill_pages() {
            self.stats.stale_read();
            return Err(Errno::ESTALE);
        }
        let out = self.read_file(offset, size).await;
        if out == Err(Errno::ESTALE) {
            self.stats.stale_read();
        }
        if out.is_err()
            && let Some(recent) = &self.recent
        {
            let st = self.file.status();
            recent.failed(&st.path, st.version);
        }
        out
    }

    async fn read_file(&self, offset: u64, size: u32) -> Result<Vec<u8>, Errno> {
        let len = self.file.len();
        if offset >= len || size == 0 {
            return Ok(Vec::new());
        }
        let want = (u64::from(size)).min(len - offset) as usize;
        let end = offset + want as u64;
        let mut seq = self.seq.lock().await;
        if let Some(r) = seq.reader.as_mut() {
            // Forward into bytes already asked for: the scan goes on. A read behind the
            // reader (an earlier request arriving late) is served apart and leaves it be.
            if offset >= r.position() && end <= r.fetched_end() {
                skip(r, offset - r.position()).await?;
                let out = fill(r, want).await?;
                seq.run_end = seq.run_end.max(offset + out.len() as u64);
                return Ok(out);
            }
            // Past what it fetched: the scan ended (or jumped). Bytes a new reader would
            // prefetch are a guess until another run shows a scan.
            if offset >= r.position() {
                seq.reader = None;
                (seq.run_start, seq.run_end) = (offset, offset);
            }
        }
        seq.extend(offset, end);
        if seq.reader.is_none() && seq.run_end - seq.run_start >= SCAN_AFTER && end == seq.run_end {
            let mut r = self.file.sequential(offset);
            let out = fill(&mut r, want).await?;
            seq.reader = Some(r);
            return Ok(out);
        }
        drop(seq);
        let mut buf = vec![0u8; want];
        let n = self.file.read_at(offset, &mut buf).await.map_err(|e| errno_of(&e))?;
        buf.truncate(n);
        Ok(buf)
    }
}

async fn fill(r: &mut SequentialReader, want: usize) -> Result<Vec<u8>, Errno> {
    let mut out = vec![0u8; want];
    let mut got = 0;
    while got < want {
        let n = r.read(&mut out[got..]).await.map_err(|e| errno_of(&e))?;
        if n == 0 {
            break;
        }
        got += n;
    }
    out.truncate(got);
    Ok(out)
}

/// Skips `n` bytes the reader has already asked for (the caller checks).
async fn skip(r: &mut SequentialReader, mut n: u64) -> Result<(), Errno> {
    let mut scratch = vec![0u8; (n.min(1 << 20)) as usize];
    while n > 0 {
        let k = (n as usize).min(scratch.len());
        let got = r.read(&mut scratch[..k]).await.map_err(|e| errno_of(&e))?;
        if got == 0 {
            return Ok(());
        }
        n -= got as u64;
    }
    Ok(())
}
