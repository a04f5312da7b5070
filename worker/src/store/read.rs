//! The read path: memory tier first, then one aligned disk read per run of missing chunks,
//! every chunk from disk checked against its crc32 before any byte of it is returned.

use super::block_store::{BlockStore, Entry, not_found};
use super::error::{ErrorKind, Result, StoreError};
use super::view::BlockBytes;

impl BlockStore {
    /// Reads `len` bytes at `offset` of block `block_id`.
    ///
    /// `NotFound` if the block is absent; `Corrupt` if a chunk fails its checksum, in which
    /// case the block is dropped from the store (fetch it again and rewrite it).
    pub async fn read(&self, block_id: u64, offset: u64, len: u64) -> Result<BlockBytes> {
        let e = self.lookup(block_id)?;
        let end = offset.checked_add(len).filter(|&end| end <= e.len).ok_or_else(|| {
            StoreError::new(
                ErrorKind::InvalidArgument,
                format!("range {offset}+{len} outside block {block_id} of {} bytes", e.len),
            )
        })?;
        let mut out = BlockBytes::default();
        if len == 0 {
            return Ok(out);
        }
        let cs = u64::from(e.chunk_size);
        let (first, last) = ((offset / cs) as u32, ((end - 1) / cs) as u32);
        let cached: Vec<Option<bytes::Bytes>> = {
            let mut st = self.state();
            (first..=last).map(|c| st.mem.get((e.seq, c))).collect()
        };
        let mut c = first;
        while c <= last {
            let i = (c - first) as usize;
            if let Some(chunk) = &cached[i] {
                let base = u64::from(c) * cs;
                let lo = offset.max(base) - base;
                let hi = end.min(base + chunk.len() as u64) - base;
                out.push_mem(chunk.clone(), lo as usize, hi as usize);
                c += 1;
                continue;
            }
            let mut run_end = c;
            while run_end < last && cached[(run_end + 1 - first) as usize].is_none() {
                run_end += 1;
            }
            let (bytes, crc) = self.read_run(block_id, &e, c, run_end, offset, end).await?;
            out.push_disk(bytes, crc);
            c = run_end + 1;
        }
        Ok(out)
    }

    fn lookup(&self, block_id: u64) -> Result<Entry> {
        let mut st = self.state();
        match st.blocks.get(&block_id).cloned() {
            Some(e) => {
                st.disk_stats.hits += 1;
                st.disk_policy.touch(&block_id);
                Ok(e)
            }
            None => {
                st.disk_stats.misses += 1;
                Err(not_found(block_id))
            }
        }
    }

    /// Reads whole chunks `first..=last` in one aligned read, verifies each, offers them to
    /// the memory tier, and returns the part of them inside `[offset, end)` with its crc32:
    /// whole chunks contribute the checksum just verified, only partial edge chunks are
    /// checksummed again (over the bytes returned).
    async fn read_run(
        &self,
        block_id: u64,
        e: &Entry,
        first: u32,
        last: u32,
        offset: u64,
        end: u64,
    ) -> Result<(super::dma::DiskBytes, u32)> {
        let cs = u64::from(e.chunk_size);
        let start = u64::from(first) * cs;
        let stop = (u64::from(last) + 1).saturating_mul(cs).min(e.len);
        let file =
            self.inner.files.get(usize::from(e.dir)).ok_or_else(|| {
                StoreError::new(ErrorKind::Corrupt, format!("block {block_id} names a missing data dir"))
            })?;
        let bytes = file.read(e.offset + start, (stop - start) as usize).await?;
        // The range to return, relative to `bytes`.
        let (lo, hi) = ((offset.max(start) - start) as usize, (end.min(stop) - start) as usize);
        let mut out_crc = crc32fast::Hasher::new();
        for c in first..=last {
            let c_lo = (u64::from(c) * cs - start) as usize;
            let c_hi = ((u64::from(c) + 1) * cs).min(e.len) as usize - start as usize;
            let got = crc32fast::hash(&bytes[c_lo..c_hi]);
            if Some(got) != e.crcs.get(c as usize).copied() {
                return Err(self.drop_corrupt(block_id, e, c).await);
            }
            let (s_lo, s_hi) = (c_lo.max(lo), c_hi.min(hi));
            if (s_lo, s_hi) == (c_lo, c_hi) {
                out_crc.combine(&crc32fast::Hasher::new_with_initial_len(got, (c_hi - c_lo) as u64));
            } else if s_hi > s_lo {
                out_crc.update(&bytes[s_lo..s_hi]);
            }
        }
        {
            let mut st = self.state();
            // Only while this incarnation is still the live one.
            if st.blocks.get(&block_id).is_some_and(|cur| cur.seq == e.seq) {
                for c in first..=last {
                    let lo = (u64::from(c) * cs - start) as usize;
                    let hi = ((u64::from(c) + 1) * cs).min(e.len) as usize - start as usize;
                    st.mem.offer((e.seq, c), &bytes[lo..hi]);
                }
            }
        }
        let view = bytes.slice(lo, hi - lo).ok_or_else(|| StoreError::new(ErrorKind::Io, "read view out of range"))?;
        Ok((view, out_crc.finalize()))
    }

    /// A chunk failed its crc: drop the block if it is still the incarnation we read.
    /// A block deleted or rewritten meanwhile (its extent reused) is `NotFound` instead.
    async fn drop_corrupt(&self, block_id: u64, e: &Entry, chunk: u32) -> StoreError {
        let detached = {
            let mut st = self.state();
            if st.blocks.get(&block_id).is_some_and(|cur| cur.seq == e.seq) {
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
