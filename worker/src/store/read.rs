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
    /// Partial chunks, from disk or memory, are still checked here (their stored crc does not
    /// cover the range; a memory-tier chunk failing it is dropped and read from disk).
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
        self.count_read(block, offset, end)?;
        let mut out = BlockBytes::default();
        if offset == end {
            return Ok(out);
        }
        let cs = u64::from(e.chunk_size);
        let (first, last) = ((offset / cs) as u32, ((end - 1) / cs) as u32);
        // Memory-tier chunks are keyed by incarnation: these are `block`'s, whatever happens next.
        // Each is the part of its chunk inside the range, with that part's crc32 (see `from_mem`).
        let cached: Vec<Option<(bytes::Bytes, u32)>> = {
            let mut st = self.state();
            let mut get = |c: u32| {
                let chunk = st.mem.get((e.seq, c))?;
                let base = u64::from(c) * cs;
                let (lo, hi) =
                    ((offset.max(base) - base) as usize, (end.min(base + chunk.len() as u64) - base) as usize);
                let stored = e.crcs.get(c as usize).copied();
                match from_mem(&chunk, lo..hi, stored, verify) {
                    Some(crc) => Some((chunk.slice(lo..hi), crc)),
                    None => {
                        tracing::warn!(block = block_id, chunk = c, "memory-tier copy failed its checksum; dropped");
                        st.mem.drop_corrupt((e.seq, c));
                        None
                    }
                }
            };
            (first..=last).map(&mut get).collect()
        };
        let mut c = first;
        while c <= last {
            let i = (c - first) as usize;
            if let Some((piece, crc)) = &cached[i] {
                out.push_mem(piece.clone(), *crc);
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

    /// Bytes `start..end` of `block_id` were read (by the readers of its fill): a later read
    /// of them is a re-use, which keeps the block (`S3Fifo::touch_range`).
    pub fn note_read(&self, block_id: u64, start: u64, end: u64) {
        self.state().disk_policy.read_so_far(&block_id, start, end);
    }

    /// A read of bytes `start..end` of `block` starts: a disk-tier hit if its incarnation is
    /// still the committed one, else a miss and `NotFound`. Only a read of bytes read before
    /// counts as a re-use for eviction (a reader going through the block piece by piece reads
    /// it once).
    fn count_read(&self, block: &BlockRef, start: u64, end: u64) -> Result<()> {
        let mut st = self.state();
        if !block.is_live(&st) {
            st.disk_stats.misses += 1;
            return Err(not_found(block.block_id));
        }
        st.disk_stats.hits += 1;
        st.disk_policy.touch_range(&block.block_id, start, end);
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

/// The crc32 of `chunk[range]` (a memory-tier chunk's part a read returns), or `None` if the
/// chunk no longer matches `stored`, its crc32 when it was written (a bit flipped in RAM since
/// it was admitted, checked then).
///
/// A chunk returned whole under `ByReader` is not hashed: its stored crc goes to the reader,
/// whose check is the chunk's. Any other is hashed whole here, in one pass: a stored crc covers
/// the whole chunk, so no fewer bytes can check it. A part is hashed on its own and combined
/// with the bytes around it, so its crc (the one the reply carries) costs no second pass;
/// serving 4 KiB of a 64 KiB chunk hashes 64 KiB instead of 4 KiB.
fn from_mem(chunk: &[u8], range: Range<usize>, stored: Option<u32>, verify: Verify) -> Option<u32> {
    let stored = stored?;
    let whole = range.start == 0 && range.end == chunk.len();
    if whole {
        return (verify == Verify::ByReader || crc32fast::hash(chunk) == stored).then_some(stored);
    }
    let part = crc32fast::hash(&chunk[range.clone()]);
    let mut all = crc32fast::Hasher::new();
    all.update(&chunk[..range.start]);
    all.combine(&crc32fast::Hasher::new_with_initial_len(part, range.len() as u64));
    all.update(&chunk[range.end..]);
    (all.finalize() == stored).then_some(part)
}

#[cfg(test)]
mod tests {
    use super::Verify;
    use crate::store::{BlockStore, DataDir, StoreConfig};

    const CHUNK: u64 = 64 << 10;

    fn data() -> Vec<u8> {
        (0..200_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect()
    }

    /// A store holding block 1 (`data()`), chunk 0 resident in the memory tier.
    async fn store_with_resident_chunk(dir: &std::path::Path) -> BlockStore {
        let mut cfg = StoreConfig::new("blocks", vec![DataDir { path: dir.to_path_buf(), capacity_bytes: 4 << 20 }]);
        (cfg.block_size, cfg.chunk_size, cfg.memory_tier_bytes, cfg.sync_data) = (256 << 10, 64 << 10, 1 << 20, false);
        let store = BlockStore::open(cfg).await.unwrap();
        let d = data();
        let mut w = store.begin_write(1, d.len() as u64, false).await.unwrap();
        w.append(&d).await.unwrap();
        w.commit().await.unwrap();
        for _ in 0..2 {
            store.read_block(&store.lookup(1).unwrap(), 0, CHUNK, Verify::ByReader).await.unwrap();
        }
        assert_eq!(store.stats().memory.bytes_used, CHUNK, "admitted on second touch");
        store
    }

    /// Flips a bit of resident chunk 0 of block 1, at `at`.
    fn flip(store: &BlockStore, at: usize) {
        let seq = store.lookup(1).unwrap().entry.seq;
        assert!(store.state().mem.flip((seq, 0), at), "chunk 0 resident");
    }

    #[test]
    fn a_resident_chunk_flipped_in_ram_is_never_served_partially() {
        let dir = tempfile::tempdir().unwrap();
        let rt = cv_rt::Runtime::new(cv_rt::RuntimeConfig { ring_entries: 64, ..Default::default() }).unwrap();
        rt.block_on(async {
            let store = store_with_resident_chunk(dir.path()).await;
            let d = data();
            for (flip_at, (offset, len)) in [(1000, (900u64, 4096u64)), (50_000, (0, 4096)), (10, (60_000, 10_000))] {
                flip(&store, flip_at);
                let block = store.lookup(1).unwrap();
                let got = store.read_block(&block, offset, len, Verify::ByReader).await.unwrap();
                let want = &d[offset as usize..(offset + len) as usize];
                assert!(got.to_vec() == want, "a flipped chunk served (flip at {flip_at}, read {offset}+{len})");
                assert_eq!(got.crc32(), crc32fast::hash(want));
                assert_eq!(store.stats().memory.bytes_used, 0, "the flipped chunk dropped");
                // Read from disk again, so admitted again: resident for the next round.
                for _ in 0..2 {
                    store.read_block(&block, 0, CHUNK, Verify::ByReader).await.unwrap();
                }
            }
            assert_eq!(store.stats().memory.corrupt, 3, "each caught, counted");
            // A whole chunk under `Here` is checked too (under `ByReader` the reader checks it).
            flip(&store, 7);
            let got = store.read_block(&store.lookup(1).unwrap(), 0, CHUNK, Verify::Here).await.unwrap();
            assert!(got.to_vec() == d[..CHUNK as usize], "a flipped chunk served whole");
            assert_eq!(store.stats().memory.corrupt, 4);
            assert_eq!(store.stats().corrupt_blocks, 0, "the disk copy is good: nothing dropped");
        });
    }
}
