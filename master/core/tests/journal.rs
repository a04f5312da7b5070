//! Journal and snapshot: round trips, torn and corrupt tails, bad magic/version, crashes.

use cv_master_core::ErrorKind;
use cv_master_core::journal::{
    self, HEADER_LEN, Journal, MemStorage, Storage, encode_header, encode_record, encode_snapshot,
};
use cv_master_core::state::{Mutation, State};

fn mkdir(i: u64) -> Mutation {
    Mutation::Mkdir { path: format!("/d{i}"), parents: false, mode: 0o755, mtime: i }
}

fn open(j: &MemStorage, s: &MemStorage) -> cv_master_core::Result<(Journal, journal::Recovered)> {
    Journal::open(Box::new(j.clone()), Box::new(s.clone()), 1 << 20)
}

/// Writes `n` mkdir records through a real journal writer; returns the storages.
fn journal_with(n: u64) -> (MemStorage, MemStorage) {
    let (j, s) = (MemStorage::new(), MemStorage::new());
    let (journal, rec) = open(&j, &s).unwrap();
    for i in 1..=n {
        journal.append(rec.last_seq + i, encode_record(rec.last_seq + i, &mkdir(i)).unwrap()).wait().unwrap();
    }
    drop(journal);
    (j, s)
}

fn record_offsets(bytes: &[u8]) -> Vec<usize> {
    let mut at = HEADER_LEN;
    let mut out = Vec::new();
    while at + 8 <= bytes.len() {
        out.push(at);
        at += 8 + u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
    }
    out
}

fn names(st: &State) -> Vec<String> {
    let root = st.list(&cv_master_core::CvPath::root(), None, 1000).unwrap();
    root.entries.into_iter().map(|e| e.name).collect()
}

#[test]
fn round_trip() {
    let (j, s) = journal_with(3);
    let (_journal, rec) = open(&j, &s).unwrap();
    assert_eq!((rec.last_seq, rec.replayed, rec.cut_bytes), (3, 3, 0));
    assert_eq!(names(&rec.state), ["d1", "d2", "d3"]);
}

#[test]
fn truncated_record_is_cut_and_appends_continue() {
    let (j, s) = journal_with(3);
    let mut bytes = j.bytes();
    bytes.truncate(bytes.len() - 5);
    j.set_bytes(bytes);
    let (journal, rec) = open(&j, &s).unwrap();
    assert_eq!((rec.last_seq, rec.replayed), (2, 2));
    assert!(rec.cut_bytes > 0);
    assert_eq!(names(&rec.state), ["d1", "d2"]);
    // The cut happened on disk: a new record lands right after record 2 and is read back.
    journal.append(3, encode_record(3, &mkdir(33)).unwrap()).wait().unwrap();
    drop(journal);
    let (_journal, rec) = open(&j, &s).unwrap();
    assert_eq!((rec.last_seq, rec.cut_bytes), (3, 0));
    assert_eq!(names(&rec.state), ["d1", "d2", "d33"]);
}

#[test]
fn flipped_bit_in_last_record_is_cut() {
    let (j, s) = journal_with(3);
    let mut bytes = j.bytes();
    let last = *record_offsets(&bytes).last().unwrap();
    bytes[last + 20] ^= 0x10;
    j.set_bytes(bytes);
    let (_journal, rec) = open(&j, &s).unwrap();
    assert_eq!(rec.last_seq, 2);
    assert_eq!(names(&rec.state), ["d1", "d2"]);
}

#[test]
fn flipped_bit_mid_journal_is_an_error_not_a_silent_loss() {
    let (j, s) = journal_with(3);
    let mut bytes = j.bytes();
    let second = record_offsets(&bytes)[1];
    bytes[second + 14] ^= 0x01;
    j.set_bytes(bytes.clone());
    let e = open(&j, &s).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::CorruptData);
    assert!(!e.retryable());
    assert_eq!(j.bytes(), bytes, "a failed recovery must not truncate anything");
}

#[test]
fn zeroed_tail_is_cut() {
    let (j, s) = journal_with(2);
    let mut bytes = j.bytes();
    bytes.extend_from_slice(&[0u8; 4096]);
    j.set_bytes(bytes);
    let (_journal, rec) = open(&j, &s).unwrap();
    assert_eq!((rec.last_seq, rec.cut_bytes), (2, 4096));
}

#[test]
fn wrong_magic_and_version_are_typed_errors() {
    let (j, s) = journal_with(1);
    let good = j.bytes();
    let mut bad = good.clone();
    bad[0] = b'X';
    j.set_bytes(bad);
    assert_eq!(open(&j, &s).unwrap_err().kind(), ErrorKind::CorruptData);
    let mut bad = good.clone();
    bad[8] = 2; // format version 2, header checksum recomputed so only the version is wrong
    let crc = crc32fast::hash(&bad[0..20]);
    bad[20..24].copy_from_slice(&crc.to_le_bytes());
    j.set_bytes(bad);
    assert_eq!(open(&j, &s).unwrap_err().kind(), ErrorKind::UnsupportedVersion);
    let mut bad = good;
    bad[15] ^= 1; // first_seq changed, checksum not
    j.set_bytes(bad);
    assert_eq!(open(&j, &s).unwrap_err().kind(), ErrorKind::CorruptData);
}

