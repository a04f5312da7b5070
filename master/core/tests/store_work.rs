//! The store work the core plans under mounts (`core/store_work.rs`) and its tail sizing: what
//! an export uploads and when it is refused, which queued deletes a drain may make, which keys a
//! rename moves objects to, and the reads a tail takes.

use std::sync::Arc;

use cv_master_core::config::ManualClock;
use cv_master_core::core::{ExportStep, ObjectHead, OpenStep, Stated, Storages};
use cv_master_core::journal::MemStorage;
use cv_master_core::state::{MountMode, UfsObject};
use cv_master_core::{CvPath, ErrorKind, MasterConfig, MasterCore};

fn core() -> MasterCore {
    let storages = Storages { journal: Box::new(MemStorage::new()), snapshot: Box::new(MemStorage::new()) };
    let cfg = MasterConfig { block_size: 1_000, default_tail_bytes: 100, ..MasterConfig::default() };
    let core = MasterCore::start(cfg, storages, Arc::new(ManualClock::new(1_000))).unwrap();
    core.register_worker(None, "10.0.0.1", vec![7000], 1 << 30).unwrap();
    core.register_worker(None, "10.0.0.2", vec![7000], 1 << 30).unwrap();
    core
}

fn cv(p: &str) -> CvPath {
    CvPath::parse(p).unwrap()
}

fn write(core: &MasterCore, path: &str, len: u64) -> (u64, u64) {
    if let Some(parent) = cv(path).parent().filter(|p| !p.is_root()) {
        core.mkdir(parent.as_str(), true).unwrap();
    }
    let f = core.create(path, false, 0o644).unwrap();
    core.add_block(f.file_id).unwrap();
    core.complete(f.file_id, len, vec![len], None).unwrap();
    (f.file_id, f.version)
}

#[test]
fn an_export_uploads_the_file_as_it_is_and_only_once() {
    let core = core();
    core.mkdir("/fs", false).unwrap();
    core.mount("/fs", "s3://b/fs", MountMode::Fs, vec![]).unwrap();
    let (id, version) = write(&core, "/fs/d/f", 700);
    let (_, queue) = core.export_queue(false, None).unwrap();
    assert_eq!(queue.iter().map(|e| e.0).collect::<Vec<_>>(), vec![id]);
    let (epoch, _) = core.export_queue(false, None).unwrap();
    assert!(core.export_queue(false, Some(epoch)).is_none(), "nothing changed: the list stands");

    // Another version than the one queued: refused, naming the path.
    let e = core.export_plan(id, version + 1, &cv("/fs/d/f")).map(|_| ()).unwrap_err();
    assert_eq!((e.kind(), e.context()), (ErrorKind::Changed, "/fs/d/f changed before its export"));
    let ExportStep::Upload(job) = core.export_plan(id, version, &cv("/fs/d/f")).unwrap().wait().unwrap() else {
        panic!("not exported yet");
    };
    assert_eq!((job.key.as_str(), job.open.length, job.open.blocks.len()), ("d/f", 700, 1));
    let object = UfsObject { mount: "/fs".into(), key: job.key.clone(), version: "e1".into() };
    core.begin_exported(id, version, object).unwrap().wait().unwrap();
    assert!(matches!(core.export_plan(id, version, &cv("/fs/d/f")).unwrap().wait().unwrap(), ExportStep::Done));
    assert!(!core.upload_orphaned(&job), "the file is still at its path");
    core.rename("/fs/d/f", "/fs/g").unwrap();
    assert!(core.upload_orphaned(&job), "moved away: the upload is nobody's");

    // Outside every mount there is nothing to export to.
    let (id, version) = write(&core, "/x", 10);
    let e = core.export_plan(id, version, &cv("/x")).map(|_| ()).unwrap_err();
    assert_eq!((e.kind(), e.context()), (ErrorKind::NotFound, "/x is no longer under a mount"));
}

#[test]
fn a_drain_deletes_only_what_is_still_queued() {
    let core = core();
    core.mkdir("/c", false).unwrap();
    core.mount("/c", "s3://b/c", MountMode::Cache, vec![]).unwrap();
    core.begin_objects_queued("/c", vec!["a".into(), "b".into()]).unwrap().wait().unwrap();
    assert!(core.deletes_queued());
    let batches = core.delete_batches();
    assert_eq!(batches.len(), 1);
    assert_eq!((batches[0].mount.path.as_str(), batches[0].keys.len()), ("/c", 2));
    core.begin_objects_deleted("/c", vec!["a".into()]).unwrap().wait().unwrap();
    let now = core.still_queued("/c", &batches[0].keys).unwrap();
    assert_eq!(now.keys, vec!["b".to_owned()], "a went meanwhile");
    core.unmount("/c", true).unwrap();
    assert!(core.still_queued("/c", &batches[0].keys).is_none(), "unmounted: the queue went with it");
    assert!(!core.deletes_queued());
}

#[test]
fn a_rename_moves_each_object_to_the_key_of_its_new_path() {
    let core = core();
    core.mkdir("/fs", false).unwrap();
    core.mount("/fs", "s3://b/fs", MountMode::Fs, vec![]).unwrap();
    for p in ["/fs/d/a", "/fs/d/e/b"] {
        let (id, version) = write(&core, p, 10);
        let object = UfsObject { mount: "/fs".into(), key: p[4..].into(), version: "e".into() };
        core.begin_exported(id, version, object).unwrap().wait().unwrap();
    }
    let mount = core.rename_mount(&cv("/fs/d")).unwrap();
    let mut moves: Vec<_> = core
        .rename_moves(&mount, &cv("/fs/d"), &cv("/fs/n"))
        .unwrap()
        .unwrap()
        .into_iter()
        .map(|m| (m.copy.object.key, m.to_key))
        .collect();
    moves.sort();
    assert_eq!(moves, vec![("d/a".into(), "n/a".into()), ("d/e/b".into(), "n/e/b".into())]);
    assert_eq!(core.subdirs(&cv("/fs/d")), Some(vec![cv("/fs/d/e")]));
    assert_eq!(core.subdirs(&cv("/fs/d/a")), None, "a file has none");
    assert!(core.rename_moves(&mount, &cv("/fs/d"), &cv("/fs/d")).unwrap().is_none(), "onto itself: nothing");
}

/// The first read of an object's tail is the default tail size; a second only when the
/// footer the first shows is larger and fits the tail cache.
#[test]
fn a_tail_is_read_in_one_range_unless_its_footer_is_larger() {
    let core = core();
    core.mkdir("/c", false).unwrap();
    core.mount("/c", "s3://b/c", MountMode::Cache, vec![]).unwrap();
    let Ok(OpenStep::Check(check)) = core.begin_open_cached(&cv("/c/p")) else { panic!("a first open checks") };
    assert_eq!(check.fail_open, None, "nothing held: the open waits for the store");
    let head = ObjectHead { len: 5_000, version: "e1".into(), mtime_ms: 1 };
    let Stated::Recording(pending, read) = core.object_stated(&check, Some(head), &|a, b| a == b).unwrap() else {
        panic!("a new object is recorded");
    };
    pending.wait().unwrap();
    assert_eq!(read.first, 4_900..5_000);
    // A parquet footer of 300 bytes: the last 8 bytes say so.
    let mut first = vec![0u8; 100];
    first[92..96].copy_from_slice(&300u32.to_le_bytes());
    first[96..].copy_from_slice(b"PAR1");
    assert_eq!(read.more(&first), Some(5_000 - 308..5_000));
    assert_eq!(read.more(&[0u8; 100]), None, "an unknown format keeps the default tail");
}
