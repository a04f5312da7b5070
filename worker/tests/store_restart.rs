//! Block store: warm restart, crash mid-write, torn index tail, a damaged index refused,
//! compaction, v1 fixture.

#[path = "store_common.rs"]
mod common;

use std::path::Path;

use common::{config, get, pattern, put, run, scratch};
use cv_worker::store::format::{BlockRecord, IndexRecord, decode_index, encode_index_header, encode_record};
use cv_worker::store::{BlockStore, ErrorKind, RecordFault};

#[test]
fn restart_keeps_blocks_pins_and_free_space() {
    let dir = scratch();
    let mut cfg = config(dir.path(), 4 << 20);
    cfg.sync_data = true; // the production path: data fdatasync before the index record
    let c = cfg.clone();
    run(|| async move {
        let store = BlockStore::open(c).await.unwrap();
        put(&store, 1, &pattern(1, 100_000), false).await;
        put(&store, 2, &pattern(2, 4096), true).await;
        put(&store, 3, &pattern(3, 0), false).await;
        put(&store, 4, &pattern(4, 50), false).await;
        store.delete(4).await.unwrap();
        store.set_pinned(1, true).await.unwrap();
        store.set_pinned(2, false).await.unwrap();
        store.close().await.unwrap();
    });
    let c = cfg.clone();
    run(|| async move {
        let store = BlockStore::open(c).await.unwrap();
        assert_eq!(store.block_ids(), vec![1, 2, 3]);
        assert_eq!(get(&store, 1).await, pattern(1, 100_000));
        assert_eq!(get(&store, 2).await, pattern(2, 4096));
        assert_eq!(store.lookup(3).unwrap().len(), 0);
        assert!(store.lookup(1).unwrap().pinned());
        assert!(!store.lookup(2).unwrap().pinned());
        let u = store.usage();
        assert_eq!(u.used_bytes, 102_400 + 4096);
        assert_eq!(u.pinned_bytes, 102_400);
        // Space of block 4 is free again: a new block does not overlap a live one.
        let s5 = put(&store, 5, &pattern(5, 8192), false).await;
        let s1 = store.lookup(1).unwrap().stat();
        assert!(s5.disk_offset >= s1.disk_offset + 102_400 || s5.disk_offset + 8192 <= s1.disk_offset);
        assert_eq!(get(&store, 1).await, pattern(1, 100_000));
        assert!(store.drain_report().added == vec![5], "a reopen reports no old blocks as new");
    });
}

#[test]
fn crash_mid_write_leaves_no_half_block() {
    let dir = scratch();
    let cfg = config(dir.path(), 4 << 20);
    let c = cfg.clone();
    run(|| async move {
        let store = BlockStore::open(c).await.unwrap();
        put(&store, 1, &pattern(1, 70_000), false).await;
        let mut w = store.begin_write(2, 200_000, false).await.unwrap();
        w.append(&pattern(2, 150_000)).await.unwrap();
        // The executor ends with the writer neither committed nor aborted: a crash.
        std::mem::forget(w);
    });
    let c = cfg.clone();
    run(|| async move {
        let store = BlockStore::open(c).await.unwrap();
        assert_eq!(store.block_ids(), vec![1]);
        assert_eq!(store.read(2, 0, 1).await.unwrap_err().kind(), ErrorKind::NotFound);
        assert_eq!(store.usage().used_bytes, 73_728, "the half block's extent is free");
        assert_eq!(get(&store, 1).await, pattern(1, 70_000));
    });
}

#[test]
fn torn_index_tail_is_cut_and_earlier_blocks_survive() {
    let dir = scratch();
    let cfg = config(dir.path(), 4 << 20);
    let index = dir.path().join("blocks.index");
    let c = cfg.clone();
    run(|| async move {
        let store = BlockStore::open(c).await.unwrap();
        put(&store, 1, &pattern(1, 5000), false).await;
        put(&store, 2, &pattern(2, 5000), false).await;
    });
    // Cut the last record in half, as a crash during its write would.
    let len = std::fs::metadata(&index).unwrap().len();
    let f = std::fs::OpenOptions::new().write(true).open(&index).unwrap();
    f.set_len(len - 10).unwrap();
    drop(f);
    let c = cfg.clone();
    run(|| async move {
        let store = BlockStore::open(c).await.unwrap();
        assert_eq!(store.block_ids(), vec![1]);
        assert_eq!(get(&store, 1).await, pattern(1, 5000));
        put(&store, 3, &pattern(3, 5000), false).await;
    });
    let valid = decode_index(&std::fs::read(&index).unwrap()).unwrap();
    assert_eq!(valid.valid_len, std::fs::metadata(&index).unwrap().len(), "tail was truncated");
    let c = cfg.clone();
    run(|| async move {
        let store = BlockStore::open(c).await.unwrap();
        assert_eq!(store.block_ids(), vec![1, 3]);
        assert_eq!(get(&store, 3).await, pattern(3, 5000));
    });
}

