//! Format fixtures of the Raft files (master/core/FORMAT.md, "Under Raft"), checked in under
//! tests/fixtures/: every later build must keep reading them. Written once with
//! CV_WRITE_FIXTURES=1, when a format version is added; never rewritten.

use std::collections::BTreeMap;
use std::path::PathBuf;

use cv_master_core::journal::encode_record;
use cv_master_core::state::{Mutation, State};
use cv_master_raft::codec::{encode_entry, encode_header, encode_vote, scan};
use cv_master_raft::openraft::{
    BasicNode, CommittedLeaderId, EntryPayload, Membership, SnapshotMeta, StoredMembership,
};
use cv_master_raft::{Batch, Entry, LogId, Vote, snapshot};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

fn id(term: u64, node: u64, index: u64) -> LogId {
    LogId::new(CommittedLeaderId::new(term, node), index)
}

fn mutations() -> Vec<Mutation> {
    vec![
        Mutation::Mkdir { path: "/warehouse".into(), parents: false, mode: 0o755, mtime: 1_700_000_000_000 },
        Mutation::Mkdir { path: "/warehouse/t1".into(), parents: false, mode: 0o755, mtime: 1_700_000_000_001 },
    ]
}

fn membership() -> Membership<u64, BasicNode> {
    let nodes: BTreeMap<u64, BasicNode> = (1..=3).map(|i| (i, BasicNode::new(format!("10.0.0.{i}:7700")))).collect();
    Membership::new(vec![(1..=3).collect()], nodes)
}

/// Index 0 the group's membership, 1 a Blank of term 1, 2 a batch of two records.
fn entries() -> Vec<Entry> {
    let records: Vec<Vec<u8>> =
        mutations().iter().enumerate().map(|(i, m)| encode_record(i as u64 + 1, m).unwrap()).collect();
    let leader = CommittedLeaderId::new(1, 1);
    vec![
        Entry { log_id: id(0, 0, 0), payload: EntryPayload::Membership(membership()) },
        Entry { log_id: id(1, 1, 1), payload: EntryPayload::Blank },
        Entry {
            log_id: id(1, 1, 2),
            payload: EntryPayload::Normal(Batch::build(leader, records.iter().map(|r| &r[..]))),
        },
    ]
}

fn state() -> State {
    let mut s = State::new();
    for m in mutations() {
        s.apply(&m).unwrap();
    }
    s
}

fn meta() -> snapshot::Meta {
    let last = Some(id(1, 1, 2));
    SnapshotMeta {
        snapshot_id: snapshot::snapshot_id(last.as_ref()),
        last_log_id: last,
        last_membership: StoredMembership::new(Some(id(0, 0, 0)), membership()),
    }
}

#[test]
fn write_fixtures_when_asked() {
    if std::env::var_os("CV_WRITE_FIXTURES").is_none() {
        return;
    }
    let mut log = encode_header(None);
    for e in entries() {
        log.extend_from_slice(&encode_entry(&e).unwrap());
    }
    std::fs::write(fixture("raft-log-v1.bin"), log).unwrap();
    std::fs::write(fixture("raft-vote-v1.bin"), encode_vote(&Vote::new_committed(1, 1))).unwrap();
    std::fs::write(fixture("raft-snapshot-v1.bin"), snapshot::encode(&meta(), 2, state().data()).unwrap()).unwrap();
}

#[test]
fn version_1_raft_files_are_still_read() {
    let log = std::fs::read(fixture("raft-log-v1.bin")).unwrap();
    let s = scan(&log).unwrap();
    assert_eq!(s.valid_len, log.len());
    let got: Vec<Entry> = s.entries.into_iter().map(|(_, e)| e).collect();
    assert_eq!(got, entries());
    let EntryPayload::Normal(b) = &got[2].payload else { panic!("entry 2 is not a batch") };
    assert!(b.valid_under(&CommittedLeaderId::new(1, 1)));
    let records: Vec<Mutation> = b.records().unwrap().into_iter().map(|(_, m)| m).collect();
    assert_eq!(records, mutations());

    let vote = cv_master_raft::codec::decode_vote(&std::fs::read(fixture("raft-vote-v1.bin")).unwrap()).unwrap();
    assert_eq!(vote, Some(Vote::new_committed(1, 1)));

    let (m, seq, data) = snapshot::decode(&std::fs::read(fixture("raft-snapshot-v1.bin")).unwrap()).unwrap();
    assert_eq!((m, seq, &data), (meta(), 2, state().data()));
}
