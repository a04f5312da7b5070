//! Format fixtures checked in under tests/fixtures/: every future build must keep reading
//! them. The v1, v2 and v3 files were written by those builds and are never rewritten; the v4
//! files are (re)written with CV_WRITE_FIXTURES=1, only when deliberately adding a new fixture.

use std::path::PathBuf;

use cv_master_core::journal::{decode_snapshot, encode_header, encode_record, encode_snapshot, scan};
use cv_master_core::state::{MountMode, Mutation, Revocation, State, UfsObject};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

/// One of every mutation kind, in an order that applies cleanly.
fn mutations() -> Vec<Mutation> {
    let s = |x: &str| x.to_owned();
    vec![
        Mutation::RegisterWorker {
            worker_id: 1,
            host: s("10.0.0.7"),
            shard_ports: vec![7001, 7002],
            capacity: 1 << 40,
            now: 1_700_000_000_000,
            zone: String::new(),
        },
        Mutation::Mkdir { path: s("/warehouse/t1"), parents: true, mode: 0o755, mtime: 1_700_000_000_001 },
        Mutation::Create {
            path: s("/warehouse/t1/part-0.parquet"),
            overwrite: false,
            file_id: 4,
            version: 1,
            mode: 0o644,
            mtime: 1_700_000_000_002,
            request_id: 0,
        },
        Mutation::AddBlock { file_id: 4, block_id: 1, worker: 1, shard: 1, replicas: vec![] },
        Mutation::Complete { file_id: 4, length: 1234, block_lens: vec![1234], mtime: 1_700_000_000_003 },
        Mutation::Mount {
            path: s("/warehouse"),
            ufs_url: s("s3://bucket/wh"),
            mode: MountMode::Cache,
            options: vec![(s("region"), s("us-east-1"))].into(),
        },
        Mutation::Heartbeat {
            worker_id: 1,
            now: 1_700_000_001_000,
            capacity: 1 << 40,
            used: 1234,
            added: vec![1],
            removed: vec![],
        },
        Mutation::Rename { src: s("/warehouse/t1"), dst: s("/warehouse/t2"), mtime: 1_700_000_001_001 },
        Mutation::Delete { path: s("/warehouse/t2/part-0.parquet"), recursive: false, mtime: 1_700_000_001_002 },
        Mutation::Unmount { path: s("/warehouse") },
        Mutation::WorkersLost { worker_ids: vec![1], now: 1_700_000_099_000 },
    ]
}

fn expected_state() -> State {
    let mut st = State::new();
    for m in mutations() {
        st.apply(&m).unwrap();
    }
    st
}

#[test]
fn reads_v1_journal_fixture() {
    let path = fixture("journal-v1.bin");
    let bytes = std::fs::read(&path).expect("fixture journal-v1.bin is checked in");
    let scan = scan(&bytes).unwrap();
    assert_eq!((scan.first_seq, scan.cut), (1, 0));
    let got: Vec<Mutation> = scan.records.iter().map(|(_, m)| m.clone()).collect();
    assert_eq!(got, mutations());
    let mut st = State::new();
    for (_, m) in &scan.records {
        st.apply(m).unwrap();
    }
    assert_eq!(st.data(), expected_state().data());
    // The delete after the heartbeat left block 1 queued for worker 1.
    assert_eq!(st.pending_deletes(1), vec![1]);
    assert!(!st.worker(1).unwrap().live);
}

#[test]
fn reads_v1_snapshot_fixture() {
    let path = fixture("snapshot-v1.bin");
    let bytes = std::fs::read(&path).expect("fixture snapshot-v1.bin is checked in");
    let (seq, data) = decode_snapshot(&bytes).unwrap().unwrap();
    assert_eq!(seq, 11);
    assert_eq!(&data, expected_state().data());
}

