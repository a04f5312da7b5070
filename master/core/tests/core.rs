//! MasterCore end to end: open with tail in one call, restart durability, placement, ticks,
//! async acknowledgement, group commit under concurrency, poisoning.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use cv_master_core::config::ManualClock;
use cv_master_core::core::{Storages, Tail};
use cv_master_core::journal::MemStorage;
use cv_master_core::{ErrorKind, MasterConfig, MasterCore};

fn mem_core(j: &MemStorage, s: &MemStorage, clock: &ManualClock, cfg: MasterConfig) -> MasterCore {
    let storages = Storages { journal: Box::new(j.clone()), snapshot: Box::new(s.clone()) };
    MasterCore::start(cfg, storages, Arc::new(clock.clone())).unwrap()
}

fn parquet_bytes(data: usize, footer: usize) -> Vec<u8> {
    let mut f = b"PAR1".to_vec();
    f.extend(std::iter::repeat_n(1u8, data));
    f.extend(std::iter::repeat_n(2u8, footer));
    f.extend((footer as u32).to_le_bytes());
    f.extend(b"PAR1");
    f
}

/// Writes a file through the core the way a client would; returns its bytes.
fn write_file(core: &MasterCore, path: &str, bytes: &[u8], block: usize) -> u64 {
    let c = core.create(path, false, 0o644).unwrap();
    let mut lens = Vec::new();
    for chunk in bytes.chunks(block) {
        core.add_block(c.file_id).unwrap();
        lens.push(chunk.len() as u64);
    }
    let probe = bytes.len().min(64 * 1024);
    let tail = (bytes.len() as u64 - probe as u64, bytes[bytes.len() - probe..].to_vec());
    core.complete(c.file_id, bytes.len() as u64, lens, Some(tail)).unwrap();
    c.file_id
}

#[test]
fn open_returns_blocks_and_footer_in_one_call() {
    let (j, s, clock) = (MemStorage::new(), MemStorage::new(), ManualClock::new(1_000));
    let cfg = MasterConfig { block_size: 64 * 1024, ..MasterConfig::default() };
    let core = mem_core(&j, &s, &clock, cfg);
    assert_eq!(core.add_block(99).unwrap_err().kind(), ErrorKind::NoWorkers);
    let w1 = core.register_worker(None, "127.0.0.1", vec![9001, 9002], 1 << 30).unwrap();
    let w2 = core.register_worker(None, "127.0.0.2", vec![9101, 9102], 1 << 30).unwrap();
    core.mkdir("/t", false).unwrap();
    let bytes = parquet_bytes(200_000, 3_000);
    let id = write_file(&core, "/t/a.parquet", &bytes, 64 * 1024);
    let info = core.open("/t//./a.parquet").unwrap();
    assert_eq!((info.file_id, info.length), (id, bytes.len() as u64));
    assert_eq!(info.blocks.len(), 4);
    let mut offset = 0;
    for b in &info.blocks {
        assert_eq!(b.offset_in_file, offset);
        assert!(b.worker_id == w1 || b.worker_id == w2);
        let ports = if b.worker_id == w1 { [9001, 9002] } else { [9101, 9102] };
        assert_eq!(b.addr.map(|a| a.port()), Some(ports[usize::from(b.shard)]));
        offset += b.len;
    }
    assert_eq!(offset, bytes.len() as u64);
    match &info.tail {
        Tail::Cached { offset, bytes: tail } => {
            assert_eq!(tail.len(), 3_008, "exactly the Parquet footer + length + magic");
            assert_eq!(*offset, (bytes.len() - 3_008) as u64);
            assert_eq!(&tail[..], &bytes[bytes.len() - 3_008..]);
        }
        Tail::Evicted => panic!("tail must be cached"),
    }
    assert_eq!(core.tail_stats().hits, 1);
    // A tail that does not end at the file's end is refused.
    let c = core.create("/t/b", false, 0o644).unwrap();
    let e = core.complete(c.file_id, 10, vec![], Some((0, vec![1, 2]))).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    assert_eq!(core.open("/t/b").unwrap_err().kind(), ErrorKind::FileIncomplete);
    assert_eq!(core.open("/t").unwrap_err().kind(), ErrorKind::IsADirectory);
    assert_eq!(core.open("t/a").unwrap_err().kind(), ErrorKind::InvalidPath);
}

