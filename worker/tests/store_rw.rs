//! Block store: write, read and verify across sizes and ranges; errors; reports; memory tier.

#[path = "store_common.rs"]
mod common;

use common::{config, get, pattern, put, run, scratch};
use cv_worker::store::{BlockStore, ErrorKind};

const SIZES: &[usize] = &[0, 1, 4095, 4096, 4097, 65535, 65536, 65537, 200_000, 256 << 10];

#[test]
fn write_read_verify_across_sizes_and_ranges() {
    let dir = scratch();
    run(|| async move {
        let store = BlockStore::open(config(dir.path(), 8 << 20)).await.unwrap();
        for (i, &len) in SIZES.iter().enumerate() {
            let id = 100 + i as u64;
            let data = pattern(id, len);
            let st = put(&store, id, &data, false).await;
            assert_eq!(st.len, len as u64);
            assert_eq!(st.disk_offset % 4096, 0);
            assert_eq!(get(&store, id).await, data, "block of {len} bytes");
            // Ranges at odd offsets, across chunk boundaries, and at the very end.
            for &(off, n) in &[(1usize, 1usize), (4095, 2), (65535, 3), (1000, 70_000), (len.saturating_sub(1), 1)] {
                if off + n > len {
                    continue;
                }
                let got = store.read(id, off as u64, n as u64).await.unwrap();
                assert_eq!(got.len(), n);
                assert_eq!(got.to_vec(), &data[off..off + n], "len {len} range {off}+{n}");
                assert_eq!(got.crc32(), crc32fast::hash(&data[off..off + n]), "crc of len {len} range {off}+{n}");
            }
            // Whole chunks (combined from the verified chunk crcs) and chunk-aligned ranges.
            for &(off, n) in &[(0usize, len), (0, 65536), (65536, 65536), (65536, len.saturating_sub(65536))] {
                if off + n > len {
                    continue;
                }
                let got = store.read(id, off as u64, n as u64).await.unwrap();
                assert_eq!(got.crc32(), crc32fast::hash(&data[off..off + n]), "crc of len {len} range {off}+{n}");
            }
        }
        let empty = store.read(100, 0, 0).await.unwrap();
        assert!(empty.is_empty());
        assert_eq!(store.usage().blocks, SIZES.len() as u64);
    });
}

#[test]
fn single_disk_read_is_one_contiguous_view() {
    let dir = scratch();
    run(|| async move {
        let store = BlockStore::open(config(dir.path(), 4 << 20)).await.unwrap();
        let data = pattern(1, 200_000);
        put(&store, 1, &data, false).await;
        let got = store.read(1, 10, 150_000).await.unwrap();
        assert_eq!(got.as_contiguous(), Some(&data[10..150_010]));
    });
}

#[test]
fn bad_requests_are_typed_errors() {
    let dir = scratch();
    run(|| async move {
        let store = BlockStore::open(config(dir.path(), 4 << 20)).await.unwrap();
        let err = store.read(9, 0, 1).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::NotFound);
        assert!(!err.retryable());

        // A range reaching past the end is cut there; an offset past the end is refused.
        put(&store, 9, &pattern(9, 5000), false).await;
        assert_eq!(store.read(9, 4000, 1001).await.unwrap().to_vec(), &pattern(9, 5000)[4000..]);
        assert!(store.read(9, 5000, 1).await.unwrap().is_empty());
        let err = store.read(9, 5001, 1).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument);
        assert!(err.to_string().contains("block 9"), "{err}");
        let err = store.read(9, u64::MAX, 2).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument);

        let err = store.begin_write(10, (256 << 10) + 1, false).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument);

        let mut w = store.begin_write(11, 10, false).await.unwrap();
        let err = store.begin_write(11, 10, false).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Busy);
        assert!(err.retryable());
        let err = w.append(&[0u8; 11]).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument);
        w.append(&[1u8; 10]).await.unwrap();
        w.commit().await.unwrap();
        assert_eq!(get(&store, 11).await, vec![1u8; 10]);
    });
}

