//! Counters of the store, per tier.

/// Counters of one tier.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TierStats {
    /// Lookups answered by this tier.
    pub hits: u64,
    /// Lookups this tier could not answer.
    pub misses: u64,
    /// Entries this tier evicted to make room.
    pub evictions: u64,
    /// Entries this tier dropped because they failed their checksum: memory-tier chunks whose
    /// bytes changed in RAM after admission; disk-tier blocks, as `StoreStats::corrupt_blocks`.
    pub corrupt: u64,
    /// Bytes held now.
    pub bytes_used: u64,
    /// Bytes this tier may hold.
    pub capacity_bytes: u64,
}

/// Counters of the whole store.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StoreStats {
    /// Memory tier, counted per chunk.
    pub memory: TierStats,
    /// Disk tier, counted per block read.
    pub disk: TierStats,
    /// Blocks dropped because a chunk failed its checksum.
    pub corrupt_blocks: u64,
}

/// Disk space of the store.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// Bytes of extent space in all data files.
    pub capacity_bytes: u64,
    /// Bytes of extents in use (committed blocks and writes in flight).
    pub used_bytes: u64,
    /// Bytes of extents of pinned blocks (never evicted).
    pub pinned_bytes: u64,
    /// Committed blocks.
    pub blocks: u64,
}
