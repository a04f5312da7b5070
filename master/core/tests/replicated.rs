//! The core over a replicated log (the seam `cv-master-raft` plugs into): a core that does not
//! lead refuses work with `NotLeader`; the records a leading core hands its log, applied in
//! order on another core, give the same state; a deposed leader resets to what is committed.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use cv_master_core::config::{Clock, ManualClock};
use cv_master_core::journal::{Log, Ticket, WriterStats, decode_records};
use cv_master_core::state::State;
use cv_master_core::{ErrorKind, MasterConfig, MasterCore};

/// Keeps every record it is handed, and calls each durable at once.
#[derive(Debug, Default)]
struct Captured {
    bytes: Mutex<Vec<u8>>,
    stats: WriterStats,
}

#[derive(Debug, Clone, Default)]
struct CaptureLog(Arc<Captured>);

impl std::ops::Deref for CaptureLog {
    type Target = Captured;
    fn deref(&self) -> &Captured {
        &self.0
    }
}

impl Log for CaptureLog {
    fn append(&self, seq: u64, bytes: Vec<u8>) -> Ticket {
        self.bytes.lock().unwrap().extend_from_slice(&bytes);
        Ticket::Ready(seq)
    }
    fn wait_for(&self, seq: u64) -> Ticket {
        Ticket::Ready(seq)
    }
    fn snapshot(&self, _seq: u64, _bytes: Vec<u8>) -> Ticket {
        let (tx, rx) = flume::bounded(1);
        let _ = tx.send(Err(cv_master_core::Error::new(ErrorKind::Unsupported, "the log snapshots itself")));
        Ticket::Pending(rx)
    }
    fn is_failed(&self) -> bool {
        false
    }
    fn stats(&self) -> &WriterStats {
        &self.stats
    }
    fn shutdown(&self) {}
}

fn core(log: &CaptureLog) -> MasterCore {
    let cfg = MasterConfig { block_size: 64 * 1024, ..MasterConfig::default() };
    MasterCore::replicated(cfg, State::new(), 0, Box::new(log.clone()), Arc::new(ManualClock::new(1_000))).unwrap()
}

fn write_file(core: &MasterCore, path: &str, len: u64) -> u64 {
    let c = core.create(path, false, 0o644).unwrap();
    core.add_block(c.file_id).unwrap();
    core.complete(c.file_id, len, vec![len], None).unwrap();
    c.file_id
}

#[test]
fn a_core_that_does_not_lead_refuses_reads_and_writes() {
    let log = CaptureLog::default();
    let c = core(&log);
    let e = c.mkdir("/a", false).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotLeader);
    assert!(e.kind().retryable());
    assert_eq!(c.stat("/").unwrap_err().kind(), ErrorKind::NotLeader);
    assert!(log.bytes.lock().unwrap().is_empty(), "a refused mutation reached the log");
    c.set_leading(true);
    c.mkdir("/a", false).unwrap();
    c.set_leading(false);
    assert_eq!(c.mkdir("/b", false).unwrap_err().kind(), ErrorKind::NotLeader);
}

#[test]
fn records_applied_in_order_on_a_follower_give_the_leaders_state() {
    let (llog, flog) = (CaptureLog::default(), CaptureLog::default());
    let (leader, follower) = (core(&llog), core(&flog));
    leader.set_leading(true);
    leader.register_worker(None, "127.0.0.1", vec![9001, 9002], 1 << 30).unwrap();
    leader.mkdir("/t", false).unwrap();
    let id = write_file(&leader, "/t/a", 1000);
    leader.rename("/t/a", "/t/b").unwrap();

    let records = decode_records(&llog.bytes.lock().unwrap()).unwrap();
    assert_eq!(records.len() as u64, leader.last_seq());
    for (seq, m) in &records {
        follower.apply_committed(*seq, m).unwrap();
    }
    assert_eq!(follower.state_data(), leader.state_data());
    assert!(flog.bytes.lock().unwrap().is_empty(), "applying committed records journals nothing");

    // The follower takes over: it answers from what it applied and goes on where it ended.
    follower.set_leading(true);
    assert_eq!(follower.open("/t/b").unwrap().file_id, id);
    follower.mkdir("/u", false).unwrap();
    let next = decode_records(&flog.bytes.lock().unwrap()).unwrap();
    assert_eq!(next[0].0, records.len() as u64 + 1, "the new leader's first record follows the last committed");
}