#[test]
fn restart_keeps_namespace_but_not_tails() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = MasterConfig { journal_dir: dir.path().to_owned(), ..MasterConfig::default() };
    let clock = Arc::new(ManualClock::new(5));
    let bytes = parquet_bytes(1000, 100);
    let data = {
        let core = MasterCore::start_dir(cfg.clone(), clock.clone()).unwrap();
        core.register_worker(None, "h", vec![1], 100).unwrap();
        core.mkdir("/a/b", true).unwrap();
        write_file(&core, "/a/b/f", &bytes, 4 << 20);
        core.rename("/a/b", "/a/c").unwrap();
        core.mount("/a", "s3://bkt/a", cv_master_core::state::MountMode::Fs, vec![]).unwrap();
        assert!(matches!(core.open("/a/c/f").unwrap().tail, Tail::Cached { .. }));
        core.state_data()
    };
    let core = MasterCore::start_dir(cfg, clock).unwrap();
    assert_eq!(core.state_data(), data);
    assert_eq!(core.recovery().replayed, 7);
    let info = core.open("/a/c/f").unwrap();
    assert_eq!((info.length, info.tail), (bytes.len() as u64, Tail::Evicted));
    assert_eq!(core.list_mounts().unwrap().len(), 1);
}

#[test]
fn snapshots_bound_the_journal() {
    let (j, s, clock) = (MemStorage::new(), MemStorage::new(), ManualClock::new(1));
    let cfg = MasterConfig { snapshot_every: 10, ..MasterConfig::default() };
    let data = {
        let core = mem_core(&j, &s, &clock, cfg.clone());
        for i in 0..25 {
            core.mkdir(&format!("/d{i}"), false).unwrap();
        }
        assert_eq!(core.journal_stats().snapshots.load(Ordering::Relaxed), 2);
        core.state_data()
    };
    let core = mem_core(&j, &s, &clock, cfg);
    assert_eq!(core.state_data(), data);
    assert_eq!((core.recovery().snapshot_seq, core.recovery().replayed), (20, 5));
}

#[test]
fn tick_marks_silent_workers_lost() {
    let (j, s, clock) = (MemStorage::new(), MemStorage::new(), ManualClock::new(0));
    // One copy of each block, so that losing its worker loses it.
    let cfg = MasterConfig { heartbeat_timeout: Duration::from_secs(10), replicas: 1, ..MasterConfig::default() };
    let core = mem_core(&j, &s, &clock, cfg);
    let w1 = core.register_worker(None, "a", vec![1], 1).unwrap();
    let w2 = core.register_worker(None, "b", vec![1], 1).unwrap();
    let f = core.create("/f", false, 0o644).unwrap();
    let blocks: Vec<_> = (0..20).map(|_| core.add_block(f.file_id).unwrap()).collect();
    clock.advance(Duration::from_secs(8));
    core.heartbeat(w2, 1, 0, vec![], vec![]).unwrap();
    assert_eq!(core.tick().unwrap().lost_workers, Vec::<u64>::new());
    clock.advance(Duration::from_secs(5));
    let report = core.tick().unwrap();
    assert_eq!(report.lost_workers, vec![w1]);
    let mut on_w1: Vec<_> = blocks.iter().filter(|b| b.worker_id == w1).map(|b| b.block_id).collect();
    on_w1.sort_unstable();
    assert!(!on_w1.is_empty());
    assert_eq!(report.missing_blocks, on_w1);
    // New blocks go only to the live worker; the lost one comes back with a heartbeat.
    assert!((0..10).all(|_| core.add_block(f.file_id).unwrap().worker_id == w2));
    assert_eq!(core.register_worker(Some(w1), "a", vec![1], 1).unwrap(), w1);
    assert_eq!(core.tick().unwrap(), Default::default());
}

/// A restarted master counts a worker's silence from its own start: the heartbeats it missed
/// while down do not make it declare the worker's blocks lost the moment it is back.
#[test]
fn a_restarted_master_gives_workers_a_heartbeat_timeout_to_come_back() {
    let (j, s, clock) = (MemStorage::new(), MemStorage::new(), ManualClock::new(0));
    let cfg = MasterConfig { heartbeat_timeout: Duration::from_secs(10), ..MasterConfig::default() };
    let core = mem_core(&j, &s, &clock, cfg.clone());
    let w = core.register_worker(None, "a", vec![1], 1).unwrap();
    drop(core);
    // Down for longer than the timeout: the journal's last heartbeat is 30 s old.
    clock.advance(Duration::from_secs(30));
    let core = mem_core(&j, &s, &clock, cfg);
    assert_eq!(core.tick().unwrap(), Default::default(), "lost at once after the restart");
    clock.advance(Duration::from_secs(10));
    assert_eq!(core.tick().unwrap(), Default::default(), "lost before a whole timeout since the start");
    clock.advance(Duration::from_millis(1));
    assert_eq!(core.tick().unwrap().lost_workers, vec![w], "silent for a whole timeout since the start");
}

