//! The read path: memory tier first, then one aligned disk read per run of missing chunks.
//!
//! Every chunk read is checked against its stored crc32, here or by the reader: with
//! [`Verify::Here`] before any byte of it is returned; with [`Verify::ByReader`] a chunk
//! returned whole carries its stored crc32 unchecked, and the reader's check of the bytes
//! against it (the frame crc) is the verification, so the bytes are not hashed twice. A
//! reader whose check fails reads again with `Here`, which drops the block on a mismatch.

use std::ops::Range;

use super::block_ref::{BlockRef, clamp};
use super::block_store::{BlockStore, not_found};
use super::error::{ErrorKind, Result, StoreError};
use super::view::BlockBytes;

/// Who checks the chunks of a read against their stored crc32s.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verify {
    /// The store, before returning them: memory-tier chunks too (a copy failing its check is
    /// dropped and the chunk read from disk).
    Here,
    /// The reader, against [`BlockBytes::crc32`]: chunks returned whole are not hashed here.
    /// Partial chunks are still checked here (their stored crc does not cover the range).
    ByReader,
}

impl BlockStore {
    /// Reads up to `len` bytes at `offset` of block `block_id`, every chunk checked here: a
    /// [`BlockStore::lookup`], then [`BlockStore::read_block`] (for callers holding no
    /// [`BlockRef`]; an absent block counts as a disk-tier miss).
    pub async fn read(&self, block_id: u64, offset: u64, len: u64) -> Result<BlockBytes> {
        let block = self.lookup(block_id).inspect_err(|_| self.state().disk_stats.misses += 1)?;
        self.read_block(&block, offset, len, Verify::Here).await
    }

    /// Reads up to `len` bytes at `offset` of `block`, the range cut by [`clamp`], the chunks
    /// checked as `verify` says. Counts a disk-tier hit and refreshes the block's recency.
    ///
    /// `NotFound` if the incarnation `block` names is gone (deleted, evicted or rewritten since
    /// the lookup, or during the read): never another incarnation's bytes. `Corrupt` if a chunk
    /// fails its checksum, in which case the block is dropped (fetch it again and rewrite it).
    pub async fn read_block(&self, block: &BlockRef, offset: u64, len: u64, verify: Verify) -> Result<BlockBytes> {
        let (block_id, e) = (block.block_id, &block.entry);
        let Range { start: offset, end } = clamp(block_id, e.len, offset, len)?;
        self.count_read(block)?;
        let mut out = BlockBytes::default();
        if offset == end {
            return Ok(out);
        }
        let cs = u64::from(e.chunk_size);
        let (first, last) = ((offset / cs) as u32, ((end - 1) / cs) as u32);
        // Memory-tier chunks are keyed by incarnation: these are `block`'s, whatever happens next.
        let cached: Vec<Option<bytes::Bytes>> = {
            let mut st = self.state();
            let mut get = |c: u32| {
                let chunk = st.mem.get((e.seq, c))?;
                if verify == Verify::Here && Some(crc32fast::hash(&chunk)) != e.crcs.get(c as usize).copied() {
                    tracing::warn!(block = block_id, chunk = c, "memory-tier copy failed its checksum; dropped");
                    st.mem.remove((e.seq, c));
                    return None;
                }
                Some(chunk)
            };
            (first..=last).map(&mut get).collect()
        };
        let mut c = first;
        while c <= last {
            let i = (c - first) as usize;
            if let Some(chunk) = &cached[i] {
                let base = u64::from(c) * cs;
                let lo = offset.max(base) - base;
                let hi = end.min(base + chunk.len() as u64) - base;
                // Admitted only after its check, so the stored crc is the chunk's.
                let whole = lo == 0 && hi == chunk.len() as u64;
                let crc = e.crcs.get(c as usize).copied().filter(|_| whole);
                out.push_mem(chunk.slice(lo as usize..hi as usize), crc);
                c += 1;
                continue;
            }
            let mut run_end = c;
            while run_end < last && cached[(run_end + 1 - first) as usize].is_none() {
                run_end += 1;
            }
            let (bytes, crc) = self.read_run(block, c, run_end, offset, end, verify).await?;
            out.push_disk(bytes, crc);
            c = run_end + 1;
        }
        Ok(out)
    }

    /// A read of `block` starts: a disk-tier hit if its incarnation is still the committed
    /// one, else a miss and `NotFound`.
    fn count_read(&self, block: &BlockRef) -> Result<()> {
        let mut st = self.state();
        if !block.is_live(&st) {
            st.disk_stats.misses += 1;
            return Err(not_found(block.block_id));
        }
        st.disk_stats.hits += 1;
        st.disk_policy.touch(&block.block_id);
        Ok(())
    }

