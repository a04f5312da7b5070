//! The Raft log and vote bytes: every kind of entry comes back as written; a torn last frame
//! is cut; a damaged frame with an intact one after it is an error; so is a gap in indexes.

use std::collections::{BTreeMap, BTreeSet};

use cv_master_raft::codec::{HEADER_LEN, decode_header, decode_vote, encode_entry, encode_header, encode_vote, scan};
use cv_master_raft::{Batch, Entry, LogId, Vote};
use openraft::{BasicNode, CommittedLeaderId, EntryPayload, Membership};

fn id(term: u64, node: u64, index: u64) -> LogId {
    LogId::new(CommittedLeaderId::new(term, node), index)
}

fn entries() -> Vec<Entry> {
    let nodes: BTreeMap<u64, BasicNode> =
        [(1, BasicNode::new("10.210.0.1:7000")), (2, BasicNode::new("10.210.0.2:7000"))].into();
    let m = Membership::new(vec![BTreeSet::from([1, 2])], nodes);
    vec![
        Entry { log_id: id(1, 1, 5), payload: EntryPayload::Blank },
        Entry { log_id: id(1, 1, 6), payload: EntryPayload::Membership(m) },
        Entry { log_id: id(2, 2, 7), payload: EntryPayload::Normal(Batch(vec![7; 300].into())) },
    ]
}

fn file(purged: Option<&LogId>, es: &[Entry]) -> Vec<u8> {
    let mut b = encode_header(purged);
    for e in es {
        b.extend(encode_entry(e).unwrap());
    }
    b
}

#[test]
fn entries_and_the_purged_id_come_back_as_written() {
    let es = entries();
    let purged = id(1, 1, 4);
    let b = file(Some(&purged), &es);
    assert_eq!(decode_header(&b).unwrap(), Some(purged));
    let s = scan(&b).unwrap();
    assert_eq!(s.purged, Some(purged));
    assert_eq!(s.valid_len, b.len());
    let got: Vec<String> = s.entries.iter().map(|(_, e)| format!("{e:?}")).collect();
    let want: Vec<String> = es.iter().map(|e| format!("{e:?}")).collect();
    assert_eq!(got, want);
    assert_eq!(s.entries[0].0, HEADER_LEN);
    assert_eq!(scan(&file(None, &[])).unwrap().purged, None);
}

#[test]
fn a_torn_last_frame_is_cut_and_a_damaged_middle_one_is_an_error() {
    let es = entries();
    let b = file(None, &es);
    let last_at = scan(&b).unwrap().entries[2].0;
    for cut in [1, 10, b.len() - last_at - 1] {
        let s = scan(&b[..b.len() - cut]).unwrap();
        assert_eq!((s.entries.len(), s.valid_len), (2, last_at), "cut {cut}");
    }
    let mut damaged = b.clone();
    damaged[HEADER_LEN + 20] ^= 1;
    let e = scan(&damaged).unwrap_err();
    assert!(e.0.contains("intact one follows"), "{e}");
    let mut header = b.clone();
    header[13] ^= 1;
    assert!(scan(&header).unwrap_err().0.contains("checksum"));
}

#[test]
fn a_gap_in_indexes_is_an_error() {
    let mut es = entries();
    es[2].log_id.index = 9;
    assert!(scan(&file(None, &es)).unwrap_err().0.contains("follows entry 6"));
}

#[test]
fn votes_round_trip_and_damage_is_refused() {
    assert_eq!(decode_vote(&[]).unwrap(), None);
    let mut v = Vote::new(7, 3);
    v.committed = true;
    let b = encode_vote(&v);
    assert_eq!(decode_vote(&b).unwrap(), Some(v));
    let mut d = b.clone();
    d[14] ^= 1;
    assert!(decode_vote(&d).is_err());
}

#[test]
fn snapshot_file_round_trips_and_refuses_damage() {
    use cv_master_raft::openraft::{BasicNode, Membership, SnapshotMeta, StoredMembership};
    use cv_master_raft::snapshot;
    let mut state = cv_master_core::state::State::new();
    let m = cv_master_core::state::Mutation::Mkdir { path: "/d".into(), parents: false, mode: 0o755, mtime: 1 };
    state.apply(&m).unwrap();
    let nodes: std::collections::BTreeMap<u64, BasicNode> =
        [(1, BasicNode::new("a:1")), (2, BasicNode::new("b:2"))].into();
    let membership = Membership::new(vec![[1, 2].into_iter().collect()], nodes);
    let last = Some(id(3, 1, 40));
    let meta = SnapshotMeta {
        snapshot_id: snapshot::snapshot_id(last.as_ref()),
        last_log_id: last,
        last_membership: StoredMembership::new(Some(id(1, 1, 0)), membership),
    };
    let bytes = snapshot::encode(&meta, 7, state.data()).unwrap();
    let (got, seq, data) = snapshot::decode(&bytes).unwrap();
    assert_eq!((got, seq, &data), (meta, 7, state.data()));
    for at in [0, 9, 20, bytes.len() - 1] {
        let mut bad = bytes.clone();
        bad[at] ^= 0x40;
        assert!(snapshot::decode(&bad).is_err(), "a flipped byte at {at} was accepted");
    }
    assert!(snapshot::decode(&bytes[..bytes.len() - 3]).is_err(), "a cut snapshot was accepted");
}
