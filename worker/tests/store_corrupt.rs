//! Block store: a byte flipped on disk is detected, never returned, and the block dropped.

#[path = "store_common.rs"]
mod common;

use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;

use common::{config, get, pattern, put, run, scratch};
use cv_worker::store::{BlockStore, ErrorKind};

fn flip_byte(path: &std::path::Path, at: u64) {
    let f = std::fs::OpenOptions::new().read(true).write(true).open(path).unwrap();
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, at).unwrap();
    b[0] ^= 0x40;
    f.write_all_at(&b, at).unwrap();
    f.sync_all().unwrap();
}

#[test]
fn flipped_byte_is_detected_never_returned_and_dropped_durably() {
    let dir = scratch();
    let cfg = config(dir.path(), 4 << 20);
    let data_file = dir.path().join("shard-0.data");
    let c = cfg.clone();
    let off = std::cell::Cell::new(0u64);
    run(|| async {
        let store = BlockStore::open(c).await.unwrap();
        off.set(put(&store, 1, &pattern(1, 200_000), false).await.disk_offset);
        put(&store, 2, &pattern(2, 200_000), false).await;
        store.close().await.unwrap();
    });
    // Flip one byte in chunk 2 of block 1 (offset 140000 of the block), store closed.
    let off = off.get();
    flip_byte(&data_file, off + 140_000);
    let c = cfg.clone();
    run(|| async move {
        let store = BlockStore::open(c).await.unwrap();
        // A range in the intact first chunk still reads (only the chunks read are checked).
        assert_eq!(store.read(1, 10, 100).await.unwrap().to_vec(), &pattern(1, 200_000)[10..110]);
        let err = store.read(1, 139_990, 20).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Corrupt);
        assert!(err.retryable());
        // Dropped: no byte of it is served afterwards, and the master is told.
        assert_eq!(store.read(1, 0, 10).await.unwrap_err().kind(), ErrorKind::NotFound);
        assert_eq!(store.stats().corrupt_blocks, 1);
        assert_eq!(store.drain_report().removed, vec![1]);
        assert_eq!(get(&store, 2).await, pattern(2, 200_000), "neighbour intact");
        // Refetch and rewrite: served again.
        put(&store, 1, &pattern(1, 200_000), false).await;
        assert_eq!(get(&store, 1).await, pattern(1, 200_000));
        store.delete(1).await.unwrap();
        store.close().await.unwrap();
    });
    let c = cfg.clone();
    run(|| async move {
        let store = BlockStore::open(c).await.unwrap();
        assert_eq!(store.block_ids(), vec![2]);
    });
}

#[test]
fn corrupt_block_in_memory_tier_path_is_also_checked() {
    let dir = scratch();
    let cfg = config(dir.path(), 4 << 20);
    let data_file = dir.path().join("shard-0.data");
    let c = cfg.clone();
    run(|| async move {
        let store = BlockStore::open(c).await.unwrap();
        let st = put(&store, 5, &pattern(5, 10_000), false).await;
        // Corrupt the data under a live store (page cache bypassed by O_DIRECT on both sides).
        let mut f = std::fs::OpenOptions::new().read(true).write(true).open(&data_file).unwrap();
        f.seek(SeekFrom::Start(st.disk_offset + 9_999)).unwrap();
        let mut b = [0u8; 1];
        f.read_exact(&mut b).unwrap();
        f.seek(SeekFrom::Start(st.disk_offset + 9_999)).unwrap();
        f.write_all(&[b[0] ^ 1]).unwrap();
        f.sync_all().unwrap();
        drop(f);
        assert_eq!(store.read(5, 0, 1).await.unwrap_err().kind(), ErrorKind::Corrupt);
        assert_eq!(store.usage().used_bytes, 0, "the dropped block's extent is free");
    });
}
