//! A full journal disk: writes fail `NoSpace` for sure and leave nothing behind (in memory or
//! on disk), reads go on, and writes are taken again once there is room, without a restart.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use cv_master_core::config::ManualClock;
use cv_master_core::core::Storages;
use cv_master_core::journal::MemStorage;
use cv_master_core::{ErrorKind, MasterConfig, MasterCore};

fn mem_core(j: &MemStorage, s: &MemStorage, clock: &ManualClock, cfg: MasterConfig) -> MasterCore {
    let storages = Storages { journal: Box::new(j.clone()), snapshot: Box::new(s.clone()) };
    MasterCore::start(cfg, storages, Arc::new(clock.clone())).unwrap()
}

fn names(core: &MasterCore, dir: &str) -> Vec<String> {
    core.list(dir, None, 10_000).unwrap().entries.into_iter().map(|e| e.name).collect()
}

/// The journal holds what it holds now, plus `extra` bytes.
fn fill(j: &MemStorage, extra: u64) {
    j.set_room(Some(j.bytes().len() as u64 + extra));
}

#[test]
fn full_journal_refuses_writes_serves_reads_and_takes_writes_again() {
    let (j, s, clock) = (MemStorage::new(), MemStorage::new(), ManualClock::new(1_000));
    let core = mem_core(&j, &s, &clock, MasterConfig::default());
    core.mkdir("/ok", false).unwrap();
    let f = core.create("/ok/f", false, 0o644).unwrap();
    core.complete(f.file_id, 0, vec![], None).unwrap();
    let before = j.bytes();
    // Room for part of the next record: a torn write, which must be cut off again.
    fill(&j, 7);
    let e = core.mkdir("/lost", false).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NoSpace, "{e}");
    assert!(!e.retryable());
    assert!(e.context().contains("in-memory storage") && e.context().contains("no space"), "{e}");
    assert_eq!(j.bytes(), before, "the failed write was not cut off the journal");
    // Reads go on, and see only what is durable.
    assert_eq!(names(&core, "/"), ["ok"]);
    assert_eq!(core.stat("/lost").unwrap_err().kind(), ErrorKind::NotFound);
    assert!(core.open("/ok/f").is_ok());
    assert_eq!(core.journal_full().map(|e| e.kind()), Some(ErrorKind::NoSpace));
    // Still full: refused before anything is applied.
    clock.advance(Duration::from_secs(1));
    assert_eq!(core.create("/ok/g", false, 0o644).unwrap_err().kind(), ErrorKind::NoSpace);
    assert_eq!(j.bytes(), before);
    // Room again: no restart needed.
    j.set_room(None);
    clock.advance(Duration::from_secs(1));
    core.mkdir("/again", false).unwrap();
    assert!(core.journal_full().is_none());
    assert_eq!(names(&core, "/"), ["again", "ok"]);
    drop(core);
    j.crash(0);
    let core = mem_core(&j, &s, &clock, MasterConfig::default());
    assert_eq!(names(&core, "/"), ["again", "ok"]);
    assert_eq!(names(&core, "/ok"), ["f"]);
}

#[test]
fn a_failed_completion_leaves_no_tail_and_no_complete_file() {
    let (j, s, clock) = (MemStorage::new(), MemStorage::new(), ManualClock::new(1_000));
    let cfg = MasterConfig { block_size: 1 << 20, ..MasterConfig::default() };
    let core = mem_core(&j, &s, &clock, cfg.clone());
    core.register_worker(None, "127.0.0.1", vec![7000], 1 << 30).unwrap();
    let f = core.create("/f", false, 0o644).unwrap();
    core.add_block(f.file_id).unwrap();
    fill(&j, 0);
    let e = core.complete(f.file_id, 10, vec![10], Some((0, vec![1; 10]))).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NoSpace);
    // Still being written: not opened with the tail the failed completion brought.
    assert_eq!(core.open("/f").unwrap_err().kind(), ErrorKind::FileIncomplete);
    j.set_room(None);
    clock.advance(Duration::from_secs(1));
    core.complete(f.file_id, 10, vec![10], None).unwrap();
    let open = core.open("/f").unwrap();
    assert_eq!(open.tail, cv_master_core::core::Tail::Evicted, "a tail of a completion that failed was kept");
}

#[test]
fn concurrent_writers_on_a_filling_disk_lose_nothing_acknowledged() {
    let mut acked_in_all = 0;
    for room in [600u64, 2_000, 5_000] {
        let (j, s, clock) = (MemStorage::new(), MemStorage::new(), ManualClock::new(1_000));
        let core = mem_core(&j, &s, &clock, MasterConfig { snapshot_every: 0, ..MasterConfig::default() });
        for t in 0..8 {
            core.mkdir(&format!("/t{t}"), false).unwrap();
        }
        fill(&j, room);
        let outcomes: BTreeMap<String, ErrorKind> = std::thread::scope(|sc| {
            let threads: Vec<_> = (0..8)
                .map(|t| {
                    let core = &core;
                    sc.spawn(move || {
                        let mut out = Vec::new();
                        for i in 0..40 {
                            let p = format!("/t{t}/d{i}");
                            let kind = match core.mkdir(&p, false) {
                                Ok(()) => ErrorKind::AlreadyExists, // stands for "acknowledged"
                                Err(e) => e.kind(),
                            };
                            out.push((p, kind));
                        }
                        out
                    })
                })
                .collect();
            threads.into_iter().flat_map(|h| h.join().unwrap()).collect()
        });
        let acked = outcomes.values().filter(|k| **k == ErrorKind::AlreadyExists).count();
        let full = outcomes.values().filter(|k| **k == ErrorKind::NoSpace).count();
        assert_eq!(acked + full, outcomes.len(), "room {room}: {outcomes:?}");
        // A whole batch of records fails together, so a small room may take none.
        assert!(full > 0, "room {room}: {acked} acknowledged, none refused");
        acked_in_all += acked;
        let check = |core: &MasterCore, when: &str| {
            for (p, kind) in &outcomes {
                let found = core.stat(p).is_ok();
                assert_eq!(found, *kind == ErrorKind::AlreadyExists, "room {room}, {when}: {p} ({kind:?})");
            }
        };
        check(&core, "live");
        j.set_room(None);
        clock.advance(Duration::from_secs(1));
        core.mkdir("/after", false).unwrap();
        drop(core);
        j.crash(0);
        let core = mem_core(&j, &s, &clock, MasterConfig::default());
        check(&core, "after a restart");
        assert!(core.stat("/after").is_ok());
    }
    assert!(acked_in_all > 0);
}

