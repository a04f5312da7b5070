//! The Raft log store on real files: what was written is there after a reopen; truncate and
//! purge hold across a reopen; a torn tail is cut; the vote survives.

use cv_master_raft::log_store::FileLog;
use cv_master_raft::{Batch, Entry, LogId, Vote};
use openraft::storage::RaftLogStorage;
use openraft::{CommittedLeaderId, EntryPayload};

fn id(term: u64, index: u64) -> LogId {
    LogId::new(CommittedLeaderId::new(term, 1), index)
}

fn normal(term: u64, index: u64) -> Entry {
    Entry { log_id: id(term, index), payload: EntryPayload::Normal(Batch(vec![index as u8; 100].into())) }
}

fn indexes(log: &FileLog) -> Vec<u64> {
    log.entries(..).iter().map(|e| e.log_id.index).collect()
}

#[tokio::test]
async fn entries_truncate_purge_and_vote_survive_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = FileLog::open(dir.path()).unwrap();
    log.write((1..=5).map(|i| normal(1, i))).unwrap();
    assert_eq!(indexes(&FileLog::open(dir.path()).unwrap()), vec![1, 2, 3, 4, 5]);

    log.truncate(id(1, 4)).await.unwrap();
    log.write([normal(2, 4)]).unwrap();
    let mut again = FileLog::open(dir.path()).unwrap();
    assert_eq!(indexes(&again), vec![1, 2, 3, 4]);
    assert_eq!(again.get_log_state().await.unwrap().last_log_id, Some(id(2, 4)));

    again.purge(id(1, 2)).await.unwrap();
    let mut third = FileLog::open(dir.path()).unwrap();
    assert_eq!(indexes(&third), vec![3, 4]);
    let st = third.get_log_state().await.unwrap();
    assert_eq!((st.last_purged_log_id, st.last_log_id), (Some(id(1, 2)), Some(id(2, 4))));
    third.write([normal(2, 5)]).unwrap();
    assert_eq!(indexes(&FileLog::open(dir.path()).unwrap()), vec![3, 4, 5]);

    // Everything purged: the state still names the last id.
    third.purge(id(2, 5)).await.unwrap();
    let st = FileLog::open(dir.path()).unwrap().get_log_state().await.unwrap();
    assert_eq!((st.last_purged_log_id, st.last_log_id), (Some(id(2, 5)), Some(id(2, 5))));

    let mut v = Vote::new(3, 2);
    v.committed = true;
    third.save_vote(&v).await.unwrap();
    assert_eq!(FileLog::open(dir.path()).unwrap().read_vote().await.unwrap(), Some(v));
}

#[tokio::test]
async fn a_torn_tail_is_cut_on_open_and_writing_goes_on_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let log = FileLog::open(dir.path()).unwrap();
    log.write((1..=3).map(|i| normal(1, i))).unwrap();
    let path = dir.path().join("raft-log");
    let len = std::fs::metadata(&path).unwrap().len();
    let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    f.set_len(len - 30).unwrap();
    let log = FileLog::open(dir.path()).unwrap();
    assert_eq!(indexes(&log), vec![1, 2]);
    log.write([normal(1, 3)]).unwrap();
    assert_eq!(indexes(&FileLog::open(dir.path()).unwrap()), vec![1, 2, 3]);
}

#[test]
fn a_damaged_vote_file_refuses_to_open_and_names_the_directory() {
    let dir = tempfile::tempdir().unwrap();
    drop(FileLog::open(dir.path()).unwrap());
    std::fs::write(dir.path().join("raft-vote"), b"not a vote").unwrap();
    let e = FileLog::open(dir.path()).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidData);
    assert!(e.to_string().contains(&dir.path().display().to_string()), "{e}");
}

#[tokio::test]
async fn a_small_purge_waits_to_rewrite_the_file_and_a_reopen_is_still_consistent() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = FileLog::open(dir.path()).unwrap();
    log.write((1..=10).map(|i| normal(1, i))).unwrap();
    let len = std::fs::metadata(dir.path().join("raft-log")).unwrap().len();
    log.purge(id(1, 2)).await.unwrap();
    assert_eq!(indexes(&log), (3..=10).collect::<Vec<_>>());
    assert_eq!(std::fs::metadata(dir.path().join("raft-log")).unwrap().len(), len, "rewritten for 2 of 10");
    let mut reopened = FileLog::open(dir.path()).unwrap();
    let st = reopened.get_log_state().await.unwrap();
    assert_eq!(st.last_log_id, Some(id(1, 10)));
    assert!(indexes(&reopened).ends_with(&(3..=10).collect::<Vec<_>>()));
    // Past half the file: rewritten, and a reopen sees exactly what is kept.
    reopened.purge(id(1, 6)).await.unwrap();
    let mut third = FileLog::open(dir.path()).unwrap();
    assert_eq!(indexes(&third), vec![7, 8, 9, 10]);
    assert_eq!(third.get_log_state().await.unwrap().last_purged_log_id, Some(id(1, 6)));
}