/// Byte offsets of the records of an index log (walking the frames' length fields).
fn record_offsets(bytes: &[u8]) -> Vec<usize> {
    let mut at = 28;
    let mut out = Vec::new();
    while at + 8 <= bytes.len() {
        out.push(at);
        at += 8 + u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
    }
    out
}

fn flip(path: &Path, at: usize) {
    let mut bytes = std::fs::read(path).unwrap();
    bytes[at] ^= 0x40;
    std::fs::write(path, bytes).unwrap();
}

/// Blocks 1, 2, 3 committed, block 2 pinned then block 1 removed: ADD ADD ADD PIN REMOVE.
fn five_records(cfg: &cv_worker::store::StoreConfig) {
    let c = cfg.clone();
    run(|| async move {
        let store = BlockStore::open(c).await.unwrap();
        for id in 1..4 {
            put(&store, id, &pattern(id, 5000), false).await;
        }
        store.set_pinned(2, true).await.unwrap();
        store.delete(1).await.unwrap();
        store.close().await.unwrap();
    });
}

#[test]
fn damaged_record_mid_index_refuses_to_open_and_keeps_the_file() {
    let dir = scratch();
    let cfg = config(dir.path(), 4 << 20);
    let index = dir.path().join("blocks.index");
    five_records(&cfg);
    let offsets = record_offsets(&std::fs::read(&index).unwrap());
    assert_eq!(offsets.len(), 5);
    // A byte of block 2's ADD, with its PIN and block 1's REMOVE after it: cutting there would
    // bring block 1 back and lose blocks 2 and 3 (and hand their extents out again).
    flip(&index, offsets[1] + 8 + 3);
    let damaged = std::fs::read(&index).unwrap();
    let c = cfg.clone();
    let (index_at, offsets_at) = (&index, &offsets);
    run(|| async move {
        let err = BlockStore::open(c).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Damaged, "{err}");
        assert!(!err.retryable());
        let d = err.index_damage().expect("names the damage");
        assert_eq!(d.file.as_deref(), Some(index_at.as_path()));
        assert_eq!(d.offset, offsets_at[1] as u64);
        assert!(matches!(d.fault, RecordFault::BadCrc { .. }), "{:?}", d.fault);
        assert_eq!(d.next_intact, Some(offsets_at[2] as u64));
        let text = err.to_string();
        let (file, at) = (index_at.display().to_string(), format!("byte {}", offsets_at[1]));
        assert!(text.contains(&file) && text.contains(&at), "{text}");
    });
    assert_eq!(std::fs::read(&index).unwrap(), damaged, "a damaged index is left as it is");
    // A damaged length field alike: the length no longer leads to the next record.
    flip(&index, offsets[1] + 8 + 3);
    flip(&index, offsets[3] + 1);
    let c = cfg.clone();
    let offsets_at = &offsets;
    run(|| async move {
        let err = BlockStore::open(c).await.unwrap_err();
        let d = err.index_damage().expect("names the damage");
        assert_eq!((d.offset, d.next_intact), (offsets_at[3] as u64, Some(offsets_at[4] as u64)), "{err}");
    });
    // The operator's step (STORE-FORMAT.md): the index moved aside, the shard starts empty.
    std::fs::rename(&index, dir.path().join("blocks.index.damaged")).unwrap();
    let c = cfg.clone();
    run(|| async move {
        let store = BlockStore::open(c).await.unwrap();
        assert!(store.block_ids().is_empty());
        assert_eq!(store.usage().used_bytes, 0);
        put(&store, 7, &pattern(7, 5000), false).await;
        assert_eq!(get(&store, 7).await, pattern(7, 5000));
    });
}

#[test]
fn flipped_byte_in_the_last_record_is_cut_as_torn() {
    let dir = scratch();
    let cfg = config(dir.path(), 4 << 20);
    let index = dir.path().join("blocks.index");
    five_records(&cfg);
    let offsets = record_offsets(&std::fs::read(&index).unwrap());
    // Block 1's REMOVE, the last record, with nothing after it: what a torn append leaves.
    flip(&index, offsets[4] + 8 + 2);
    let c = cfg.clone();
    run(|| async move {
        let store = BlockStore::open(c).await.unwrap();
        assert_eq!(store.block_ids(), vec![1, 2, 3], "the unacknowledged REMOVE is cut");
        assert!(store.lookup(2).unwrap().pinned());
        assert_eq!(get(&store, 3).await, pattern(3, 5000));
    });
    assert_eq!(std::fs::metadata(&index).unwrap().len(), offsets[4] as u64, "cut at the torn record");
}

