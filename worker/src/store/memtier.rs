//! Memory tier: verified hot chunks kept in RAM over the disk tier.
//!
//! Admission is on second touch: a chunk read from disk for the first time is only
//! remembered (ghost queue); read again while remembered, it is copied in. A one-pass
//! scan therefore costs no copies and evicts nothing. Residents are ordered by S3-FIFO.

use std::collections::HashMap;

use bytes::Bytes;

use super::policy::S3Fifo;
use super::stats::TierStats;

/// A chunk of one committed block incarnation: (block sequence number, chunk index).
/// Sequence numbers are never reused, so a rewritten block can never hit old chunks.
pub(crate) type ChunkKey = (u64, u32);

#[derive(Debug)]
pub(crate) struct MemTier {
    chunks: HashMap<ChunkKey, Bytes>,
    policy: S3Fifo<ChunkKey>,
    capacity: u64,
    stats: TierStats,
}

impl MemTier {
    pub(crate) fn new(capacity: u64, chunk_size: u32) -> Self {
        let slots = (capacity / u64::from(chunk_size).max(1)).max(16) as usize;
        Self {
            chunks: HashMap::new(),
            policy: S3Fifo::new(slots),
            capacity,
            stats: TierStats { capacity_bytes: capacity, ..TierStats::default() },
        }
    }

    /// The chunk if resident; counts a hit or a miss.
    pub(crate) fn get(&mut self, key: ChunkKey) -> Option<Bytes> {
        if self.capacity == 0 {
            return None;
        }
        match self.chunks.get(&key) {
            Some(c) => {
                self.policy.touch(&key);
                self.stats.hits += 1;
                Some(c.clone())
            }
            None => {
                self.stats.misses += 1;
                None
            }
        }
    }

    /// A chunk just read from disk: admitted if seen recently, else remembered. `unchecked`
    /// is the stored crc32 of a chunk not yet checked against it: it is checked before the
    /// chunk is admitted (so only on admission), and a mismatch is not admitted.
    pub(crate) fn offer(&mut self, key: ChunkKey, bytes: &[u8], unchecked: Option<u32>) {
        let w = bytes.len() as u64;
        if w == 0 || w > self.capacity || self.chunks.contains_key(&key) {
            return;
        }
        if !self.policy.remembers(&key) {
            self.policy.remember(key);
            return;
        }
        if unchecked.is_some_and(|crc| crc32fast::hash(bytes) != crc) {
            return;
        }
        while self.policy.weight() + w > self.capacity {
            let Some((victim, vw)) = self.policy.evict() else {
                break;
            };
            self.chunks.remove(&victim);
            self.stats.evictions += 1;
            self.stats.bytes_used -= vw;
        }
        self.policy.insert(key, w);
        // A copy, not a slice of the disk read's buffer: a slice would keep the whole read alive.
        self.chunks.insert(key, Bytes::copy_from_slice(bytes));
        self.stats.bytes_used += w;
    }

    /// Whether any of the `chunks` chunks of block incarnation `seq` is resident (no hit or
    /// miss counted: a stat is not a read).
    pub(crate) fn holds_any(&self, seq: u64, chunks: u32) -> bool {
        !self.chunks.is_empty() && (0..chunks).any(|i| self.chunks.contains_key(&(seq, i)))
    }

    /// Drops every chunk of block incarnation `seq`.
    pub(crate) fn remove_block(&mut self, seq: u64, chunks: u32) {
        for i in 0..chunks {
            self.remove((seq, i));
        }
    }

    /// Drops one chunk, if resident.
    pub(crate) fn remove(&mut self, key: ChunkKey) {
        if self.chunks.remove(&key).is_some()
            && let Some(w) = self.policy.remove(&key)
        {
            self.stats.bytes_used -= w;
        }
    }

    /// Drops a resident chunk that failed its checksum, and counts it.
    pub(crate) fn drop_corrupt(&mut self, key: ChunkKey) {
        if self.chunks.contains_key(&key) {
            self.stats.corrupt += 1;
            self.remove(key);
        }
    }

    pub(crate) fn stats(&self) -> TierStats {
        self.stats
    }

    /// Test hook: flips a bit of byte `at` of a resident chunk, as a fault in RAM would
    /// (the chunk's bytes are shared, so it is replaced by a flipped copy).
    #[cfg(test)]
    pub(crate) fn flip(&mut self, key: ChunkKey, at: usize) -> bool {
        let Some(c) = self.chunks.get_mut(&key) else { return false };
        let mut v = c.to_vec();
        v[at] ^= 0x10;
        *c = Bytes::from(v);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_touch_admission_and_capacity() {
        let mut m = MemTier::new(3 * 4096, 4096);
        let c = vec![7u8; 4096];
        assert!(m.get((1, 0)).is_none());
        m.offer((1, 0), &c, None);
        assert!(m.get((1, 0)).is_none(), "first touch only remembers");
        m.offer((1, 0), &c, None);
        assert_eq!(m.get((1, 0)).as_deref(), Some(&c[..]));
        for i in 1..6 {
            m.offer((2, i), &c, None);
            m.offer((2, i), &c, None);
        }
        let s = m.stats();
        assert!(s.bytes_used <= 3 * 4096);
        assert!(s.evictions >= 3);
        assert_eq!((s.hits, s.misses), (1, 2));
        m.remove_block(2, 8);
        m.remove_block(1, 1);
        assert_eq!(m.stats().bytes_used, 0);
    }
}
