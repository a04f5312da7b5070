//! Per-shard block store: O_DIRECT files through io_uring, chunk checksums, tiers, eviction.