/// v2: the v1 history (its final WorkersLost last) with the object-storage mutations.
fn mutations_v2() -> Vec<Mutation> {
    let s = |x: &str| x.to_owned();
    let mut v = mutations();
    let lost = v.pop().unwrap();
    let object = UfsObject { mount: s("/lake"), key: s("t/a.parquet"), version: s("\"etag-1\"") };
    v.extend([
        Mutation::Mount {
            path: s("/lake"),
            ufs_url: s("s3://bucket/lake"),
            mode: MountMode::Cache,
            options: vec![(s("secret_access_key"), s("k"))].into(),
        },
        Mutation::UfsFile {
            path: s("/lake/t/a.parquet"),
            object: object.clone(),
            length: 10 << 20,
            block_size: 4 << 20,
            placement: vec![(1, 0), (1, 1), (1, 0)],
            mtime: 1_700_000_002_000,
        },
        Mutation::Free { path: s("/lake") },
        Mutation::Exported { file_id: 7, version: 2, object: UfsObject { version: s("\"etag-2\""), ..object } },
        lost,
    ]);
    v
}

fn expected_state_v2() -> State {
    let mut st = State::new();
    for m in mutations_v2() {
        st.apply(&m).unwrap();
    }
    st
}

#[test]
fn reads_v2_journal_fixture() {
    let path = fixture("journal-v2.bin");
    let bytes = std::fs::read(&path).expect("fixture journal-v2.bin is checked in");
    let scan = scan(&bytes).unwrap();
    let got: Vec<Mutation> = scan.records.iter().map(|(_, m)| m.clone()).collect();
    assert_eq!(got, mutations_v2());
    let mut st = State::new();
    for (_, m) in &scan.records {
        st.apply(m).unwrap();
    }
    assert_eq!(st.data(), expected_state_v2().data());
    assert_eq!(st.data().ufs_files.len(), 1);
}

#[test]
fn reads_v2_snapshot_fixture() {
    let path = fixture("snapshot-v2.bin");
    let n = mutations_v2().len() as u64;
    let bytes = std::fs::read(&path).expect("fixture snapshot-v2.bin is checked in");
    let (seq, data) = decode_snapshot(&bytes).unwrap().unwrap();
    assert_eq!(seq, n);
    assert_eq!(&data, expected_state_v2().data());
}

/// Version 3 adds the queue of object deletes: `Remove`, `RenameObjects`, `ObjectsDeleted`, `ObjectsQueued`.
fn mutations_v3() -> Vec<Mutation> {
    let s = |x: &str| x.to_owned();
    let mut v = mutations_v2();
    let lost = v.pop().unwrap();
    let object = |key: &str| UfsObject { mount: s("/lake"), key: s(key), version: s("\"etag-3\"") };
    v.extend([
        Mutation::ObjectsQueued { mount: s("/lake"), keys: vec![s("t/b.parquet")] },
        Mutation::RenameObjects {
            src: s("/lake/t/a.parquet"),
            dst: s("/lake/t/b.parquet"),
            mtime: 1_700_000_003_000,
            objects: vec![(7, 2, object("t/b.parquet"))],
        },
        Mutation::Remove { path: s("/lake/t/b.parquet"), recursive: false, mtime: 1_700_000_003_001 },
        Mutation::ObjectsDeleted { mount: s("/lake"), keys: vec![s("t/a.parquet")] },
        Mutation::ObjectsQueued { mount: s("/lake"), keys: vec![s("t/c.parquet")] },
        lost,
    ]);
    v
}

fn expected_state_v3() -> State {
    let mut st = State::new();
    for m in mutations_v3() {
        st.apply(&m).unwrap();
    }
    st
}