#[test]
fn index_log_is_compacted_and_stays_correct() {
    let dir = scratch();
    let mut cfg = config(dir.path(), 4 << 20);
    cfg.index_compact_bytes = 4096;
    let index = dir.path().join("blocks.index");
    let c = cfg.clone();
    run(|| async move {
        let store = BlockStore::open(c).await.unwrap();
        for round in 0..40u64 {
            store.delete(round % 5).await.unwrap();
            put(&store, round % 5, &pattern(round, 3000), false).await;
        }
        store.delete(0).await.unwrap();
    });
    let size = std::fs::metadata(&index).unwrap().len();
    assert!(size < 8192, "index log of {size} bytes was never compacted");
    let c = cfg.clone();
    run(|| async move {
        let store = BlockStore::open(c).await.unwrap();
        assert_eq!(store.block_ids(), vec![1, 2, 3, 4]);
        for id in 1..5u64 {
            assert_eq!(get(&store, id).await, pattern(35 + id, 3000));
        }
        assert_eq!(store.usage().used_bytes, 4 * 4096);
    });
}

#[test]
fn data_file_of_another_store_is_refused() {
    let a = scratch();
    let b = scratch();
    run(|| async move {
        let sa = BlockStore::open(config(a.path(), 1 << 20)).await.unwrap();
        put(&sa, 1, b"x", false).await;
        sa.close().await.unwrap();
        let sb = BlockStore::open(config(b.path(), 1 << 20)).await.unwrap();
        sb.close().await.unwrap();
        std::fs::copy(b.path().join("blocks.index"), a.path().join("blocks.index")).unwrap();
        let err = BlockStore::open(config(a.path(), 1 << 20)).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Incompatible);
    });
}

/// The records of `tests/fixtures/store_index_v1.cvidx`.
fn fixture_records() -> Vec<IndexRecord> {
    vec![
        IndexRecord::Add(BlockRecord {
            block_id: 7,
            dir: 0,
            offset: 4096,
            len: 70_000,
            alloc_len: 73_728,
            pinned: false,
            chunk_size: 65_536,
            crcs: vec![0x1122_3344, 0x5566_7788],
        }),
        IndexRecord::Add(BlockRecord {
            block_id: 9,
            dir: 0,
            offset: 77_824,
            len: 1,
            alloc_len: 4096,
            pinned: true,
            chunk_size: 65_536,
            crcs: vec![0xE8B7_BE43],
        }),
        IndexRecord::Pin { block_id: 9, pinned: false },
        IndexRecord::Remove { block_id: 7 },
    ]
}

const FIXTURE_STORE_ID: u64 = 0x0123_4567_89AB_CDEF;

fn fixture_path() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/store_index_v1.cvidx"))
}

fn encode_fixture() -> Vec<u8> {
    let mut log = encode_index_header(FIXTURE_STORE_ID).to_vec();
    for r in fixture_records() {
        encode_record(&r, &mut log);
    }
    log
}

#[test]
fn v1_fixture_decodes_and_encoding_is_stable() {
    if std::env::var_os("CV_REGEN_FIXTURES").is_some() {
        std::fs::write(fixture_path(), encode_fixture()).unwrap();
    }
    let bytes = std::fs::read(fixture_path()).expect("fixture present");
    assert_eq!(&bytes[..8], b"CVINDEX\0");
    let d = decode_index(&bytes).unwrap();
    assert_eq!(d.store_id, FIXTURE_STORE_ID);
    assert_eq!(d.valid_len, bytes.len() as u64);
    assert_eq!(d.records, fixture_records());
    assert_eq!(bytes, encode_fixture(), "the v1 encoding changed: bump the version");
}

#[test]
fn v1_fixture_opens_as_a_store_index() {
    let dir = scratch();
    // The fixture's block 9 lives in a data file that does not exist here: the store opens,
    // starts that data file empty, and drops the entry instead of serving garbage.
    std::fs::copy(fixture_path(), dir.path().join("blocks.index")).unwrap();
    let cfg = config(dir.path(), 1 << 20);
    run(|| async move {
        let store = BlockStore::open(cfg).await.unwrap();
        assert!(store.block_ids().is_empty());
        assert_eq!(store.read(9, 0, 1).await.unwrap_err().kind(), ErrorKind::NotFound);
    });
}