    /// A read counted as a hit found its block gone after all: a miss.
    fn lost(&self, block_id: u64) -> StoreError {
        let mut st = self.state();
        st.disk_stats.hits = st.disk_stats.hits.saturating_sub(1);
        st.disk_stats.misses += 1;
        not_found(block_id)
    }

    /// Reads whole chunks `first..=last` of `block` in one aligned read, verifies them (all
    /// with `Verify::Here`, only the partial edge chunks with `ByReader`), offers them to the
    /// memory tier, and returns the part of them inside `[offset, end)` with its crc32: whole
    /// chunks contribute their stored checksum, partial edge chunks are checksummed again
    /// (over the bytes returned).
    async fn read_run(
        &self,
        block: &BlockRef,
        first: u32,
        last: u32,
        offset: u64,
        end: u64,
        verify: Verify,
    ) -> Result<(super::dma::DiskBytes, u32)> {
        let (block_id, e) = (block.block_id, &block.entry);
        let cs = u64::from(e.chunk_size);
        let start = u64::from(first) * cs;
        let stop = (u64::from(last) + 1).saturating_mul(cs).min(e.len);
        let file =
            self.inner.files.get(usize::from(e.dir)).ok_or_else(|| {
                StoreError::new(ErrorKind::Corrupt, format!("block {block_id} names a missing data dir"))
            })?;
        let bytes = file.read(e.offset + start, (stop - start) as usize).await?;
        // An extent is freed only after its block is detached, and an incarnation once detached
        // never returns: still live now, the block owned these bytes for the whole read. Gone,
        // they may be another block's (its extent reused), so they are not returned. From here
        // to the end nothing awaits (but a drop), so it stays live.
        if !block.is_live(&self.state()) {
            return Err(self.lost(block_id));
        }
        // The range to return, relative to `bytes`.
        let (lo, hi) = ((offset.max(start) - start) as usize, (end.min(stop) - start) as usize);
        // Chunk `c`'s bytes in `bytes`, and whether they are checked here: all with `Here`,
        // else only chunks not returned whole (the others are checked by the reader, and by
        // the memory tier before it admits them).
        let chunk = |c: u32| {
            let (c_lo, c_hi) =
                ((u64::from(c) * cs - start) as usize, (((u64::from(c) + 1) * cs).min(e.len) - start) as usize);
            let whole = lo <= c_lo && c_hi <= hi;
            (c_lo, c_hi, whole, verify == Verify::Here || !whole)
        };
        let mut out_crc = crc32fast::Hasher::new();
        for c in first..=last {
            let (c_lo, c_hi, whole, checked_here) = chunk(c);
            let stored = e.crcs.get(c as usize).copied();
            if checked_here && Some(crc32fast::hash(&bytes[c_lo..c_hi])) != stored {
                return Err(self.drop_corrupt(block, c).await);
            }
            if whole {
                let crc = stored.unwrap_or_default();
                out_crc.combine(&crc32fast::Hasher::new_with_initial_len(crc, (c_hi - c_lo) as u64));
            } else if c_hi.min(hi) > c_lo.max(lo) {
                out_crc.update(&bytes[c_lo.max(lo)..c_hi.min(hi)]);
            }
        }
        {
            let mut st = self.state();
            for c in first..=last {
                let (c_lo, c_hi, _, checked_here) = chunk(c);
                let unchecked = if checked_here { None } else { e.crcs.get(c as usize).copied() };
                st.mem.offer((e.seq, c), &bytes[c_lo..c_hi], unchecked);
            }
        }
        let view = bytes.slice(lo, hi - lo).ok_or_else(|| StoreError::new(ErrorKind::Io, "read view out of range"))?;
        Ok((view, out_crc.finalize()))
    }

    /// A chunk of `block` failed its crc: drop the block if it is still that incarnation
    /// (else it is `NotFound`: a block deleted or rewritten meanwhile is not dropped again).
    async fn drop_corrupt(&self, block: &BlockRef, chunk: u32) -> StoreError {
        let block_id = block.block_id;
        let detached = {
            let mut st = self.state();
            if block.is_live(&st) {
                st.corrupt_blocks += 1;
                st.disk_stats.hits = st.disk_stats.hits.saturating_sub(1);
                st.disk_stats.misses += 1;
                st.detach(block_id)
            } else {
                None
            }
        };
        let Some(old) = detached else {
            return not_found(block_id);
        };
        tracing::warn!(
            block = block_id,
            chunk,
            dir = old.dir,
            offset = old.offset,
            "chunk checksum mismatch; block dropped"
        );
        if let Err(err) = self.retire(vec![(block_id, old)]).await {
            tracing::warn!(block = block_id, error = %err, "could not log the drop of a corrupt block");
        }
        StoreError::new(ErrorKind::Corrupt, format!("block {block_id} chunk {chunk} failed its checksum; dropped"))
    }
}
