//! Helpers shared by the store tests (included with `#[path]`; has no tests of its own).
#![allow(dead_code)]

use std::future::Future;
use std::path::Path;

use cv_rt::{Runtime, RuntimeConfig};
use cv_worker::store::{BlockBytes, BlockStat, BlockStore, DataDir, Result, StoreConfig, Verify};

/// Runs `f` on a fresh shard runtime on this thread.
pub fn run<F, Fut>(f: F)
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = ()>,
{
    let rt = Runtime::new(RuntimeConfig { ring_entries: 64, ..RuntimeConfig::default() }).expect("shard runtime");
    rt.block_on(f());
}

/// A scratch directory on the target's file system (ext4 here; O_DIRECT works).
pub fn scratch() -> tempfile::TempDir {
    tempfile::Builder::new().prefix("cv-store-").tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir")
}

/// A small store, named as the worker names its stores (`blocks`): 256 KiB blocks of 64 KiB
/// chunks, 1 MiB memory tier, one dir of `capacity` bytes.
pub fn config(dir: &Path, capacity: u64) -> StoreConfig {
    let mut c = StoreConfig::new("blocks", vec![DataDir { path: dir.to_path_buf(), capacity_bytes: capacity }]);
    c.block_size = 256 << 10;
    c.chunk_size = 64 << 10;
    c.memory_tier_bytes = 1 << 20;
    c.sync_data = false;
    c
}

/// Deterministic bytes that differ per block and per position.
pub fn pattern(id: u64, len: usize) -> Vec<u8> {
    let mut x = id.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// Writes `data` as block `id` in uneven pieces and commits it.
pub async fn put(store: &BlockStore, id: u64, data: &[u8], pinned: bool) -> BlockStat {
    let mut w = store.begin_write(id, data.len() as u64, pinned).await.expect("begin_write");
    for piece in data.chunks(7001) {
        w.append(piece).await.expect("append");
    }
    w.commit().await.expect("commit")
}

/// Reads the whole block back as one buffer.
pub async fn get(store: &BlockStore, id: u64) -> Vec<u8> {
    let len = store.lookup(id).expect("lookup").len();
    store.read(id, 0, len).await.expect("read").to_vec()
}

/// One lookup, then a read of it with the chunks checked as `verify` says (the shard's path).
pub async fn read_with(store: &BlockStore, id: u64, offset: u64, len: u64, verify: Verify) -> Result<BlockBytes> {
    store.read_block(&store.lookup(id)?, offset, len, verify).await
}