#[test]
fn reads_v3_journal_fixture() {
    let path = fixture("journal-v3.bin");
    let bytes = std::fs::read(&path).expect("fixture journal-v3.bin is checked in");
    let scan = scan(&bytes).unwrap();
    let got: Vec<Mutation> = scan.records.iter().map(|(_, m)| m.clone()).collect();
    assert_eq!(got, mutations_v3());
    let mut st = State::new();
    for (_, m) in &scan.records {
        st.apply(m).unwrap();
    }
    assert_eq!(st.data(), expected_state_v3().data());
    let queued = vec!["t/b.parquet".to_owned(), "t/c.parquet".to_owned()];
    assert_eq!(st.queued_object_deletes(), vec![("/lake".to_owned(), queued)]);
}

#[test]
fn reads_v3_snapshot_fixture() {
    let path = fixture("snapshot-v3.bin");
    let n = mutations_v3().len() as u64;
    let bytes = std::fs::read(&path).expect("fixture snapshot-v3.bin is checked in");
    let (seq, data) = decode_snapshot(&bytes).unwrap().unwrap();
    assert_eq!(seq, n);
    assert_eq!(&data, expected_state_v3().data());
}

/// Version 4 adds replicas, zones, drains and creates that survive a restart:
/// `AddBlock.replicas`, `RegisterWorker.zone`, `Create.request_id`, `CopiesAdded`,
/// `CopiesDropped`, `CopiesMissing`, `ReplaceBlock`, `Drain`.
fn mutations_v4() -> Vec<Mutation> {
    let s = |x: &str| x.to_owned();
    let mut v = mutations_v3();
    let lost = v.pop().unwrap();
    let worker = |id: u64, host: &str, zone: &str| Mutation::RegisterWorker {
        worker_id: id,
        host: s(host),
        shard_ports: vec![7001],
        capacity: 1 << 40,
        now: 1_700_000_004_000,
        zone: s(zone),
    };
    let block = 1 << 20;
    v.extend([
        worker(2, "10.0.0.8", "rack-b"),
        worker(3, "10.0.0.9", "rack-c"),
        Mutation::Mkdir { path: s("/r"), parents: false, mode: 0o755, mtime: 1_700_000_004_001 },
        Mutation::Create {
            path: s("/r/x.bin"),
            overwrite: false,
            file_id: 20,
            version: 9,
            mode: 0o644,
            mtime: 1_700_000_004_002,
            request_id: 77,
        },
        Mutation::Create {
            path: s("/r/y.bin"),
            overwrite: false,
            file_id: 21,
            version: 10,
            mode: 0o644,
            mtime: 1_700_000_004_002,
            request_id: 78,
        },
        Mutation::AddBlock { file_id: 20, block_id: block, worker: 1, shard: 0, replicas: vec![2] },
        Mutation::Complete { file_id: 20, length: 100, block_lens: vec![100], mtime: 1_700_000_004_003 },
        Mutation::CopiesAdded { worker_id: 3, blocks: vec![block] },
        Mutation::CopiesDropped { copies: vec![(block, 1)] },
        Mutation::CopiesAdded { worker_id: 1, blocks: vec![block] },
        Mutation::CopiesMissing { worker_id: 1, blocks: vec![block] },
        Mutation::AddBlock { file_id: 21, block_id: block + 1, worker: 2, shard: 0, replicas: vec![3] },
        Mutation::ReplaceBlock { file_id: 21, index: 0, block_id: block + 2, worker: 3, shard: 0, replicas: vec![1] },
        Mutation::Drain { worker_id: 3, draining: true },
        lost,
    ]);
    v
}

fn expected_state_v4() -> State {
    let mut st = State::new();
    for m in mutations_v4() {
        st.apply(&m).unwrap();
    }
    st
}

