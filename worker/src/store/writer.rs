//! Streaming block writes: append pieces as they arrive, checksum per chunk, commit atomically.
//!
//! Data goes to a reserved extent that no index record points to, so until `commit` logs the
//! block it is invisible, and after a crash its space is simply free again.

use std::rc::Rc;

use super::block_store::{BlockStat, BlockStore, Entry, Inner};
use super::dma::{ALIGN, Staging};
use super::error::{ErrorKind, Result, StoreError};

/// Bytes gathered before one O_DIRECT write.
const WRITE_UNIT: u64 = 1 << 20;

/// A block being written. Dropping it without `commit` discards it and frees its space.
#[derive(Debug)]
pub struct BlockWriter {
    inner: Rc<Inner>,
    block_id: u64,
    seq: u64,
    dir: u16,
    offset: u64,
    alloc_len: u64,
    expected_len: u64,
    pinned: bool,
    chunk_size: u32,
    written: u64,
    flushed: u64,
    staging: Option<Staging>,
    crc: crc32fast::Hasher,
    chunk_fill: u64,
    crcs: Vec<u32>,
    failed: bool,
    finished: bool,
}

impl BlockWriter {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        inner: Rc<Inner>,
        block_id: u64,
        seq: u64,
        dir: u16,
        offset: u64,
        alloc_len: u64,
        expected_len: u64,
        pinned: bool,
    ) -> Self {
        let chunk_size = inner.cfg.chunk_size;
        Self {
            inner,
            block_id,
            seq,
            dir,
            offset,
            alloc_len,
            expected_len,
            pinned,
            chunk_size,
            written: 0,
            flushed: 0,
            staging: None,
            crc: crc32fast::Hasher::new(),
            chunk_fill: 0,
            crcs: Vec::new(),
            failed: false,
            finished: false,
        }
    }

    /// Block id being written.
    pub fn block_id(&self) -> u64 {
        self.block_id
    }

    /// Bytes appended so far.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// Appends the next piece of the block. More than the expected length is refused.
    pub async fn append(&mut self, mut data: &[u8]) -> Result<()> {
        if self.failed {
            return Err(StoreError::new(ErrorKind::Io, "writer failed earlier; abort it"));
        }
        if self.written + data.len() as u64 > self.expected_len {
            return Err(StoreError::new(
                ErrorKind::InvalidArgument,
                format!(
                    "block {}: {} + {} bytes exceeds expected length {}",
                    self.block_id,
                    self.written,
                    data.len(),
                    self.expected_len
                ),
            ));
        }
        self.checksum(data);
        self.written += data.len() as u64;
        while !data.is_empty() {
            let staging = match &mut self.staging {
                Some(s) => s,
                None => {
                    let cap = WRITE_UNIT.min(self.alloc_len - self.flushed) as usize;
                    self.staging.insert(self.file().staging(cap))
                }
            };
            let n = staging.push(data);
            data = &data[n..];
            if staging.is_full() {
                self.flush().await?;
            }
        }
        Ok(())
    }

    fn checksum(&mut self, mut data: &[u8]) {
        let cs = u64::from(self.chunk_size);
        while !data.is_empty() {
            let n = (cs - self.chunk_fill).min(data.len() as u64) as usize;
            self.crc.update(&data[..n]);
            self.chunk_fill += n as u64;
            data = &data[n..];
            if self.chunk_fill == cs {
                let h = std::mem::take(&mut self.crc);
                self.crcs.push(h.finalize());
                self.chunk_fill = 0;
            }
        }
    }

    async fn flush(&mut self) -> Result<()> {
        let Some(staging) = self.staging.take() else {
            return Ok(());
        };
        let n = staging.len() as u64;
        let pos = self.offset + self.flushed;
        let res = self.inner.files[usize::from(self.dir)].write(staging, pos).await;
        if res.is_err() {
            self.failed = true;
        }
        res?;
        // Only the last flush may be partial; it is padded to ALIGN inside the extent.
        self.flushed += n.div_ceil(ALIGN) * ALIGN;
        Ok(())
    }

    fn file(&self) -> &super::dma::DirectFile {
        &self.inner.files[usize::from(self.dir)]
    }

    /// Makes the block durable and visible; returns its stat. The block may be shorter
    /// than announced (the unused space is returned).
    pub async fn commit(mut self) -> Result<BlockStat> {
        if self.failed {
            return Err(StoreError::new(ErrorKind::Io, "writer failed earlier; nothing committed"));
        }
        if self.chunk_fill > 0 {
            let h = std::mem::take(&mut self.crc);
            self.crcs.push(h.finalize());
            self.chunk_fill = 0;
        }
        if let Some(same) = self.committed_twin()? {
            // Dropping the writer frees the new extent; the committed block stays as it is.
            return Ok(same);
        }
        self.flush().await?;
        if self.inner.cfg.sync_data && self.written > 0 {
            self.file().sync().await?;
        }
        let used = self.written.div_ceil(ALIGN) * ALIGN;
        if used < self.alloc_len {
            let (dir, tail, len) = (self.dir, self.offset + used, self.alloc_len - used);
            self.inner.state.borrow_mut().free(dir, tail, len);
            self.alloc_len = used;
        }
        let entry = Entry {
            dir: self.dir,
            offset: self.offset,
            len: self.written,
            alloc_len: self.alloc_len,
            pinned: self.pinned,
            chunk_size: self.chunk_size,
            crcs: std::mem::take(&mut self.crcs).into(),
            seq: self.seq,
        };
        let store = BlockStore { inner: self.inner.clone() };
        let stat = store.publish(self.block_id, entry).await?;
        self.finished = true;
        store.housekeep().await;
        Ok(stat)
    }

    /// A block id names one content for ever, so a committed block is never overwritten:
    /// the same bytes again (a writer retrying after a lost answer, a copy that is already
    /// here) are the committed block's stat, other bytes are `Committed`. Compared by length
    /// and chunk crcs; the store's writes (`writing`) hold the id, so nothing commits it meanwhile.
    fn committed_twin(&self) -> Result<Option<BlockStat>> {
        let st = self.inner.state.borrow();
        let Some(old) = st.blocks.get(&self.block_id) else { return Ok(None) };
        if old.len == self.written && old.chunk_size == self.chunk_size && old.crcs[..] == self.crcs[..] {
            return Ok(Some(old.stat(self.block_id)));
        }
        Err(StoreError::new(
            ErrorKind::Committed,
            format!(
                "block {} is committed with other bytes ({} bytes, {} now): a committed block is never overwritten",
                self.block_id, old.len, self.written
            ),
        ))
    }

    /// Discards the block and frees its space (the same as dropping the writer).
    pub fn abort(self) {}
}

impl Drop for BlockWriter {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        let mut st = self.inner.state.borrow_mut();
        st.writing.remove(&self.block_id);
        st.free(self.dir, self.offset, self.alloc_len);
    }
}
