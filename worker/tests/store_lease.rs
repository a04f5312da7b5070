//! Block store: extents leased to short-circuit readers are not reused while the lease
//! lasts, whatever happens to their blocks (evicted, deleted, rewritten).

#[path = "store_common.rs"]
mod common;

use std::os::unix::fs::FileExt;
use std::time::{Duration, Instant};

use common::{config, pattern, put, run, scratch};
use cv_worker::store::{BlockStore, ErrorKind, Watermarks};

const BLOCK: usize = 64 << 10;
const LEASE: Duration = Duration::from_millis(400);

/// What a short-circuit reader would read at the leased extent, straight from the file.
fn on_disk(path: &std::path::Path, offset: u64, len: usize) -> Vec<u8> {
    let mut buf = vec![0u8; len];
    std::fs::File::open(path).unwrap().read_exact_at(&mut buf, offset).unwrap();
    buf
}

#[test]
fn an_evicted_blocks_leased_extent_is_reused_only_after_the_lease() {
    let dir = scratch();
    // Room for exactly 4 blocks; only allocation evicts.
    let mut cfg = config(dir.path(), 4 * BLOCK as u64);
    cfg.watermarks = Watermarks { high_pct: 100, low_pct: 100 };
    let data_file = cfg.data_paths()[0].clone();
    run(|| async move {
        let store = BlockStore::open(cfg).await.unwrap();
        for id in 0..4u64 {
            put(&store, id, &pattern(id, BLOCK), false).await;
        }
        let (stat, crcs) = store.lease(0, LEASE).unwrap();
        let leased_at = Instant::now();
        assert_eq!((stat.len, crcs.len()), (BLOCK as u64, 1));
        assert_eq!(crcs[0], crc32fast::hash(&pattern(0, BLOCK)));
        // Block 0 is the oldest but the lease touched it: the first write evicts block 1.
        put(&store, 10, &pattern(10, BLOCK), false).await;
        assert_eq!(store.read(1, 0, 1).await.unwrap_err().kind(), ErrorKind::NotFound);
        // Delete the leased block: its extent stays held, so the next write, with nothing
        // else free, evicts another block rather than reuse it.
        assert!(store.delete(0).await.unwrap());
        put(&store, 11, &pattern(11, BLOCK), false).await;
        assert_eq!(on_disk(&data_file, stat.disk_offset, BLOCK), pattern(0, BLOCK), "the leased bytes are intact");
        // Now every other block is pinned: the write waits for the lease, then takes the extent.
        for id in [2u64, 3, 10, 11] {
            let _ = store.set_pinned(id, true).await;
        }
        put(&store, 12, &pattern(12, BLOCK), false).await;
        assert!(leased_at.elapsed() >= LEASE, "the extent was reused {:?} after the lease began", leased_at.elapsed());
        assert_eq!(store.lookup(12).unwrap().stat().disk_offset, stat.disk_offset);
        assert_eq!(on_disk(&data_file, stat.disk_offset, BLOCK), pattern(12, BLOCK));
    });
}

#[test]
fn a_rewritten_block_keeps_its_old_extent_for_the_lease_and_no_space_waits_for_none() {
    let dir = scratch();
    let mut cfg = config(dir.path(), 2 * BLOCK as u64);
    cfg.watermarks = Watermarks { high_pct: 100, low_pct: 100 };
    let data_file = cfg.data_paths()[0].clone();
    run(|| async move {
        let store = BlockStore::open(cfg).await.unwrap();
        let told = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
        let t = told.clone();
        store.on_revoke(move |id| t.borrow_mut().push(id));
        put(&store, 1, &pattern(1, BLOCK), true).await;
        let (old, _) = store.lease(1, LEASE).unwrap();
        // A new incarnation of block 1 (deleted first: a committed block is never
        // overwritten) goes elsewhere; the old extent is held, not freed.
        assert!(store.delete(1).await.unwrap());
        put(&store, 1, &pattern(101, BLOCK), true).await;
        let new = store.lookup(1).unwrap().stat();
        assert_ne!(new.disk_offset, old.disk_offset);
        assert_eq!(*told.borrow(), vec![1], "the lease holders are told the incarnation went");
        assert_eq!(on_disk(&data_file, old.disk_offset, BLOCK), pattern(1, BLOCK));
        // The disk is full of pinned and held bytes: a write waits for the lease to end and
        // then takes the old extent.
        let t = Instant::now();
        put(&store, 2, &pattern(2, BLOCK), true).await;
        assert!(t.elapsed() >= LEASE / 2, "waited {:?}", t.elapsed());
        assert_eq!(store.lookup(2).unwrap().stat().disk_offset, old.disk_offset);
        // With nothing held, a full disk of pinned blocks is NoSpace at once.
        let t = Instant::now();
        let err = store.begin_write(3, BLOCK as u64, true).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::NoSpace);
        assert!(t.elapsed() < LEASE / 2);
        // Block 2 was never leased: its readers have nothing to be told.
        assert!(store.delete(2).await.unwrap());
        assert_eq!(*told.borrow(), vec![1]);
        // A block that is not stored cannot be leased.
        assert_eq!(store.lease(99, LEASE).unwrap_err().kind(), ErrorKind::NotFound);
    });
}