#[test]
fn delete_hands_block_deletes_to_the_worker() {
    let (j, s, clock) = (MemStorage::new(), MemStorage::new(), ManualClock::new(0));
    let core = mem_core(&j, &s, &clock, MasterConfig::default());
    let w = core.register_worker(None, "a", vec![1, 2, 3], 1).unwrap();
    let f = core.create("/f", false, 0o644).unwrap();
    let mut ids: Vec<_> = (0..3).map(|_| core.add_block(f.file_id).unwrap().block_id).collect();
    ids.sort_unstable();
    core.complete(f.file_id, 3, vec![1, 1, 1], None).unwrap();
    assert_eq!(core.delete("/f", false).unwrap(), 3);
    assert_eq!(core.heartbeat(w, 1, 0, vec![], vec![]).unwrap().delete_blocks, ids);
    assert!(core.heartbeat(w, 1, 0, vec![], vec![]).unwrap().delete_blocks.is_empty());
}

struct ThreadWaker(std::thread::Thread);
impl Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
}

/// A minimal executor: the crate's async API must work without tokio.
fn block_on<F: std::future::Future>(fut: F) -> F::Output {
    let mut fut = std::pin::pin!(fut);
    let waker = Waker::from(Arc::new(ThreadWaker(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    loop {
        if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
            return v;
        }
        std::thread::park();
    }
}

#[test]
fn async_acknowledgement() {
    let (j, s, clock) = (MemStorage::new(), MemStorage::new(), ManualClock::new(0));
    let core = mem_core(&j, &s, &clock, MasterConfig::default());
    block_on(async {
        core.begin_mkdir(&cv_master_core::CvPath::parse("/x").unwrap(), false).unwrap().wait_async().await.unwrap();
        let c = core
            .begin_create(&cv_master_core::CvPath::parse("/x/f").unwrap(), false, 0o600, 0)
            .unwrap()
            .wait_async()
            .await
            .unwrap();
        core.begin_complete(c.file_id, 0, vec![], None, None).unwrap().wait_async().await.unwrap();
        let info = core.open_async("/x/f").await.unwrap();
        assert_eq!(info.tail, Tail::Cached { offset: 0, bytes: Arc::from(&[][..]) });
    });
    assert_eq!(j.unsynced_len(), 0, "acknowledged means synced");
}

#[test]
fn concurrent_creates_are_group_committed() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = MasterConfig { journal_dir: dir.path().to_owned(), ..MasterConfig::default() };
    let core = MasterCore::start_dir(cfg.clone(), Arc::new(ManualClock::new(0))).unwrap();
    std::thread::scope(|sc| {
        for t in 0..8 {
            let core = &core;
            sc.spawn(move || {
                for i in 0..25 {
                    core.create(&format!("/f{t}-{i}"), false, 0o644).unwrap();
                }
            });
        }
    });
    let batches = core.journal_stats().batches.load(Ordering::Relaxed);
    assert_eq!(core.journal_stats().records.load(Ordering::Relaxed), 200);
    assert!(batches < 200, "{batches} syncs for 200 creates");
    drop(core);
    let core = MasterCore::start_dir(cfg, Arc::new(ManualClock::new(0))).unwrap();
    assert_eq!(core.list("/", None, 1000).unwrap().entries.len(), 200);
}

#[test]
fn journal_failure_poisons_the_master() {
    let (j, s, clock) = (MemStorage::new(), MemStorage::new(), ManualClock::new(0));
    let core = mem_core(&j, &s, &clock, MasterConfig::default());
    core.mkdir("/ok", false).unwrap();
    j.fail_after(0);
    let e = core.mkdir("/lost", false).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Io);
    assert!(e.retryable());
    assert_eq!(core.mkdir("/x", false).unwrap_err().kind(), ErrorKind::Poisoned);
    assert_eq!(core.stat("/ok").unwrap_err().kind(), ErrorKind::Poisoned);
    drop(core);
    j.crash(0);
    let core = mem_core(&j, &s, &clock, MasterConfig::default());
    assert!(core.stat("/ok").is_ok());
    assert_eq!(core.stat("/lost").unwrap_err().kind(), ErrorKind::NotFound);
}

