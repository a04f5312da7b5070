//! Format v1 fixtures checked in under tests/fixtures/: every future build must keep reading
//! them. Regenerate (only when deliberately adding a new fixture) with CV_WRITE_FIXTURES=1.

use std::path::PathBuf;

use cv_master::journal::{decode_snapshot, encode_header, encode_record, encode_snapshot, scan};
use cv_master::state::{MountMode, Mutation, State};

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
        },
        Mutation::Mkdir { path: s("/warehouse/t1"), parents: true, mode: 0o755, mtime: 1_700_000_000_001 },
        Mutation::Create {
            path: s("/warehouse/t1/part-0.parquet"),
            overwrite: false,
            file_id: 4,
            version: 1,
            mode: 0o644,
            mtime: 1_700_000_000_002,
        },
        Mutation::AddBlock { file_id: 4, block_id: 1, worker: 1, shard: 1 },
        Mutation::Complete { file_id: 4, length: 1234, block_lens: vec![1234], mtime: 1_700_000_000_003 },
        Mutation::Mount {
            path: s("/warehouse"),
            ufs_url: s("s3://bucket/wh"),
            mode: MountMode::Cache,
            options: vec![(s("region"), s("us-east-1"))],
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
    if std::env::var_os("CV_WRITE_FIXTURES").is_some() {
        let mut bytes = encode_header(1).to_vec();
        for (i, m) in mutations().iter().enumerate() {
            bytes.extend(encode_record(i as u64 + 1, m).unwrap());
        }
        std::fs::write(&path, bytes).unwrap();
    }
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
    if std::env::var_os("CV_WRITE_FIXTURES").is_some() {
        std::fs::write(&path, encode_snapshot(11, expected_state().data()).unwrap()).unwrap();
    }
    let bytes = std::fs::read(&path).expect("fixture snapshot-v1.bin is checked in");
    let (seq, data) = decode_snapshot(&bytes).unwrap().unwrap();
    assert_eq!(seq, 11);
    assert_eq!(&data, expected_state().data());
}