#[test]
fn a_snapshot_without_room_keeps_the_old_files() {
    let (j, s, clock) = (MemStorage::new(), MemStorage::new(), ManualClock::new(1_000));
    let core = mem_core(&j, &s, &clock, MasterConfig::default());
    core.mkdir("/a", false).unwrap();
    s.set_room(Some(8));
    assert_eq!(core.snapshot_now().unwrap_err().kind(), ErrorKind::NoSpace);
    // No poison: writes go on.
    core.mkdir("/b", false).unwrap();
    // The snapshot fits, restarting the journal after it does not: the journal goes on.
    s.set_room(None);
    j.set_room(Some(10));
    core.snapshot_now().unwrap();
    j.set_room(None);
    core.mkdir("/c", false).unwrap();
    drop(core);
    j.crash(0);
    let core = mem_core(&j, &s, &clock, MasterConfig::default());
    assert_eq!(names(&core, "/"), ["a", "b", "c"]);
}

#[test]
fn other_journal_errors_still_poison_and_say_where() {
    let (j, s, clock) = (MemStorage::new(), MemStorage::new(), ManualClock::new(1_000));
    let core = mem_core(&j, &s, &clock, MasterConfig::default());
    j.fail_after(0);
    let e = core.mkdir("/x", false).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Io);
    let e = core.stat("/").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Poisoned);
    assert!(e.context().contains("in-memory storage") && e.context().contains("simulated device failure"), "{e}");
}

/// The journal's side: a batch that does not fit fails `NoSpace` and is cut off; a read that
/// waited on it may ask again (retryable); appends queued behind it, built on it, fail
/// unwritten until the durable state is read back; after that, and room, appends go on.
#[test]
fn the_journal_cuts_a_batch_that_does_not_fit_and_refuses_what_was_built_on_it() {
    use cv_master_core::journal::{Journal, encode_record};
    use cv_master_core::state::Mutation;
    let mkdir = |i: u64| Mutation::Mkdir { path: format!("/d{i}"), parents: false, mode: 0o755, mtime: i };
    let record = |seq: u64| encode_record(seq, &mkdir(seq)).unwrap();
    let (j, s) = (MemStorage::new(), MemStorage::new());
    let (journal, _) = Journal::open(Box::new(j.clone()), Box::new(s.clone()), 1 << 20).unwrap();
    journal.append(1, record(1)).wait().unwrap();
    let before = j.bytes();
    fill(&j, 5);
    let failed = journal.append(2, record(2));
    let read = journal.wait_for(2);
    let behind = journal.append(3, record(3));
    assert_eq!(failed.wait().unwrap_err().kind(), ErrorKind::NoSpace);
    let e = read.wait().unwrap_err();
    assert!(e.retryable(), "a read of what failed may ask again: {e}");
    assert_eq!(behind.wait().unwrap_err().kind(), ErrorKind::NoSpace);
    assert_eq!(j.bytes(), before);
    assert!(journal.needs_rollback() && journal.no_space().is_some());
    assert_eq!(journal.append(4, record(4)).wait().unwrap_err().kind(), ErrorKind::NoSpace);
    assert_eq!(journal.probe_space().unwrap_err().kind(), ErrorKind::NoSpace);

    let rec = journal.durable_state().unwrap();
    assert_eq!(rec.last_seq, 1);
    assert!(!journal.needs_rollback());
    j.set_room(None);
    journal.probe_space().unwrap();
    assert!(journal.no_space().is_none());
    journal.append(2, record(2)).wait().unwrap();
    assert_eq!(journal.durable_seq(), 2);
    assert_eq!(journal.stats().no_space.load(std::sync::atomic::Ordering::Relaxed), 1);
}

/// Heartbeats are refused while the journal is full, so a worker is not counted lost for the
/// silence: once there is room it gets a whole heartbeat timeout, as after a restart.
#[test]
fn workers_get_a_heartbeat_timeout_once_the_journal_has_room_again() {
    let (j, s, clock) = (MemStorage::new(), MemStorage::new(), ManualClock::new(1_000));
    let cfg = MasterConfig { heartbeat_timeout: Duration::from_secs(10), ..MasterConfig::default() };
    let core = mem_core(&j, &s, &clock, cfg);
    let w = core.register_worker(None, "127.0.0.1", vec![7000], 1 << 30).unwrap();
    fill(&j, 0);
    clock.advance(Duration::from_secs(30));
    assert_eq!(core.heartbeat(w, 1 << 30, 0, vec![], vec![]).unwrap_err().kind(), ErrorKind::NoSpace);
    assert_eq!(core.tick().unwrap_err().kind(), ErrorKind::NoSpace);
    j.set_room(None);
    clock.advance(Duration::from_secs(1));
    assert!(core.tick().unwrap().lost_workers.is_empty(), "lost for heartbeats the full journal refused");
    clock.advance(Duration::from_secs(11));
    assert_eq!(core.tick().unwrap().lost_workers, vec![w]);
}