#[test]
fn reads_v4_journal_fixture() {
    let path = fixture("journal-v4.bin");
    if std::env::var_os("CV_WRITE_FIXTURES").is_some() {
        let mut bytes = encode_header(1).to_vec();
        for (i, m) in mutations_v4().iter().enumerate() {
            bytes.extend(encode_record(i as u64 + 1, m).unwrap());
        }
        std::fs::write(&path, bytes).unwrap();
    }
    let bytes = std::fs::read(&path).expect("fixture journal-v4.bin is checked in");
    let scan = scan(&bytes).unwrap();
    let got: Vec<Mutation> = scan.records.iter().map(|(_, m)| m.clone()).collect();
    assert_eq!(got, mutations_v4());
    let mut st = State::new();
    for (_, m) in &scan.records {
        st.apply(m).unwrap();
    }
    assert_eq!(st.data(), expected_state_v4().data());
    // Worker 1's copy was dropped, made again (which takes back the delete it was to get) and
    // found missing from its full report: the block is on 2 and 3.
    let info = &st.data().blocks[&(1 << 20)];
    assert_eq!((info.worker, info.replicas.clone()), (2, vec![3]));
    assert!(!st.pending_deletes(1).contains(&(1 << 20)));
    assert!(st.worker(3).unwrap().draining);
    assert_eq!(st.worker(2).unwrap().zone, "rack-b");
    // y.bin's block was replaced: the new one is there, the old one's copies are told to go.
    assert!(!st.data().blocks.contains_key(&((1 << 20) + 1)));
    assert!(st.pending_deletes(2).contains(&((1 << 20) + 1)));
    assert_eq!(st.data().blocks[&((1 << 20) + 2)].replicas, vec![1]);
    // The completed file's create is forgotten; the one still being written is kept.
    assert_eq!(st.data().creates, std::collections::BTreeMap::from([(21, 78)]));
}

#[test]
fn reads_v4_snapshot_fixture() {
    let path = fixture("snapshot-v4.bin");
    let n = mutations_v4().len() as u64;
    // Frozen: this build writes format 5 (`snapshot-v5.bin`).
    let bytes = std::fs::read(&path).expect("fixture snapshot-v4.bin is checked in");
    let (seq, data) = decode_snapshot(&bytes).unwrap().unwrap();
    assert_eq!(seq, n);
    assert_eq!(&data, expected_state_v4().data());
}

/// The records of `tails-v1.bin`.
fn tails_v1() -> Vec<cv_master_core::tail_file::TailRecord> {
    use cv_master_core::tail_file::TailRecord;
    vec![
        TailRecord::Tail {
            file_id: 5,
            version: 2,
            offset: 4096,
            main: false,
            bytes: b"\x15\x00footer PAR1"[..].into(),
        },
        TailRecord::Tail { file_id: 9, version: 7, offset: 0, main: true, bytes: vec![0xAB; 300].into() },
        TailRecord::Fresh { path: "/lake/t/part-0.parquet".into(), checked_at_ms: 1_796_000_000_000 },
        TailRecord::Fresh { path: "/lake/t".into(), checked_at_ms: 1_796_000_000_123 },
    ]
}

#[test]
fn reads_v1_tails_fixture() {
    use cv_master_core::tail_file::{Decoded, decode, encode};
    let path = fixture("tails-v1.bin");
    if std::env::var_os("CV_WRITE_FIXTURES").is_some() {
        std::fs::write(&path, encode(&tails_v1())).unwrap();
    }
    let bytes = std::fs::read(&path).expect("fixture tails-v1.bin is checked in");
    assert_eq!(&bytes[..8], b"CVTAILS\0");
    assert_eq!(decode(&bytes).unwrap(), Decoded { records: tails_v1(), damaged_at: None });
}

#[test]
fn a_shared_copy_record_round_trips_beside_the_v4_records() {
    let m = Mutation::UfsFileShared {
        path: "/b/t/f.parquet".into(),
        object: UfsObject { mount: "/b".into(), key: "t/f.parquet".into(), version: "\"e1\"".into() },
        length: 10 << 20,
        mtime: 5,
        shares: 42,
    };
    let mut bytes = encode_header(1).to_vec();
    bytes.extend(encode_record(1, &mutations_v4()[0]).unwrap());
    bytes.extend(encode_record(2, &m).unwrap());
    let got: Vec<Mutation> = scan(&bytes).unwrap().records.into_iter().map(|(_, m)| m).collect();
    assert_eq!(got, vec![mutations_v4()[0].clone(), m]);
}

