//! One lookup of a committed block ([`BlockRef`]), and the one rule for the range a read
//! answers ([`clamp`]).
//!
//! A request looks its block up once and works on that reference: its length and pin come
//! from it, a read of it reads that incarnation or fails `NotFound` (deleted, evicted or
//! rewritten since), and a stat asks the memory tier about it without a second lookup.

use std::ops::Range;

use super::block_store::{BlockStat, BlockStore, Entry, State, not_found};
use super::error::{ErrorKind, Result, StoreError};

/// A committed block as one lookup found it: one incarnation, with what reading it needs.
///
/// It holds no lock and keeps nothing alive: the block may go away meanwhile, and reads
/// through the reference then fail `NotFound` rather than return another incarnation's bytes.
#[derive(Debug, Clone)]
pub struct BlockRef {
    pub(crate) block_id: u64,
    pub(crate) entry: Entry,
}

impl BlockRef {
    /// Block id.
    pub fn block_id(&self) -> u64 {
        self.block_id
    }

    /// Bytes of data.
    pub fn len(&self) -> u64 {
        self.entry.len
    }

    /// Whether it has no bytes.
    pub fn is_empty(&self) -> bool {
        self.entry.len == 0
    }

    /// Never evicted while set (as of the lookup).
    pub fn pinned(&self) -> bool {
        self.entry.pinned
    }

    /// Size and placement.
    pub fn stat(&self) -> BlockStat {
        self.entry.stat(self.block_id)
    }

    /// Whether its incarnation is still the committed one (so its extent is still its own).
    pub(crate) fn is_live(&self, st: &State) -> bool {
        st.blocks.get(&self.block_id).is_some_and(|cur| cur.seq == self.entry.seq)
    }
}

/// The bytes a read of `len` at `offset` answers in a block of `block_len` bytes: up to
/// `len`, shorter at the block's end (as the protocol allows); an offset past the end is
/// refused with `InvalidArgument` naming the block. Reads of a stored block and of one being
/// filled from object storage both cut their range here.
pub fn clamp(block_id: u64, block_len: u64, offset: u64, len: u64) -> Result<Range<u64>> {
    if offset > block_len {
        return Err(StoreError::new(
            ErrorKind::InvalidArgument,
            format!("offset {offset} past the end of block {block_id} ({block_len} bytes)"),
        ));
    }
    Ok(offset..offset + len.min(block_len - offset))
}

impl BlockStore {
    /// The committed block `block_id`, looked up once; `NotFound` if absent. Counts no hit
    /// or miss and leaves its recency alone: a lookup is not a read ([`BlockStore::read_block`]).
    pub fn lookup(&self, block_id: u64) -> Result<BlockRef> {
        let entry = self.state().blocks.get(&block_id).cloned().ok_or_else(|| not_found(block_id))?;
        Ok(BlockRef { block_id, entry })
    }

    /// Whether some chunks of `block` (that incarnation) are in the memory tier: a stat's
    /// question, which looks up each chunk and so is not asked by reads. Counts no memory-tier
    /// hit or miss (a stat is not a read).
    pub fn in_memory(&self, block: &BlockRef) -> bool {
        self.state().mem.holds_any(block.entry.seq, block.entry.crcs.len() as u32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clamp_cuts_at_the_end_and_refuses_past_it() {
        assert_eq!(clamp(1, 100, 0, 10).unwrap(), 0..10);
        assert_eq!(clamp(1, 100, 95, 10).unwrap(), 95..100);
        assert_eq!(clamp(1, 100, 100, 10).unwrap(), 100..100);
        assert_eq!(clamp(1, 100, 0, u64::MAX).unwrap(), 0..100);
        let err = clamp(7, 100, 101, 1).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument);
        assert!(err.to_string().contains("block 7"), "{err}");
        assert_eq!(clamp(7, 100, u64::MAX, 2).unwrap_err().kind(), ErrorKind::InvalidArgument);
    }
}
