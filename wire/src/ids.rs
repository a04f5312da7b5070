//! Block ids name their owning shard, so any shard can tell at once whether
//! a request is its own and where to redirect it if not.
//!
//! Layout of a block id: bits 63..16 are a cluster-wide sequence number
//! chosen by the master, bits 15..0 the index of the owning shard on the
//! owning worker.

/// Bits of a block id that hold the shard index.
pub const SHARD_BITS: u32 = 16;

/// The block id for sequence number `seq` placed on `shard`.
pub const fn block_id(seq: u64, shard: u16) -> u64 {
    (seq << SHARD_BITS) | shard as u64
}

/// The shard that owns `block_id` on its worker.
pub const fn block_shard(block_id: u64) -> u16 {
    (block_id & ((1 << SHARD_BITS) - 1)) as u16
}

/// The sequence number part of `block_id`.
pub const fn block_seq(block_id: u64) -> u64 {
    block_id >> SHARD_BITS
}

/// The first sequence number whose block ids are all `>= next_free_id`.
pub const fn first_free_seq(next_free_id: u64) -> u64 {
    next_free_id.div_ceil(1 << SHARD_BITS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_and_stay_ordered() {
        for (seq, shard) in [(0, 0), (1, 3), (77, 65535), (1 << 40, 9)] {
            let id = block_id(seq, shard);
            assert_eq!(block_shard(id), shard);
            assert_eq!(block_seq(id), seq);
        }
        let id = block_id(5, 7);
        let next = first_free_seq(id + 1);
        assert!(block_id(next, 0) > id);
        assert_eq!(first_free_seq(0), 0);
    }
}