#[test]
fn core_is_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<MasterCore>();
}

#[test]
fn add_block_at_is_idempotent_for_retries() {
    let (j, s, clock) = (MemStorage::new(), MemStorage::new(), ManualClock::new(1_000));
    let core = mem_core(&j, &s, &clock, MasterConfig::default());
    core.register_worker(None, "127.0.0.1", vec![9001, 9002], 1 << 30).unwrap();
    let c = core.create("/f", false, 0o644).unwrap();
    let b0 = core.begin_add_block_at(c.file_id, 0, &[]).unwrap().wait().unwrap();
    // The reply to that call was "lost": the retry gets the same block, not a second one.
    let again = core.begin_add_block_at(c.file_id, 0, &[]).unwrap().wait().unwrap();
    assert_eq!(again, b0);
    let b1 = core.begin_add_block_at(c.file_id, 1, &[]).unwrap().wait().unwrap();
    assert_ne!(b1.block_id, b0.block_id);
    assert_eq!(b1.index, 1);
    // Skipping ahead is refused.
    let err = core.begin_add_block_at(c.file_id, 5, &[]).map(|_| ()).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    core.complete(c.file_id, 10, vec![5, 5], None).unwrap();
    assert_eq!(core.open("/f").unwrap().blocks.len(), 2);
    // A retried completion (its reply lost, or the master restarted and forgot it) is done;
    // one with other content is refused.
    core.complete(c.file_id, 10, vec![5, 5], None).unwrap();
    let err = core.complete(c.file_id, 11, vec![5, 6], None).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::FileNotWritable);
    // Once complete, no block can be added, not even a "retry".
    let err = core.begin_add_block_at(c.file_id, 0, &[]).map(|_| ()).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::FileNotWritable);
}

#[test]
fn an_fs_mount_with_unexported_files_is_not_unmounted_unless_forced() {
    let (j, s, clock) = (MemStorage::new(), MemStorage::new(), ManualClock::new(1));
    let core = mem_core(&j, &s, &clock, MasterConfig::default());
    core.register_worker(None, "h", vec![1], 100).unwrap();
    core.mount("/fs", "s3://bkt/fs", cv_master_core::state::MountMode::Fs, vec![]).unwrap();
    core.mount("/c", "s3://bkt/c", cv_master_core::state::MountMode::Cache, vec![]).unwrap();
    core.mkdir("/fs/d", true).unwrap();
    write_file(&core, "/fs/d/a", b"abc", 4 << 20);
    write_file(&core, "/fs/b", b"de", 4 << 20);
    let e = core.unmount("/fs", false).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotEmpty);
    assert!(e.to_string().contains("2 file(s) not yet exported"), "{e}");
    assert_eq!(core.list_mounts().unwrap().len(), 2, "nothing changed");
    // A cache mount has no exports to wait for.
    core.unmount("/c", false).unwrap();
    core.unmount("/fs", true).unwrap();
    assert!(core.list_mounts().unwrap().is_empty());
    assert_eq!(core.open("/fs/d/a").unwrap().length, 3, "the files stay in cv");
}

/// A writer that died leaves no half-written entry for ever: the write lease removes a file
/// whose writer went silent, an add-block or a completion keeps it, and a restarted master
/// gives every file being written a whole lease from its start.
#[test]
fn a_file_whose_writer_went_silent_is_removed_after_the_write_lease() {
    let (j, s, clock) = (MemStorage::new(), MemStorage::new(), ManualClock::new(1_000));
    let cfg = MasterConfig { write_lease: Duration::from_secs(10), ..MasterConfig::default() };
    let core = mem_core(&j, &s, &clock, cfg.clone());
    core.register_worker(None, "127.0.0.1", vec![9001], 1 << 30).unwrap();
    let dead = core.create("/dead", false, 0o644).unwrap();
    core.begin_add_block_at(dead.file_id, 0, &[]).unwrap().wait().unwrap();
    let slow = core.create("/slow", false, 0o644).unwrap();
    let done = core.create("/done", false, 0o644).unwrap();
    core.complete(done.file_id, 0, vec![], None).unwrap();
    clock.advance(Duration::from_secs(8));
    core.begin_add_block_at(slow.file_id, 0, &[]).unwrap().wait().unwrap();
    assert!(core.expire_writers().unwrap().is_empty(), "nothing is past its lease yet");
    clock.advance(Duration::from_secs(3));
    assert_eq!(core.expire_writers().unwrap(), vec!["/dead".to_string()]);
    assert_eq!(core.stat("/dead").unwrap_err().kind(), ErrorKind::NotFound);
    assert!(core.stat("/slow").is_ok() && core.open("/done").is_ok());
    // The removed file's block is queued for deletion on its worker.
    let w = core.register_worker(None, "127.0.0.1", vec![9001], 1 << 30).unwrap();
    assert_eq!(core.heartbeat(w, 1 << 30, 0, vec![], vec![]).unwrap().delete_blocks.len(), 1);

    // Restarted long after: the writer of /slow gets a whole lease from the restart.
    core.shutdown();
    clock.advance(Duration::from_secs(60));
    let core = mem_core(&j, &s, &clock, cfg);
    assert!(core.expire_writers().unwrap().is_empty(), "a restart is not the writer's silence");
    clock.advance(Duration::from_secs(11));
    assert_eq!(core.expire_writers().unwrap(), vec!["/slow".to_string()]);
    assert!(core.open("/done").is_ok());
}