/// The records of atomic replace decode beside the v4 records, and a `Create` with
/// `overwrite` written before them still replaces at once when replayed.
#[test]
fn replace_records_round_trip_and_an_older_overwrite_replays_as_before() {
    use cv_master_core::state::Expect;
    let new = vec![
        Mutation::Replace { path: "/r/x.bin".into(), file_id: 30, version: 12, mode: 0o644, mtime: 7, request_id: 9 },
        Mutation::CompleteIf {
            file_id: 30,
            length: 0,
            block_lens: vec![],
            mtime: 8,
            expect: Expect::Version { file_id: 20, version: 9 },
        },
        Mutation::CompleteIf { file_id: 31, length: 0, block_lens: vec![], mtime: 8, expect: Expect::Absent },
        Mutation::Abandon { file_id: 31, mtime: 9 },
        Mutation::Compose {
            path: "/r/z.bin".into(),
            sources: vec![20, 30],
            file_id: 32,
            version: 13,
            mode: 0o644,
            mtime: 10,
        },
    ];
    let mut bytes = encode_header(1).to_vec();
    let all: Vec<Mutation> = mutations_v4().into_iter().chain(new).collect();
    for (i, m) in all.iter().enumerate() {
        bytes.extend(encode_record(i as u64 + 1, m).unwrap());
    }
    let got: Vec<Mutation> = scan(&bytes).unwrap().records.into_iter().map(|(_, m)| m).collect();
    assert_eq!(got, all);

    let mut st = State::new();
    let create = |path: &str, overwrite, file_id| Mutation::Create {
        path: path.into(),
        overwrite,
        file_id,
        version: file_id,
        mode: 0o644,
        mtime: 1,
        request_id: 0,
    };
    st.apply(&create("/f", false, 2)).unwrap();
    st.apply(&Mutation::Complete { file_id: 2, length: 0, block_lens: vec![], mtime: 2 }).unwrap();
    st.apply(&create("/f", true, 3)).unwrap();
    let shown = st.stat(&cv_master_core::CvPath::parse("/f").unwrap()).unwrap();
    assert_eq!(shown.id, 3, "an older journal's overwrite replaced the file at once");
    assert!(!st.data().inodes.contains_key(&2));
}

/// The timed block records decode beside the v4 records and stamp the file's mtime (its
/// writer's progress); an `AddBlock` written before them leaves it as it was.
#[test]
fn timed_block_records_round_trip_and_stamp_the_writers_progress() {
    let block = |seq| cv_wire::block_id(seq, 0);
    let new = vec![
        Mutation::RegisterWorker {
            worker_id: 1,
            host: "127.0.0.1".into(),
            shard_ports: vec![7000],
            capacity: 1 << 30,
            now: 1,
            zone: String::new(),
        },
        Mutation::Create {
            path: "/w.bin".into(),
            overwrite: false,
            file_id: 40,
            version: 40,
            mode: 0o644,
            mtime: 100,
            request_id: 0,
        },
        Mutation::AddBlock { file_id: 40, block_id: block(1), worker: 1, shard: 0, replicas: vec![] },
        Mutation::AddBlockTimed { file_id: 40, block_id: block(2), worker: 1, shard: 0, replicas: vec![], mtime: 200 },
        Mutation::ReplaceBlockTimed {
            file_id: 40,
            index: 0,
            block_id: block(3),
            worker: 1,
            shard: 0,
            replicas: vec![],
            mtime: 300,
        },
    ];
    let mut bytes = encode_header(1).to_vec();
    let all: Vec<Mutation> = mutations_v4().into_iter().chain(new.clone()).collect();
    for (i, m) in all.iter().enumerate() {
        bytes.extend(encode_record(i as u64 + 1, m).unwrap());
    }
    let got: Vec<Mutation> = scan(&bytes).unwrap().records.into_iter().map(|(_, m)| m).collect();
    assert_eq!(got, all);

    let mut st = State::new();
    let since = |st: &State| st.writing_since().find(|(id, _)| *id == 40).map(|(_, at)| at);
    for m in &new[..3] {
        st.apply(m).unwrap();
    }
    assert_eq!(since(&st), Some(100), "an AddBlock from before leaves the create's time");
    st.apply(&new[3]).unwrap();
    assert_eq!(since(&st), Some(200));
    st.apply(&new[4]).unwrap();
    assert_eq!(since(&st), Some(300));
}