#[test]
fn a_gap_in_committed_records_is_refused_and_reset_drops_speculation() {
    let (llog, flog) = (CaptureLog::default(), CaptureLog::default());
    let (leader, follower) = (core(&llog), core(&flog));
    leader.set_leading(true);
    leader.mkdir("/a", false).unwrap();
    leader.mkdir("/b", false).unwrap();
    let records = decode_records(&llog.bytes.lock().unwrap()).unwrap();
    let e = follower.apply_committed(records[1].0, &records[1].1).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::CorruptData);

    // A deposed leader goes back to the committed state (here: only the first record).
    let mut committed = State::new();
    committed.apply(&records[0].1).unwrap();
    leader.reset(committed, records[0].0);
    assert_eq!(leader.last_seq(), 1);
    assert!(leader.stat("/a").is_ok());
    assert_eq!(leader.stat("/b").unwrap_err().kind(), ErrorKind::NotFound);
}

#[test]
fn a_damaged_batch_is_refused_whole() {
    let log = CaptureLog::default();
    let c = core(&log);
    c.set_leading(true);
    c.mkdir("/a", false).unwrap();
    c.mkdir("/b", false).unwrap();
    let mut bytes = log.bytes.lock().unwrap().clone();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    assert_eq!(decode_records(&bytes).unwrap_err().kind(), ErrorKind::CorruptData);
    assert_eq!(decode_records(&bytes[..bytes.len() - 3]).unwrap_err().kind(), ErrorKind::CorruptData);
}

/// A core over `log` with the clock `clock` and a write lease of 10 s.
fn core_at(log: &CaptureLog, clock: &ManualClock) -> MasterCore {
    let cfg = MasterConfig { block_size: 64 * 1024, write_lease: Duration::from_secs(10), ..MasterConfig::default() };
    MasterCore::replicated(cfg, State::new(), 0, Box::new(log.clone()), Arc::new(clock.clone())).unwrap()
}

/// A write whose writer is gone (its `complete` failed as a leader was killed) is removed
/// within about one write lease of its last progress however often leadership moves; a new
/// leader used to start every lease anew, so the file stayed as long as leadership kept
/// moving. A writer that keeps adding blocks meanwhile is never cut short.
#[test]
fn a_dead_writers_file_expires_within_a_lease_however_leadership_moves() {
    let (log, clock) = (CaptureLog::default(), ManualClock::new(1_000_000));
    let c = core_at(&log, &clock);
    c.set_leading(true);
    c.register_worker(None, "127.0.0.1", vec![9001], 1 << 30).unwrap();
    let dead = c.create("/dead", false, 0o644).unwrap();
    c.add_block(dead.file_id).unwrap();
    let live = c.create("/live", false, 0o644).unwrap();
    let last_progress = clock.now_ms();
    let (lease, skew) = (c.config().write_lease.as_millis() as u64, c.config().clock_skew.as_millis() as u64);
    let mut removed_at = None;
    for second in 1..=60u64 {
        clock.advance(Duration::from_secs(1));
        if second % 4 == 0 {
            c.set_leading(false);
            c.set_leading(true);
        }
        if second % 4 == 2 {
            c.add_block(live.file_id).unwrap();
        }
        let removed = c.expire_writers().unwrap();
        assert!(!removed.contains(&"/live".to_string()), "a writer adding blocks was cut short at {second} s");
        if removed.contains(&"/dead".to_string()) {
            removed_at.get_or_insert(clock.now_ms());
        }
    }
    let at = removed_at.expect("the dead writer's file outlived 6 leases while leadership moved");
    assert!(at > last_progress + lease, "removed {} ms after its last progress", at - last_progress);
    assert!(at <= last_progress + lease + skew + 1_000, "removed {} ms after its last progress", at - last_progress);
    assert!(c.stat("/live").is_ok());
}

