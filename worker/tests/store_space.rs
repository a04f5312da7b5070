//! Block store: full disk, watermark eviction, pinned blocks, scan resistance on disk.

#[path = "store_common.rs"]
mod common;

use common::{config, get, pattern, put, run, scratch};
use cv_worker::store::{BlockStore, ErrorKind, Watermarks};

const BLOCK: usize = 64 << 10;

#[test]
fn full_disk_evicts_unpinned_then_says_no_space_and_pinned_survive() {
    let dir = scratch();
    // Room for exactly 8 blocks of 64 KiB; watermarks at 100 % so only allocation evicts.
    let mut cfg = config(dir.path(), 8 * BLOCK as u64);
    cfg.watermarks = Watermarks { high_pct: 100, low_pct: 100 };
    run(|| async move {
        let store = BlockStore::open(cfg).await.unwrap();
        for id in 0..4u64 {
            put(&store, id, &pattern(id, BLOCK), true).await;
        }
        for id in 10..14u64 {
            put(&store, id, &pattern(id, BLOCK), false).await;
        }
        assert_eq!(store.usage().used_bytes, 8 * BLOCK as u64);
        // Four more blocks: each evicts an unpinned one.
        for id in 20..24u64 {
            put(&store, id, &pattern(id, BLOCK), false).await;
        }
        assert_eq!(store.stats().disk.evictions, 4);
        // Now pin them: nothing is evictable, the next write is refused, nothing is corrupted.
        for id in 20..24u64 {
            store.set_pinned(id, true).await.unwrap();
        }
        let err = store.begin_write(99, BLOCK as u64, false).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::NoSpace);
        assert!(err.retryable());
        assert_eq!(store.usage().pinned_bytes, 8 * BLOCK as u64);
        for id in (0..4u64).chain(20..24) {
            assert_eq!(get(&store, id).await, pattern(id, BLOCK), "pinned block {id}");
        }
        for id in 10..14u64 {
            assert_eq!(store.read(id, 0, 1).await.unwrap_err().kind(), ErrorKind::NotFound);
        }
        let r = store.drain_report();
        assert_eq!(r.removed, vec![10, 11, 12, 13]);
        // Unpinning makes room again.
        store.set_pinned(0, false).await.unwrap();
        put(&store, 99, &pattern(99, BLOCK), false).await;
        assert_eq!(store.read(0, 0, 1).await.unwrap_err().kind(), ErrorKind::NotFound);
        assert_eq!(get(&store, 99).await, pattern(99, BLOCK));
    });
}

#[test]
fn high_watermark_evicts_down_to_low() {
    let dir = scratch();
    let mut cfg = config(dir.path(), 10 * BLOCK as u64);
    cfg.watermarks = Watermarks { high_pct: 80, low_pct: 50 };
    run(|| async move {
        let store = BlockStore::open(cfg).await.unwrap();
        for id in 0..8u64 {
            put(&store, id, &pattern(id, BLOCK), false).await;
        }
        assert_eq!(store.usage().blocks, 8, "80 % is not above high");
        put(&store, 8, &pattern(8, BLOCK), false).await;
        let u = store.usage();
        assert!(u.used_bytes <= 5 * BLOCK as u64, "evicted down to the low watermark: {u:?}");
        assert!(store.lookup(8).is_ok(), "the new block stays");
    });
}

#[test]
fn disk_tier_scan_does_not_evict_hot_blocks() {
    let dir = scratch();
    let mut cfg = config(dir.path(), 20 * 4096);
    cfg.watermarks = Watermarks { high_pct: 100, low_pct: 100 };
    cfg.memory_tier_bytes = 0;
    run(|| async move {
        let store = BlockStore::open(cfg).await.unwrap();
        let hot: Vec<u64> = (0..5).collect();
        for &id in &hot {
            put(&store, id, &pattern(id, 4096), false).await;
            store.read(id, 0, 1).await.unwrap();
        }
        // A one-pass scan of 100 blocks through a 20-block cache, hot blocks read now and then.
        for (i, id) in (1000..1100u64).enumerate() {
            put(&store, id, &pattern(id, 4096), false).await;
            if i % 5 == 0 {
                store.read(hot[(i / 5) % hot.len()], 0, 1).await.unwrap();
            }
        }
        for &id in &hot {
            assert_eq!(get(&store, id).await, pattern(id, 4096), "hot block {id} evicted by a scan");
        }
        assert!(store.stats().disk.evictions >= 80);
        assert_eq!(store.stats().memory.hits, 0, "memory tier disabled");
    });
}
