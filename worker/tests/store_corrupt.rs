//! Block store: a byte flipped on disk is detected, never returned, and the block dropped.

#[path = "store_common.rs"]
mod common;

use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;

use common::{config, get, pattern, put, read_with, run, scratch};
use cv_worker::store::{BlockStore, ErrorKind, Verify};

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
    let data_file = dir.path().join("blocks.data");
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
    let data_file = dir.path().join("blocks.data");
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

#[test]
fn a_reader_checked_read_gives_the_stored_crc_and_never_caches_a_bad_chunk() {
    let dir = scratch();
    let cfg = config(dir.path(), 4 << 20);
    let data_file = dir.path().join("blocks.data");
    run(|| async move {
        let store = BlockStore::open(cfg).await.unwrap();
        let data = pattern(7, 200_000);
        let st = put(&store, 7, &data, false).await;
        flip_byte(&data_file, st.disk_offset + 70_000);
        let (whole, partial) = ((65_536, 65_536), (65_536 + 100, 1000));
        // Chunk 1 read whole and left to the reader: the bytes are the disk's, the crc the one
        // stored when the block was written, so the reader's check of one against the other fails.
        for _ in 0..3 {
            let got = read_with(&store, 7, whole.0, whole.1, Verify::ByReader).await.unwrap();
            let bytes = got.to_vec();
            assert_ne!(bytes, data[65_536..131_072], "the flipped byte is in the bytes");
            assert_eq!(got.crc32(), crc32fast::hash(&data[65_536..131_072]), "the stored crc");
            assert_ne!(got.crc32(), crc32fast::hash(&bytes), "the reader would refuse them");
        }
        // Read three times (admitted on the second touch, if it were good): not in memory.
        assert_eq!(store.stats().memory.bytes_used, 0, "a chunk failing its crc is not admitted");
        // An intact chunk read whole twice is admitted, and then served from memory.
        for _ in 0..2 {
            let got = read_with(&store, 7, 0, 65_536, Verify::ByReader).await.unwrap();
            assert_eq!(got.crc32(), crc32fast::hash(&got.to_vec()));
        }
        assert_eq!(store.stats().memory.bytes_used, 65_536);
        let from_memory = read_with(&store, 7, 0, 65_536, Verify::ByReader).await.unwrap();
        assert_eq!(
            (from_memory.to_vec(), from_memory.crc32()),
            (data[..65_536].to_vec(), crc32fast::hash(&data[..65_536]))
        );
        // Part of the bad chunk: its stored crc does not cover the range, so it is checked here.
        let err = read_with(&store, 7, partial.0, partial.1, Verify::ByReader).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Corrupt);
        assert_eq!(store.read(7, 0, 10).await.unwrap_err().kind(), ErrorKind::NotFound, "dropped");
        assert_eq!(store.stats().memory.bytes_used, 0, "its memory-tier chunks went with it");

        // The reader's retry (`Here`) checks every chunk it returns: a memory copy (checked
        // when admitted, checked again now) is served; a bad chunk on disk drops the block.
        let st = put(&store, 8, &data, false).await;
        for _ in 0..2 {
            read_with(&store, 8, 0, 65_536, Verify::ByReader).await.unwrap();
        }
        assert_eq!(store.stats().memory.bytes_used, 65_536);
        flip_byte(&data_file, st.disk_offset + 10);
        flip_byte(&data_file, st.disk_offset + 70_000);
        let got = read_with(&store, 8, 0, 65_536, Verify::Here).await.unwrap();
        assert_eq!((got.to_vec(), got.crc32()), (data[..65_536].to_vec(), crc32fast::hash(&data[..65_536])));
        let err = read_with(&store, 8, 0, 131_072, Verify::Here).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Corrupt);
        assert_eq!(store.read(8, 0, 10).await.unwrap_err().kind(), ErrorKind::NotFound);
        assert_eq!(store.stats().corrupt_blocks, 2);
    });
}