/// A new leader whose clock is ahead of the old one's (by at most `clock_skew`) gives a
/// writer the whole lease from its last progress, not less.
#[test]
fn a_new_leader_with_a_clock_ahead_does_not_cut_a_live_writer_short() {
    let (log, clock) = (CaptureLog::default(), ManualClock::new(1_000_000));
    let c = core_at(&log, &clock);
    c.set_leading(true);
    c.register_worker(None, "127.0.0.1", vec![9001], 1 << 30).unwrap();
    let f = c.create("/f", false, 0o644).unwrap();
    c.add_block(f.file_id).unwrap();
    let skew = c.config().clock_skew;
    // Leadership moves at once to a master whose clock reads `skew` later.
    c.set_leading(false);
    clock.advance(skew);
    c.set_leading(true);
    clock.advance(c.config().write_lease - Duration::from_millis(1));
    assert!(c.expire_writers().unwrap().is_empty(), "cut short by the new leader's clock");
    clock.advance(Duration::from_secs(1));
    assert_eq!(c.expire_writers().unwrap(), vec!["/f".to_string()]);
}

/// During a rolling upgrade the last leader of the earlier release journals blocks without
/// their time: a follower that applies one counts it as progress seen then, so when it leads
/// it does not cut short a writer whose file was created more than a lease ago.
#[test]
fn blocks_without_their_time_from_an_earlier_leader_count_as_progress_when_applied() {
    use cv_master_core::state::Mutation;
    let (log, clock) = (CaptureLog::default(), ManualClock::new(1_000_000));
    let c = core_at(&log, &clock);
    let created = clock.now_ms();
    let records = [
        Mutation::RegisterWorker {
            worker_id: 1,
            host: "127.0.0.1".into(),
            shard_ports: vec![9001],
            capacity: 1 << 30,
            now: created,
            zone: String::new(),
        },
        Mutation::Create {
            path: "/big".into(),
            overwrite: false,
            file_id: 2,
            version: 1,
            mode: 0o644,
            mtime: created,
            request_id: 0,
        },
    ];
    for (i, m) in records.iter().enumerate() {
        c.apply_committed(i as u64 + 1, m).unwrap();
    }
    // A long write: its latest block, 20 s after the create, in the earlier release's record.
    clock.advance(Duration::from_secs(20));
    let block =
        Mutation::AddBlock { file_id: 2, block_id: cv_wire::block_id(1, 0), worker: 1, shard: 0, replicas: vec![] };
    c.apply_committed(3, &block).unwrap();
    clock.advance(Duration::from_secs(1));
    c.set_leading(true);
    clock.advance(Duration::from_secs(5));
    assert!(c.expire_writers().unwrap().is_empty(), "a writer that added a block 6 s ago was cut short");
    clock.advance(Duration::from_secs(5));
    assert_eq!(c.expire_writers().unwrap(), vec!["/big".to_string()]);
}

/// A master that restarts (a killed leader coming back) and later leads does not give a gone
/// writer's file a lease from its own start: leadership moving through restarted masters
/// would otherwise keep such a file for ever.
#[test]
fn a_restarted_master_that_leads_counts_leases_from_the_writers_progress() {
    let (log, clock) = (CaptureLog::default(), ManualClock::new(1_000_000));
    let c = core_at(&log, &clock);
    c.set_leading(true);
    c.register_worker(None, "127.0.0.1", vec![9001], 1 << 30).unwrap();
    let f = c.create("/dead", false, 0o644).unwrap();
    c.add_block(f.file_id).unwrap();
    // Another master, started 8 s later from this state, leads 1 s after that.
    clock.advance(Duration::from_secs(8));
    let state = cv_master_core::state::State::from_data(c.state_data());
    let cfg = c.config().clone();
    let other =
        MasterCore::replicated(cfg, state, c.last_seq(), Box::new(log.clone()), Arc::new(clock.clone())).unwrap();
    clock.advance(Duration::from_secs(1));
    other.set_leading(true);
    clock.advance(Duration::from_secs(5));
    assert_eq!(other.expire_writers().unwrap(), vec!["/dead".to_string()], "14 s after its last progress");
}