#[test]
fn uncommitted_block_is_invisible_and_abort_frees_space() {
    let dir = scratch();
    run(|| async move {
        let store = BlockStore::open(config(dir.path(), 4 << 20)).await.unwrap();
        let before = store.usage().used_bytes;
        let mut w = store.begin_write(5, 100_000, false).await.unwrap();
        w.append(&pattern(5, 100_000)).await.unwrap();
        assert_eq!(store.read(5, 0, 1).await.unwrap_err().kind(), ErrorKind::NotFound);
        assert_eq!(store.lookup(5).unwrap_err().kind(), ErrorKind::NotFound);
        assert!(store.usage().used_bytes > before);
        w.abort();
        assert_eq!(store.usage().used_bytes, before);
        // A short commit gives back the unused tail of the extent.
        let mut w = store.begin_write(6, 200_000, false).await.unwrap();
        w.append(&pattern(6, 5000)).await.unwrap();
        let st = w.commit().await.unwrap();
        assert_eq!(st.len, 5000);
        assert_eq!(store.usage().used_bytes, before + 8192);
        assert_eq!(get(&store, 6).await, pattern(6, 5000));
    });
}

#[test]
fn a_committed_block_is_never_overwritten_delete_removes_and_reports_deltas() {
    let dir = scratch();
    let path = dir.path().to_path_buf();
    let again_path = path.clone();
    run(|| async move {
        let store = BlockStore::open(config(&path, 4 << 20)).await.unwrap();
        let first = put(&store, 1, &pattern(1, 70_000), false).await;
        put(&store, 2, &pattern(2, 1000), false).await;
        let r = store.drain_report();
        assert_eq!((r.added, r.removed), (vec![1, 2], vec![]));

        // The same bytes again (a writer retrying after a lost answer) are the committed block.
        let again = put(&store, 1, &pattern(1, 70_000), false).await;
        assert_eq!((again.len, again.disk_offset), (first.len, first.disk_offset));
        // Other bytes are refused: another length at once, the same length at the commit.
        let Err(e) = store.begin_write(1, 3000, false).await else { panic!("another length is accepted") };
        assert_eq!(e.kind(), ErrorKind::Committed, "{e}");
        let mut w = store.begin_write(1, 70_000, true).await.unwrap();
        w.append(&pattern(77, 70_000)).await.unwrap();
        let e = w.commit().await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Committed, "{e}");
        assert!(e.to_string().contains("never overwritten"), "{e}");
        assert_eq!(get(&store, 1).await, pattern(1, 70_000));
        let (stat, _) = store.lease(1, std::time::Duration::ZERO).unwrap();
        assert!(!stat.pinned, "a refused write changed the pin");

        assert!(store.delete(2).await.unwrap());
        assert!(!store.delete(2).await.unwrap());
        assert_eq!(store.read(2, 0, 1).await.unwrap_err().kind(), ErrorKind::NotFound);
        let r = store.drain_report();
        assert_eq!((r.added, r.removed), (vec![], vec![2]));
        assert_eq!(store.block_ids(), vec![1]);
        // Neither the twin nor the refused writes hold space.
        assert_eq!(store.usage().used_bytes, 70_000u64.div_ceil(4096) * 4096);
    });
    // Nor does a restart bring anything else back.
    run(|| async move {
        let store = BlockStore::open(config(&again_path, 4 << 20)).await.unwrap();
        assert_eq!(get(&store, 1).await, pattern(1, 70_000));
    });
}

#[test]
fn memory_tier_counts_hits_after_second_touch() {
    let dir = scratch();
    run(|| async move {
        let store = BlockStore::open(config(dir.path(), 4 << 20)).await.unwrap();
        let data = pattern(3, 100_000); // two chunks: 64 KiB + 34464 B
        put(&store, 3, &data, false).await;
        let s0 = store.stats().memory;
        assert_eq!((s0.hits, s0.misses, s0.bytes_used), (0, 0, 0));
        // First read: both chunks miss and are only remembered.
        assert_eq!(store.read(3, 0, 100_000).await.unwrap().to_vec(), data);
        let s1 = store.stats().memory;
        assert_eq!((s1.hits, s1.misses, s1.bytes_used), (0, 2, 0));
        assert!(!store.in_memory(&store.lookup(3).unwrap()), "remembered is not resident");
        // Second read: misses again, now admitted.
        store.read(3, 0, 100_000).await.unwrap();
        let s2 = store.stats().memory;
        assert_eq!((s2.hits, s2.misses, s2.bytes_used), (0, 4, 100_000));
        // Third read: served from memory, same bytes, including a range across both chunks.
        let got = store.read(3, 65_000, 2000).await.unwrap();
        assert_eq!(got.to_vec(), &data[65_000..67_000]);
        assert!(got.as_contiguous().is_none(), "two memory chunks are two pieces");
        assert_eq!(got.crc32(), crc32fast::hash(&data[65_000..67_000]));
        let s3 = store.stats().memory;
        assert_eq!((s3.hits, s3.misses), (2, 4));
        assert!(store.in_memory(&store.lookup(3).unwrap()));
        assert_eq!(store.stats().disk.hits, 3);
        assert_eq!(store.stats().memory.hits, 2, "a stat is not a read");
        // The same bytes written again are the committed block: still in memory.
        put(&store, 3, &data, false).await;
        assert!(store.in_memory(&store.lookup(3).unwrap()));
        // Deleting the block drops its chunks from memory; written again it is a new
        // incarnation, none of it in memory until read twice.
        store.delete(3).await.unwrap();
        assert_eq!(store.stats().memory.bytes_used, 0, "the old incarnation's chunks went with it");
        put(&store, 3, &data, false).await;
        assert!(!store.in_memory(&store.lookup(3).unwrap()));
        assert_eq!(store.read(3, 0, 100_000).await.unwrap().to_vec(), data);
        store.read(3, 0, 100_000).await.unwrap();
        assert!(store.in_memory(&store.lookup(3).unwrap()));
    });
}