#[test]
fn snapshot_then_journal_restart() {
    let (j, s) = journal_with(3);
    let (journal, rec) = open(&j, &s).unwrap();
    journal.snapshot(3, encode_snapshot(3, rec.state.data()).unwrap()).wait().unwrap();
    journal.append(4, encode_record(4, &mkdir(4)).unwrap()).wait().unwrap();
    drop(journal);
    assert_eq!(record_offsets(&j.bytes()).len(), 1, "the journal restarted after the snapshot");
    let (_journal, rec) = open(&j, &s).unwrap();
    assert_eq!((rec.snapshot_seq, rec.replayed, rec.last_seq), (3, 1, 4));
    assert_eq!(names(&rec.state), ["d1", "d2", "d3", "d4"]);
}

#[test]
fn crash_between_snapshot_and_journal_restart() {
    // Snapshot at seq 3 written, journal still holds 1..=3: records up to 3 are skipped.
    let (j, s) = journal_with(3);
    let (_, rec) = open(&j, &s).unwrap();
    s.set_bytes(encode_snapshot(3, rec.state.data()).unwrap());
    let (journal, rec) = open(&j, &s).unwrap();
    assert_eq!((rec.snapshot_seq, rec.replayed, rec.last_seq), (3, 0, 3));
    journal.append(4, encode_record(4, &mkdir(4)).unwrap()).wait().unwrap();
    drop(journal);
    let (_, rec) = open(&j, &s).unwrap();
    assert_eq!(names(&rec.state), ["d1", "d2", "d3", "d4"]);
}

#[test]
fn snapshot_ahead_of_journal_restarts_it() {
    let (j, s) = journal_with(2);
    let mut st = State::new();
    for i in 1..=5 {
        st.apply(&mkdir(i)).unwrap();
    }
    s.set_bytes(encode_snapshot(5, st.data()).unwrap());
    let (journal, rec) = open(&j, &s).unwrap();
    assert_eq!(rec.last_seq, 5);
    journal.append(6, encode_record(6, &mkdir(6)).unwrap()).wait().unwrap();
    drop(journal);
    let (_, rec) = open(&j, &s).unwrap();
    assert_eq!((rec.last_seq, names(&rec.state).len()), (6, 6));
}

#[test]
fn journal_gap_after_snapshot_is_an_error() {
    let (j, s) = (MemStorage::new(), MemStorage::new());
    j.set_bytes(encode_header(10).to_vec());
    assert_eq!(open(&j, &s).unwrap_err().kind(), ErrorKind::CorruptData);
}

#[test]
fn corrupt_snapshot_is_a_typed_error() {
    let (j, s) = journal_with(1);
    let good = encode_snapshot(1, State::new().data()).unwrap();
    // Byte 8 is the low byte of the format version: 0x40 makes it one no build has written.
    for (at, kind) in [(0, ErrorKind::CorruptData), (40, ErrorKind::CorruptData), (8, ErrorKind::UnsupportedVersion)] {
        let mut bad = good.clone();
        bad[at] ^= 0x40;
        s.set_bytes(bad);
        assert_eq!(open(&j, &s).unwrap_err().kind(), kind, "byte {at}");
    }
    s.set_bytes(good[..good.len() - 1].to_vec());
    assert_eq!(open(&j, &s).unwrap_err().kind(), ErrorKind::CorruptData);
}

#[test]
fn failed_write_poisons_and_crash_keeps_synced_prefix() {
    let (j, s) = journal_with(2);
    let (journal, _) = open(&j, &s).unwrap();
    j.fail_after(1); // the next append succeeds, its sync fails
    let e = journal.append(3, encode_record(3, &mkdir(3)).unwrap()).wait().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Io);
    assert!(journal.is_failed());
    let e = journal.append(4, encode_record(4, &mkdir(4)).unwrap()).wait().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Poisoned);
    drop(journal);
    assert!(j.unsynced_len() > 0);
    // Reboot keeping 7 bytes of the unsynced record: a torn record, cut off.
    j.crash(7);
    let (_, rec) = open(&j, &s).unwrap();
    assert_eq!((rec.last_seq, rec.cut_bytes), (2, 7));
}

#[test]
fn group_commit_batches_concurrent_appends() {
    // A real file, so each sync costs a real fdatasync and appenders pile up behind it.
    let dir = tempfile::tempdir().unwrap();
    let j = journal::FileStorage::new(dir.path().join("journal"));
    let s = journal::FileStorage::new(dir.path().join("snapshot"));
    let (journal, _) = Journal::open(Box::new(j), Box::new(s), 1 << 20).unwrap();
    let journal = std::sync::Arc::new(journal);
    let seq = std::sync::Mutex::new(0u64);
    std::thread::scope(|sc| {
        for _ in 0..16 {
            sc.spawn(|| {
                for _ in 0..20 {
                    let ticket = {
                        let mut g = seq.lock().unwrap();
                        *g += 1;
                        journal.append(*g, encode_record(*g, &mkdir(*g)).unwrap())
                    };
                    ticket.wait().unwrap();
                }
            });
        }
    });
    let stats = journal.stats();
    let batches = stats.batches.load(std::sync::atomic::Ordering::Relaxed);
    let records = stats.records.load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(records, 320);
    assert!(batches * 2 < records, "{batches} syncs for {records} records: no batching");
    assert_eq!(journal.durable_seq(), 320);
    drop(journal);
    let mut j = journal::FileStorage::new(dir.path().join("journal"));
    let mut s = journal::FileStorage::new(dir.path().join("snapshot"));
    let rec = journal::recover(&mut j, &mut s).unwrap();
    assert_eq!(rec.last_seq, 320);
    let _ = j.read_all().unwrap();
}
