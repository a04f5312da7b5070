//! Block store: a request looks its block up once; a block deleted, rewritten or evicted
//! between that lookup and the read (or during the read) fails `NotFound`, never returning
//! the bytes of another block or incarnation.
//!
//! The shard runtime is single-threaded, so each interleaving is made exact: look up, change
//! the store, then read, in one task (or poll a read once so its disk read is in flight).

#[path = "store_common.rs"]
mod common;

use std::future::Future;
use std::pin::pin;
use std::task::Poll;

use common::{config, get, pattern, put, run, scratch};
use cv_worker::store::{BlockStore, ErrorKind, Verify, Watermarks};

const LEN: usize = 100_000;

#[test]
fn one_lookup_gives_len_pin_and_memory_residency_without_counting_a_read() {
    let dir = scratch();
    run(|| async move {
        let store = BlockStore::open(config(dir.path(), 4 << 20)).await.unwrap();
        put(&store, 1, &pattern(1, LEN), true).await;
        let block = store.lookup(1).unwrap();
        assert_eq!((block.block_id(), block.len(), block.pinned()), (1, LEN as u64, true));
        assert_eq!(block.stat().len, LEN as u64);
        assert!(!store.in_memory(&block));
        for _ in 0..2 {
            store.read_block(&block, 0, LEN as u64, Verify::ByReader).await.unwrap();
        }
        assert!(store.in_memory(&block), "read twice: admitted");
        let before = store.stats();
        let again = store.lookup(1).unwrap();
        assert!(store.in_memory(&again));
        assert_eq!(store.stats(), before, "a lookup and a residency check count no hit or miss");
        assert_eq!(store.lookup(2).unwrap_err().kind(), ErrorKind::NotFound);
        assert_eq!(store.stats(), before, "nor does a failed lookup");
    });
}

#[test]
fn deleted_between_lookup_and_read_is_not_found() {
    let dir = scratch();
    run(|| async move {
        let store = BlockStore::open(config(dir.path(), 4 << 20)).await.unwrap();
        let old = put(&store, 1, &pattern(1, LEN), false).await;
        let block = store.lookup(1).unwrap();
        assert!(store.delete(1).await.unwrap());
        // Its extent goes to the next block written.
        let other = put(&store, 2, &pattern(2, LEN), false).await;
        assert_eq!(other.disk_offset, old.disk_offset, "the extent is reused");
        let misses = store.stats().disk.misses;
        for verify in [Verify::Here, Verify::ByReader] {
            let err = store.read_block(&block, 0, LEN as u64, verify).await.unwrap_err();
            assert_eq!(err.kind(), ErrorKind::NotFound, "{verify:?}: {err}");
        }
        assert_eq!(store.stats().disk.misses, misses + 2);
        assert!(!store.in_memory(&block));
        assert_eq!(get(&store, 2).await, pattern(2, LEN));
    });
}

#[test]
fn rewritten_between_lookup_and_read_is_not_found_even_from_memory() {
    let dir = scratch();
    run(|| async move {
        let store = BlockStore::open(config(dir.path(), 4 << 20)).await.unwrap();
        put(&store, 1, &pattern(1, LEN), false).await;
        let block = store.lookup(1).unwrap();
        for _ in 0..2 {
            store.read_block(&block, 0, LEN as u64, Verify::Here).await.unwrap();
        }
        assert!(store.in_memory(&block));
        // A new incarnation of the same id, of another length (after a delete: a committed
        // block is never overwritten).
        store.delete(1).await.unwrap();
        put(&store, 1, &pattern(77, 3000), false).await;
        assert!(!store.in_memory(&block), "the old incarnation's chunks went with it");
        let err = store.read_block(&block, 0, 3000, Verify::ByReader).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::NotFound);
        // Looked up again, it is the new one.
        let new = store.lookup(1).unwrap();
        assert_eq!(new.len(), 3000);
        assert_eq!(store.read_block(&new, 0, 3000, Verify::ByReader).await.unwrap().to_vec(), pattern(77, 3000));
    });
}

#[test]
fn evicted_between_lookup_and_read_is_not_found() {
    let dir = scratch();
    // Room for exactly two blocks; only allocation evicts.
    let mut cfg = config(dir.path(), 2 * 102_400);
    cfg.watermarks = Watermarks { high_pct: 100, low_pct: 100 };
    run(|| async move {
        let store = BlockStore::open(cfg).await.unwrap();
        put(&store, 1, &pattern(1, LEN), false).await;
        put(&store, 2, &pattern(2, LEN), false).await;
        let block = store.lookup(1).unwrap();
        put(&store, 3, &pattern(3, LEN), false).await;
        assert_eq!(store.stats().disk.evictions, 1);
        assert_eq!(store.lookup(1).unwrap_err().kind(), ErrorKind::NotFound, "the oldest went");
        let err = store.read_block(&block, 0, LEN as u64, Verify::ByReader).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::NotFound);
    });
}

#[test]
fn deleted_and_overwritten_during_the_disk_read_is_not_found() {
    let dir = scratch();
    run(|| async move {
        let store = BlockStore::open(config(dir.path(), 4 << 20)).await.unwrap();
        let old = put(&store, 1, &pattern(1, LEN), false).await;
        let block = store.lookup(1).unwrap();
        let before = store.stats().disk;
        let mut read = pin!(store.read_block(&block, 0, LEN as u64, Verify::ByReader));
        // Polled once: the disk read is in flight.
        let first = std::future::poll_fn(|cx| Poll::Ready(read.as_mut().poll(cx).map(|_| ()))).await;
        assert!(first.is_pending(), "the read waits on the disk");
        // Meanwhile the block is deleted and another written over its extent.
        assert!(store.delete(1).await.unwrap());
        let other = put(&store, 2, &pattern(2, LEN), false).await;
        assert_eq!(other.disk_offset, old.disk_offset, "the extent is reused");
        let err = read.await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");
        let after = store.stats().disk;
        assert_eq!((after.hits, after.misses), (before.hits, before.misses + 1), "counted as a miss");
        assert_eq!(get(&store, 2).await, pattern(2, LEN));
    });
}