/// O_DIRECT as the kernel reports it for an open descriptor, by path suffix.
fn open_with_o_direct(suffix: &str) -> Vec<bool> {
    #[cfg(target_arch = "aarch64")]
    const O_DIRECT: u32 = 0o200000;
    #[cfg(not(target_arch = "aarch64"))]
    const O_DIRECT: u32 = 0o40000;
    let mut out = Vec::new();
    for fd in std::fs::read_dir("/proc/self/fd").unwrap().flatten() {
        let Ok(target) = std::fs::read_link(fd.path()) else { continue };
        if !target.to_string_lossy().ends_with(suffix) {
            continue;
        }
        let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{}", fd.file_name().to_string_lossy()));
        let Ok(info) = info else { continue };
        let flags = info.lines().find_map(|l| l.strip_prefix("flags:")).unwrap().trim();
        out.push(u32::from_str_radix(flags, 8).unwrap() & O_DIRECT != 0);
    }
    out
}

#[test]
fn data_files_are_really_opened_with_o_direct() {
    let dir = scratch();
    let suffix = format!("{}/blocks.data", dir.path().file_name().unwrap().to_string_lossy());
    run(|| async move {
        let store = BlockStore::open(config(dir.path(), 1 << 20)).await.unwrap();
        put(&store, 1, &pattern(1, 5000), false).await;
        assert_eq!(get(&store, 1).await, pattern(1, 5000));
        assert_eq!(open_with_o_direct(&suffix), vec![true]);
    });
}

#[test]
fn concurrent_writers_and_readers_on_one_executor() {
    let dir = scratch();
    run(|| async move {
        let store = BlockStore::open(config(dir.path(), 8 << 20)).await.unwrap();
        let mut tasks = Vec::new();
        for t in 0..8u64 {
            let store = store.clone();
            tasks.push(cv_rt::spawn_local(async move {
                for i in 0..6u64 {
                    let id = t * 100 + i;
                    let data = pattern(id, 10_000 * (i as usize + 1));
                    put(&store, id, &data, i % 3 == 0).await;
                    // Interleave reads of this task's and other tasks' blocks.
                    assert_eq!(get(&store, id).await, data);
                    if i % 2 == 1 {
                        store.delete(id - 1).await.unwrap();
                    }
                }
            }));
        }
        for t in tasks {
            t.await;
        }
        assert_eq!(store.usage().blocks, 8 * 3);
        for t in 0..8u64 {
            for i in [1u64, 3, 5] {
                let id = t * 100 + i;
                assert_eq!(get(&store, id).await, pattern(id, 10_000 * (i as usize + 1)));
            }
        }
    });
}

#[test]
fn the_data_file_system_asks_for_no_more_than_the_stores_o_direct_alignment() {
    // ext4, xfs and btrfs report it (Linux 6.1+; ext4 here says 512/512); the store opens
    // files only when it is within 4 KiB.
    let dir = scratch();
    let path = dir.path().join("f");
    std::fs::write(&path, [0u8; 4096]).unwrap();
    let f = cv_rt::fs::RingFile::open_direct(&path, false).unwrap();
    if let Some((mem, offset)) = f.direct_io_alignment().unwrap() {
        assert!(mem.is_power_of_two() && offset.is_power_of_two(), "{mem} {offset}");
        assert!(mem as usize <= cv_rt::BUF_ALIGN && offset as usize <= cv_rt::BUF_ALIGN, "{mem} {offset}");
    }
}