/// A create retried across a master restart (same request id) is answered with the file its
/// first attempt made, not `AlreadyExists`; another create of the path still is refused, and
/// once the file is complete the id no longer stands for it.
#[test]
fn a_create_retried_across_a_restart_gets_its_file() {
    let (j, s, clock) = (MemStorage::new(), MemStorage::new(), ManualClock::new(0));
    let path = cv_master_core::CvPath::parse("/f").unwrap();
    let first = {
        let core = mem_core(&j, &s, &clock, MasterConfig::default());
        let c = core.begin_create(&path, false, 0o644, 41).unwrap().wait().unwrap();
        core.shutdown();
        c
    };
    let core = mem_core(&j, &s, &clock, MasterConfig::default());
    let again = core.begin_create(&path, false, 0o644, 41).unwrap().wait().unwrap();
    assert_eq!(again, first);
    let other = core.begin_create(&path, false, 0o644, 42).and_then(|p| p.wait()).unwrap_err();
    assert_eq!(other.kind(), ErrorKind::AlreadyExists);
    core.complete(first.file_id, 0, vec![], None).unwrap();
    let after = core.begin_create(&path, false, 0o644, 41).and_then(|p| p.wait()).unwrap_err();
    assert_eq!(after.kind(), ErrorKind::AlreadyExists, "a complete file is not a retry's answer");
}

/// An overwrite is published when it completes: until then opens get the previous version
/// with its tail; a replacement whose writer went silent expires by the write lease (also
/// across a restart, which finds it again) and leaves that version as it was.
#[test]
fn a_replacement_whose_writer_died_leaves_the_previous_version() {
    let (j, s, clock) = (MemStorage::new(), MemStorage::new(), ManualClock::new(1_000));
    let cfg = MasterConfig { write_lease: Duration::from_secs(10), ..MasterConfig::default() };
    let core = mem_core(&j, &s, &clock, cfg.clone());
    core.register_worker(None, "127.0.0.1", vec![9001], 1 << 30).unwrap();
    let old = parquet_bytes(1000, 100);
    let old_id = write_file(&core, "/t.parquet", &old, 4 << 20);

    let new = core.create("/t.parquet", true, 0o644).unwrap();
    core.begin_add_block_at(new.file_id, 0, &[]).unwrap().wait().unwrap();
    let open = core.open("/t.parquet").unwrap();
    assert_eq!((open.file_id, open.length), (old_id, old.len() as u64), "the path shows the old version");
    let Tail::Cached { bytes, .. } = open.tail else { panic!("the old version's tail is kept") };
    assert!(old.ends_with(&bytes));

    core.shutdown();
    clock.advance(Duration::from_secs(60));
    let core = mem_core(&j, &s, &clock, cfg);
    assert_eq!(core.open("/t.parquet").unwrap().file_id, old_id, "a restart does not publish it");
    clock.advance(Duration::from_secs(11));
    assert_eq!(core.expire_writers().unwrap(), vec!["/t.parquet".to_string()]);
    assert_eq!(core.open("/t.parquet").unwrap().file_id, old_id, "expiry removed the replacement only");
    // Its block is queued for deletion; the old version's is not.
    let w = core.register_worker(None, "127.0.0.1", vec![9001], 1 << 30).unwrap();
    assert_eq!(core.heartbeat(w, 1 << 30, 0, vec![], vec![]).unwrap().delete_blocks.len(), 1);
    assert!(core.complete(new.file_id, 0, vec![], None).is_err(), "an expired replacement cannot be published");
}