/// Revocations: the records decode beside the v4 records (added at their end), the list and
/// its generation are in snapshots from format 5 (`snapshot-v5.bin`, read by every later
/// version), and a v4 snapshot reads with an empty list.
fn mutations_v5() -> Vec<Mutation> {
    let mut v = mutations_v4();
    v.push(Mutation::Revoke(Revocation {
        serial: "8f3a".into(),
        name: "stolen laptop".into(),
        issued_before: 0,
        at_ms: 1_764_960_000_000,
        by: "ops (serial 1c)".into(),
    }));
    v.push(Mutation::Revoke(Revocation {
        serial: String::new(),
        name: "alice".into(),
        issued_before: 1_764_960_100,
        at_ms: 1_764_960_100_000,
        by: "ops (serial 1c)".into(),
    }));
    v
}

fn expected_state_v5() -> State {
    let mut st = State::new();
    for m in mutations_v5() {
        st.apply(&m).unwrap();
    }
    st
}

#[test]
fn revoke_records_round_trip_and_move_the_generation_only_on_a_change() {
    let mut bytes = encode_header(1).to_vec();
    let all = mutations_v5();
    for (i, m) in all.iter().enumerate() {
        bytes.extend(encode_record(i as u64 + 1, m).unwrap());
    }
    let got: Vec<Mutation> = scan(&bytes).unwrap().records.into_iter().map(|(_, m)| m).collect();
    assert_eq!(got, all);
    let mut st = expected_state_v5();
    assert_eq!(st.data().revoked_generation, 2);
    assert_eq!(st.data().revoked.len(), 2);
    // The same serial again changes nothing; a name revoked again moves its moment later.
    let again = |serial: &str, issued_before| {
        Mutation::Revoke(Revocation {
            serial: serial.into(),
            name: if serial.is_empty() { "alice".into() } else { String::new() },
            issued_before,
            at_ms: 1,
            by: "x".into(),
        })
    };
    st.apply(&again("8f3a", 0)).unwrap();
    assert_eq!(st.data().revoked_generation, 2);
    st.apply(&again("", 1_764_960_000)).unwrap();
    assert_eq!(st.data().revoked_generation, 2, "an earlier moment covers less: kept as it was");
    st.apply(&again("", 1_764_970_000)).unwrap();
    assert_eq!(st.data().revoked_generation, 3);
    assert_eq!(st.data().revoked["name:alice"].issued_before, 1_764_970_000);
}

#[test]
fn reads_v5_snapshot_fixture() {
    let path = fixture("snapshot-v5.bin");
    let n = mutations_v5().len() as u64;
    if std::env::var_os("CV_WRITE_FIXTURES").is_some() {
        std::fs::write(&path, encode_snapshot(n, expected_state_v5().data()).unwrap()).unwrap();
    }
    let bytes = std::fs::read(&path).expect("fixture snapshot-v5.bin is checked in");
    assert_eq!(u16::from_le_bytes([bytes[8], bytes[9]]), 5);
    let (seq, data) = decode_snapshot(&bytes).unwrap().unwrap();
    assert_eq!(seq, n);
    assert_eq!(&data, expected_state_v5().data());
    assert_eq!(data.revoked["serial:8f3a"].name, "stolen laptop");
}
