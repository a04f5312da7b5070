use super::*;

fn p(s: &str) -> String {
    s.to_owned()
}

fn mkdir(st: &mut State, path: &str, parents: bool) -> Result<Applied> {
    st.apply(&Mutation::Mkdir { path: p(path), parents, mode: 0o755, mtime: 10 })
}

fn create(st: &mut State, path: &str, overwrite: bool) -> Result<InodeId> {
    let file_id = st.next_inode_id();
    let version = st.next_version();
    st.apply(&Mutation::Create { path: p(path), overwrite, file_id, version, mode: 0o644, mtime: 20, request_id: 0 })?;
    Ok(file_id)
}

fn worker(st: &mut State, shards: usize) -> WorkerId {
    let worker_id = st.next_worker_id();
    let ports = (0..shards).map(|i| 7000 + i as u16).collect();
    let m = Mutation::RegisterWorker {
        worker_id,
        host: p("127.0.0.1"),
        shard_ports: ports,
        capacity: 1 << 30,
        now: 0,
        zone: String::new(),
    };
    st.apply(&m).unwrap();
    worker_id
}

fn add_block(st: &mut State, file_id: InodeId, w: WorkerId) -> Result<BlockId> {
    let block_id = st.next_block_id();
    st.apply(&Mutation::AddBlock { file_id, block_id, worker: w, shard: 0, replicas: vec![] })?;
    Ok(block_id)
}

/// A file that replaces `path` when it is complete (`Mutation::Replace`).
fn replace(st: &mut State, path: &str) -> Result<InodeId> {
    replace_as(st, path, 0).map(|(id, _)| id)
}

fn replace_as(st: &mut State, path: &str, request_id: u64) -> Result<(InodeId, u64)> {
    let (file_id, version) = (st.next_inode_id(), st.next_version());
    st.apply(&Mutation::Replace { path: p(path), file_id, version, mode: 0o644, mtime: 20, request_id })?;
    Ok((file_id, version))
}

fn complete(st: &mut State, file_id: InodeId, lens: &[u64]) -> Result<Applied> {
    let length = lens.iter().sum();
    st.apply(&Mutation::Complete { file_id, length, block_lens: lens.to_vec(), mtime: 30 })
}

fn complete_if(st: &mut State, file_id: InodeId, lens: &[u64], expect: Expect) -> Result<Applied> {
    let length = lens.iter().sum();
    st.apply(&Mutation::CompleteIf { file_id, length, block_lens: lens.to_vec(), mtime: 30, expect })
}

/// A complete file of one 4-byte block at `path` (replacing what is there).
fn written(st: &mut State, path: &str, w: WorkerId) -> (InodeId, BlockId) {
    let f = replace(st, path).unwrap();
    let b = add_block(st, f, w).unwrap();
    complete(st, f, &[4]).unwrap();
    (f, b)
}

fn kind(r: Result<impl std::fmt::Debug>) -> crate::ErrorKind {
    r.expect_err("expected an error").kind()
}

fn cv(s: &str) -> CvPath {
    CvPath::parse(s).unwrap()
}

#[test]
fn mkdir_parents_and_errors() {
    let mut st = State::new();
    assert_eq!(kind(mkdir(&mut st, "/a/b", false)), ErrorKind::NotFound);
    mkdir(&mut st, "/a/b/c", true).unwrap();
    assert_eq!(st.stat(&cv("/a/b")).unwrap().kind, EntryKind::Dir);
    assert_eq!(kind(mkdir(&mut st, "/a", false)), ErrorKind::AlreadyExists);
    mkdir(&mut st, "/a", true).unwrap();
    create(&mut st, "/a/f", false).unwrap();
    assert_eq!(kind(mkdir(&mut st, "/a/f/x", true)), ErrorKind::NotADirectory);
    assert_eq!(kind(mkdir(&mut st, "/a/f", true)), ErrorKind::AlreadyExists);
    assert_eq!(kind(mkdir(&mut st, "/../x", true)), ErrorKind::InvalidPath);
}

#[test]
fn failed_mutation_changes_nothing() {
    let mut st = State::new();
    mkdir(&mut st, "/a", false).unwrap();
    create(&mut st, "/a/f", false).unwrap();
    let before = st.data().clone();
    assert!(mkdir(&mut st, "/a/f/x/y", true).is_err());
    assert!(create(&mut st, "/a/f", false).is_err());
    assert!(st.apply(&Mutation::Rename { src: p("/a"), dst: p("/a/z"), mtime: 1 }).is_err());
    assert!(st.apply(&Mutation::Delete { path: p("/a"), recursive: false, mtime: 1 }).is_err());
    assert_eq!(&before, st.data());
}

#[test]
fn create_overwrite_and_kinds() {
    let mut st = State::new();
    let w = worker(&mut st, 2);
    let f1 = create(&mut st, "/f", false).unwrap();
    let b = add_block(&mut st, f1, w).unwrap();
    assert_eq!(kind(create(&mut st, "/f", false)), ErrorKind::AlreadyExists);
    let f2 = create(&mut st, "/f", true).unwrap();
    assert_ne!(f1, f2);
    assert_eq!(st.pending_deletes(w), vec![b], "overwrite drops the old blocks");
    mkdir(&mut st, "/d", false).unwrap();
    assert_eq!(kind(create(&mut st, "/d", true)), ErrorKind::IsADirectory);
    assert_eq!(kind(create(&mut st, "/", true)), ErrorKind::IsADirectory);
    assert_eq!(kind(create(&mut st, "/nope/f", true)), ErrorKind::NotFound);
    // A reused file id is refused (ids come from the caller).
    let m = Mutation::Create {
        path: p("/g"),
        overwrite: false,
        file_id: f1,
        version: 99,
        mode: 0,
        mtime: 0,
        request_id: 0,
    };
    assert_eq!(kind(st.apply(&m)), ErrorKind::InvalidArgument);
}

#[test]
fn blocks_complete_open() {
    let mut st = State::new();
    let f = create(&mut st, "/f", false).unwrap();
    assert_eq!(kind(add_block(&mut st, f, 1)), ErrorKind::UnknownWorker);
    let w = worker(&mut st, 4);
    let b0 = add_block(&mut st, f, w).unwrap();
    let b1 = add_block(&mut st, f, w).unwrap();
    let incomplete = st.open_file(&cv("/f")).unwrap_err();
    assert_eq!(incomplete.kind(), ErrorKind::FileIncomplete);
    assert!(
        incomplete.context().starts_with("/f: ") && incomplete.context().contains("being written"),
        "{incomplete:?}"
    );
    let bad = Mutation::Complete { file_id: f, length: 10, block_lens: vec![4, 4], mtime: 5 };
    assert_eq!(kind(st.apply(&bad)), ErrorKind::InvalidArgument);
    let bad = Mutation::Complete { file_id: f, length: 4, block_lens: vec![4], mtime: 5 };
    assert_eq!(kind(st.apply(&bad)), ErrorKind::InvalidArgument);
    let ok = Mutation::Complete { file_id: f, length: 7, block_lens: vec![4, 3], mtime: 5 };
    st.apply(&ok).unwrap();
    assert_eq!(kind(st.apply(&ok)), ErrorKind::FileNotWritable);
    assert_eq!(kind(add_block(&mut st, f, w)), ErrorKind::FileNotWritable);
    let open = st.open_file(&cv("/f")).unwrap();
    assert_eq!(open.length, 7);
    assert_eq!(open.blocks.len(), 2);
    assert_eq!((open.blocks[0].block_id, open.blocks[0].offset_in_file, open.blocks[0].len), (b0, 0, 4));
    assert_eq!((open.blocks[1].block_id, open.blocks[1].offset_in_file, open.blocks[1].len), (b1, 4, 3));
    assert_eq!(open.blocks[0].addr, Some("127.0.0.1:7000".parse().unwrap()));
    assert!(open.blocks[0].worker_live);
    assert_eq!(st.stat(&cv("/f")).unwrap().state, Some(FileState::Complete));
}

#[test]
fn list_is_sorted_and_paged() {
    let mut st = State::new();
    for name in ["c", "a", "e", "b", "d"] {
        create(&mut st, &format!("/{name}"), false).unwrap();
    }
    let page = st.list(&CvPath::root(), None, 2).unwrap();
    let names: Vec<_> = page.entries.iter().map(|e| e.name.as_str()).collect();
    assert_eq!((names, page.more), (vec!["a", "b"], true));
    let page = st.list(&CvPath::root(), Some("b"), 10).unwrap();
    let names: Vec<_> = page.entries.iter().map(|e| e.name.as_str()).collect();
    assert_eq!((names, page.more), (vec!["c", "d", "e"], false));
    let page = st.list(&CvPath::root(), Some("bb"), 1).unwrap();
    assert_eq!((page.entries[0].name.as_str(), page.more), ("c", true));
    assert_eq!(kind(st.list(&cv("/a"), None, 1)), ErrorKind::NotADirectory);
    assert_eq!(kind(st.list(&CvPath::root(), None, 0)), ErrorKind::InvalidArgument);
}

#[test]
fn rename_files_and_dirs() {
    let mut st = State::new();
    mkdir(&mut st, "/a/b", true).unwrap();
    let f = create(&mut st, "/a/b/f", false).unwrap();
    let mv = |src: &str, dst: &str| Mutation::Rename { src: p(src), dst: p(dst), mtime: 30 };
    st.apply(&mv("/a/b", "/x")).unwrap();
    assert_eq!(st.stat(&cv("/x/f")).unwrap().id, f);
    assert_eq!(kind(st.stat(&cv("/a/b"))), ErrorKind::NotFound);
    assert_eq!(kind(st.apply(&mv("/x", "/x/y"))), ErrorKind::InvalidArgument);
    assert_eq!(kind(st.apply(&mv("/x", "/a"))), ErrorKind::AlreadyExists);
    assert_eq!(kind(st.apply(&mv("/nope", "/q"))), ErrorKind::NotFound);
    assert_eq!(kind(st.apply(&mv("/x/f", "/x/f/g"))), ErrorKind::NotADirectory);
    assert_eq!(kind(st.apply(&mv("/", "/q"))), ErrorKind::InvalidArgument);
    st.apply(&mv("/x/f", "/a/g")).unwrap();
    st.apply(&mv("/a/g", "/a/g")).unwrap();
    assert_eq!(st.stat(&cv("/a/g")).unwrap().id, f);
    // "/ab" is not inside "/a": moving /a to /ab is fine.
    st.apply(&mv("/a", "/ab")).unwrap();
    assert_eq!(st.stat(&cv("/ab/g")).unwrap().id, f);
}

#[test]
fn delete_recursive_queues_block_deletes() {
    let mut st = State::new();
    let w = worker(&mut st, 1);
    mkdir(&mut st, "/d/e", true).unwrap();
    let f = create(&mut st, "/d/e/f", false).unwrap();
    let b = add_block(&mut st, f, w).unwrap();
    let del = |path: &str, recursive| Mutation::Delete { path: p(path), recursive, mtime: 40 };
    assert_eq!(kind(st.apply(&del("/d", false))), ErrorKind::NotEmpty);
    assert_eq!(st.apply(&del("/d", true)).unwrap(), Applied::Deleted { blocks: 1 });
    assert_eq!(kind(st.stat(&cv("/d/e/f"))), ErrorKind::NotFound);
    assert!(st.data().blocks.is_empty());
    assert_eq!(st.data().inodes.len(), 1, "only the root is left");
    assert_eq!(kind(st.apply(&del("/", true))), ErrorKind::InvalidArgument);
    // The next heartbeat hands the delete out exactly once.
    let hb = Mutation::Heartbeat { worker_id: w, now: 1, capacity: 1, used: 0, added: vec![], removed: vec![] };
    assert_eq!(st.apply(&hb).unwrap(), Applied::Heartbeat { delete_blocks: vec![b], unpin_blocks: vec![] });
    assert_eq!(st.apply(&hb).unwrap(), Applied::Heartbeat { delete_blocks: vec![], unpin_blocks: vec![] });
}

#[test]
fn heartbeat_reports_and_orphans() {
    let mut st = State::new();
    let w = worker(&mut st, 1);
    let f = create(&mut st, "/f", false).unwrap();
    let b = add_block(&mut st, f, w).unwrap();
    let hb = Mutation::Heartbeat { worker_id: w, now: 5, capacity: 9, used: 3, added: vec![b, 777], removed: vec![] };
    assert_eq!(st.apply(&hb).unwrap(), Applied::Heartbeat { delete_blocks: vec![777], unpin_blocks: vec![] });
    assert!(st.data().blocks[&b].reported);
    assert_eq!(st.worker(w).unwrap().used, 3);
    let hb = Mutation::Heartbeat { worker_id: 42, now: 5, capacity: 9, used: 3, added: vec![], removed: vec![] };
    assert_eq!(kind(st.apply(&hb)), ErrorKind::UnknownWorker);
}

#[test]
fn lost_workers_report_missing_blocks_and_revive() {
    let mut st = State::new();
    let w1 = worker(&mut st, 2);
    let w2 = worker(&mut st, 2);
    let f = create(&mut st, "/f", false).unwrap();
    let b = add_block(&mut st, f, w1).unwrap();
    assert_eq!(st.expired_workers(1_000, 500, 0), vec![w1, w2]);
    let epoch = st.live_epoch();
    let lost = st.apply(&Mutation::WorkersLost { worker_ids: vec![w1], now: 1_000 }).unwrap();
    assert_eq!(lost, Applied::WorkersLost { missing_blocks: vec![b] });
    assert!(st.live_epoch() > epoch);
    assert_eq!(st.live_shards(), vec![(w2, 0), (w2, 1)]);
    assert_eq!(kind(add_block(&mut st, f, w1)), ErrorKind::NoWorkers);
    let hb = Mutation::Heartbeat { worker_id: w1, now: 2_000, capacity: 1, used: 0, added: vec![], removed: vec![] };
    st.apply(&hb).unwrap();
    assert_eq!(st.live_shards().len(), 4);
    assert_eq!(st.expired_workers(2_100, 500, 0), vec![w2]);
}

#[test]
fn mounts_are_stored() {
    let mut st = State::new();
    let m = Mutation::Mount {
        path: p("/data"),
        ufs_url: p("s3://bucket/prefix"),
        mode: MountMode::Cache,
        options: vec![(p("region"), p("us-east-1"))].into(),
    };
    st.apply(&m).unwrap();
    assert_eq!(kind(st.apply(&m)), ErrorKind::AlreadyExists);
    // A mutation in a log line names its options, never their values (credentials).
    let shown = format!("{m:?}");
    assert!(shown.contains("region=<hidden>") && !shown.contains("us-east-1"), "{shown}");
    let bad = Mutation::Mount { path: p("/x"), ufs_url: p("nope"), mode: MountMode::Fs, options: Default::default() };
    assert_eq!(kind(st.apply(&bad)), ErrorKind::InvalidArgument);
    assert_eq!(st.mounts().len(), 1);
    assert_eq!(st.mount_for(&cv("/data/t/1.parquet")).unwrap().ufs_url, "s3://bucket/prefix");
    assert!(st.mount_for(&cv("/database")).is_none());
    st.apply(&Mutation::Unmount { path: p("/data") }).unwrap();
    assert_eq!(kind(st.apply(&Mutation::Unmount { path: p("/data") })), ErrorKind::NotFound);
}

#[test]
fn a_restarted_worker_with_a_new_id_keeps_its_blocks() {
    let mut st = State::new();
    let old = worker(&mut st, 1);
    let f = create(&mut st, "/f", false).unwrap();
    let b = add_block(&mut st, f, old).unwrap();
    // The same host registers again under a new id (the old one is still live).
    let new = st.next_worker_id();
    let reg = Mutation::RegisterWorker {
        worker_id: new,
        host: p("127.0.0.1"),
        shard_ports: vec![9],
        capacity: 1,
        now: 2,
        zone: String::new(),
    };
    st.apply(&reg).unwrap();
    let hb = Mutation::Heartbeat { worker_id: new, now: 3, capacity: 1, used: 0, added: vec![b], removed: vec![] };
    assert_eq!(st.apply(&hb).unwrap(), Applied::Heartbeat { delete_blocks: vec![], unpin_blocks: vec![] });
    assert_eq!(st.data().blocks[&b].worker, new, "adopted, not dropped");
    // A worker on another host reporting a block a live worker owns: a stale copy, dropped.
    let other = st.next_worker_id();
    let reg = Mutation::RegisterWorker {
        worker_id: other,
        host: "x".into(),
        shard_ports: vec![9],
        capacity: 1,
        now: 4,
        zone: String::new(),
    };
    st.apply(&reg).unwrap();
    let hb = Mutation::Heartbeat { worker_id: other, now: 5, capacity: 1, used: 0, added: vec![b], removed: vec![] };
    assert_eq!(st.apply(&hb).unwrap(), Applied::Heartbeat { delete_blocks: vec![b], unpin_blocks: vec![] });
    assert_eq!(st.data().blocks[&b].worker, new);
}

#[test]
fn renames_stay_inside_their_mount_and_exports_land_where_the_file_is() {
    let mut st = State::new();
    for (path, mode) in [("/m", MountMode::Fs), ("/n", MountMode::Cache)] {
        let m = Mutation::Mount { path: p(path), ufs_url: p("s3://b/x"), mode, options: Default::default() };
        st.apply(&m).unwrap();
    }
    for d in ["/m/a", "/n", "/top"] {
        mkdir(&mut st, d, true).unwrap();
    }
    let f = create(&mut st, "/m/a/f", false).unwrap();
    st.apply(&Mutation::Complete { file_id: f, length: 0, block_lens: vec![], mtime: 30 }).unwrap();
    let mv = |src: &str, dst: &str| Mutation::Rename { src: p(src), dst: p(dst), mtime: 40 };
    // Across a mount boundary, in any direction: refused, nothing moves.
    assert_eq!(kind(st.apply(&mv("/m/a/f", "/n/f"))), ErrorKind::Unsupported);
    assert_eq!(kind(st.apply(&mv("/m/a/f", "/top/f"))), ErrorKind::Unsupported);
    create(&mut st, "/top/g", false).unwrap();
    assert_eq!(kind(st.apply(&mv("/top/g", "/m/g"))), ErrorKind::Unsupported);
    // A directory holding a mount point, or the mount point itself.
    mkdir(&mut st, "/outer/inner", true).unwrap();
    st.apply(&Mutation::Mount {
        path: p("/outer/inner"),
        ufs_url: p("fs:///tmp"),
        mode: MountMode::Fs,
        options: Default::default(),
    })
    .unwrap();
    assert_eq!(kind(st.apply(&mv("/outer", "/outer2"))), ErrorKind::InvalidArgument);
    assert_eq!(kind(st.apply(&mv("/m", "/m2"))), ErrorKind::InvalidArgument);
    assert!(st.lookup(&cv("/m/a/f")).is_ok());
    // Inside one mount: fine. An export recorded under the old key is refused; the new key is taken.
    st.apply(&mv("/m/a", "/m/b")).unwrap();
    let version = st.stat(&cv("/m/b/f")).unwrap().version;
    let at = |key: &str| UfsObject { mount: p("/m"), key: p(key), version: p("e1") };
    let old = Mutation::Exported { file_id: f, version, object: at("a/f") };
    assert_eq!(kind(st.apply(&old)), ErrorKind::InvalidArgument);
    assert!(st.ufs_object(f).is_none());
    st.apply(&Mutation::Exported { file_id: f, version, object: at("b/f") }).unwrap();
    assert_eq!(st.ufs_object(f).unwrap().key, "b/f");
    let copies = st.object_copies_under(&cv("/m"));
    assert_eq!(copies.len(), 1);
    assert_eq!(copies[0].path.as_str(), "/m/b/f");
}

#[test]
fn object_deletes_are_queued_with_the_delete_and_voided_by_a_new_copy() {
    let mut st = State::new();
    st.apply(&Mutation::Mount {
        path: p("/m"),
        ufs_url: p("s3://b/x"),
        mode: MountMode::Fs,
        options: Default::default(),
    })
    .unwrap();
    mkdir(&mut st, "/m", false).unwrap();
    let at = |key: &str, v: &str| UfsObject { mount: p("/m"), key: p(key), version: p(v) };
    let file = |st: &mut State, path: &str| {
        let f = create(st, path, false).unwrap();
        st.apply(&Mutation::Complete { file_id: f, length: 0, block_lens: vec![], mtime: 30 }).unwrap();
        let version = st.stat(&cv(path)).unwrap().version;
        (f, version)
    };
    let (f, v) = file(&mut st, "/m/a");
    st.apply(&Mutation::Exported { file_id: f, version: v, object: at("a", "e1") }).unwrap();
    // A plain delete (the object is already gone from the store) queues nothing.
    st.apply(&Mutation::Delete { path: p("/m/a"), recursive: false, mtime: 40 }).unwrap();
    assert!(st.queued_object_deletes().is_empty());
    let (f, v) = file(&mut st, "/m/a");
    st.apply(&Mutation::Exported { file_id: f, version: v, object: at("a", "e2") }).unwrap();
    st.apply(&Mutation::Remove { path: p("/m/a"), recursive: false, mtime: 50 }).unwrap();
    assert!(st.object_delete_queued("/m", "a"));
    // A new file exported to the same key takes it back off the queue.
    let (g, w) = file(&mut st, "/m/a");
    st.apply(&Mutation::Exported { file_id: g, version: w, object: at("a", "e3") }).unwrap();
    assert!(!st.object_delete_queued("/m", "a"));
    // A move queues the old key, never the new one.
    st.apply(&Mutation::ObjectsQueued { mount: p("/m"), keys: vec![p("b")] }).unwrap();
    // A copy under src missing from the list (recorded since it was made): refused, nothing moves.
    let unlisted = Mutation::RenameObjects { src: p("/m/a"), dst: p("/m/b"), mtime: 60, objects: vec![] };
    assert_eq!(kind(st.apply(&unlisted)), ErrorKind::Changed);
    assert!(st.lookup(&cv("/m/a")).is_ok());
    let objects = vec![(g, w, at("b", "e4")), (9_999, 1, at("stale", "e5"))];
    st.apply(&Mutation::RenameObjects { src: p("/m/a"), dst: p("/m/b"), mtime: 60, objects }).unwrap();
    assert_eq!(st.ufs_object(g).unwrap().key, "b");
    assert_eq!(st.queued_object_deletes(), vec![(p("/m"), vec![p("a")])]);
    // A rename that fails changes nothing, objects included.
    let objects = vec![(g, w, at("c", "e6"))];
    assert!(st.apply(&Mutation::RenameObjects { src: p("/m/nope"), dst: p("/m/c"), mtime: 61, objects }).is_err());
    assert_eq!(st.ufs_object(g).unwrap().key, "b");
    st.apply(&Mutation::ObjectsDeleted { mount: p("/m"), keys: vec![p("a")] }).unwrap();
    assert!(st.queued_object_deletes().is_empty());
    // Unmounting drops what is queued for that store.
    st.apply(&Mutation::Remove { path: p("/m/b"), recursive: false, mtime: 70 }).unwrap();
    assert!(st.object_delete_queued("/m", "b"));
    st.apply(&Mutation::Unmount { path: p("/m") }).unwrap();
    assert!(st.queued_object_deletes().is_empty());
}

#[test]
fn unmount_removes_the_copies_of_its_objects_and_keeps_cv_only_files() {
    let mut st = State::new();
    let w = worker(&mut st, 1);
    st.apply(&Mutation::Mount {
        path: p("/m"),
        ufs_url: p("s3://b/x"),
        mode: MountMode::Cache,
        options: Default::default(),
    })
    .unwrap();
    mkdir(&mut st, "/m", false).unwrap();
    for key in ["t/a.parquet", "t/deep/b.parquet", "c.parquet"] {
        let object = UfsObject { mount: p("/m"), key: p(key), version: p("e1") };
        let path = format!("/m/{key}");
        mkdir(&mut st, cv(&path).parent().unwrap().as_str(), true).unwrap();
        let placement = vec![(w, 0)];
        let m = Mutation::UfsFile { path: path.clone(), object, length: 10, block_size: 4 << 20, placement, mtime: 5 };
        st.apply(&m).unwrap();
    }
    // A file only cv holds (an fs-mode write not exported, unmounted with force) and an
    // unrelated directory beside the mount.
    mkdir(&mut st, "/m/keep", false).unwrap();
    let f = create(&mut st, "/m/keep/own", false).unwrap();
    st.apply(&Mutation::Complete { file_id: f, length: 0, block_lens: vec![], mtime: 6 }).unwrap();
    mkdir(&mut st, "/other", false).unwrap();

    let applied = st.apply(&Mutation::Unmount { path: p("/m") }).unwrap();
    assert_eq!(applied, Applied::Deleted { blocks: 3 });
    assert!(st.object_copies_under(&cv("/m")).is_empty());
    for gone in ["/m/t/a.parquet", "/m/t/deep/b.parquet", "/m/c.parquet"] {
        assert_eq!(kind(st.lookup(&cv(gone))), ErrorKind::NotFound, "{gone} is still there");
    }
    assert!(st.lookup(&cv("/m/keep/own")).is_ok() && st.lookup(&cv("/other")).is_ok());
    assert!(st.lookup(&cv("/m")).is_ok(), "the mount point stays");
    assert!(st.mounts().is_empty());
}

#[test]
fn copies_of_one_object_through_two_mounts_share_blocks_until_the_last_goes() {
    let mut st = State::new();
    let w = worker(&mut st, 1);
    // Two mounts of the same store prefix, and a third of a deeper prefix of it.
    let ep = vec![("endpoint".to_owned(), "http://s3:9000".to_owned())];
    for (m, url) in [("/a", "s3://b/x"), ("/b", "s3://b/x/"), ("/c", "s3://b/x/t")] {
        st.apply(&Mutation::Mount { path: p(m), ufs_url: p(url), mode: MountMode::Cache, options: ep.clone().into() })
            .unwrap();
    }
    let record = |st: &mut State, mount: &str, key: &str, version: &str| -> Mutation {
        let object = UfsObject { mount: p(mount), key: p(key), version: p(version) };
        let path = format!("{mount}/{key}");
        let length = 10 << 20;
        match st.copy_of_same_object(&object, length) {
            Some(shares) => Mutation::UfsFileShared { path, object, length, mtime: 5, shares },
            None => {
                let placement = vec![(w, 0); 3];
                Mutation::UfsFile { path, object, length, block_size: 4 << 20, placement, mtime: 5 }
            }
        }
    };
    let m = record(&mut st, "/a", "t/f.parquet", "e1");
    assert!(matches!(m, Mutation::UfsFile { .. }));
    st.apply(&m).unwrap();
    for (mount, key) in [("/b", "t/f.parquet"), ("/c", "f.parquet")] {
        let m = record(&mut st, mount, key, "e1");
        assert!(matches!(m, Mutation::UfsFileShared { .. }), "{mount}: {m:?}");
        st.apply(&m).unwrap();
    }
    // Another version, or another store, is not the same object.
    assert!(matches!(record(&mut st, "/b", "t/f.parquet", "e2"), Mutation::UfsFile { .. }));
    let open = |st: &State, path: &str| st.open_file(&cv(path)).unwrap();
    let a = open(&st, "/a/t/f.parquet");
    let (b, c) = (open(&st, "/b/t/f.parquet"), open(&st, "/c/f.parquet"));
    let ids = |f: &OpenFile| f.blocks.iter().map(|b| b.block_id).collect::<Vec<_>>();
    assert_eq!((ids(&b), ids(&c)), (ids(&a), ids(&a)));
    assert_eq!((b.length, st.data().blocks.len(), st.shared_blocks()), (10 << 20, 3, 3));
    assert_ne!(a.file_id, b.file_id);

    // Removing the owner keeps the blocks for the others; a snapshot keeps the sharing.
    st.apply(&Mutation::Delete { path: p("/a/t/f.parquet"), recursive: false, mtime: 6 }).unwrap();
    assert!(st.pending_deletes(w).is_empty(), "a block another copy lists was queued for deletion");
    assert!(st.data().blocks.values().all(|i| i.file != a.file_id));
    let mut st = State::from_data(st.data().clone());
    assert_eq!(st.shared_blocks(), 3);
    st.apply(&Mutation::Unmount { path: p("/b") }).unwrap();
    assert!(st.pending_deletes(w).is_empty());
    assert_eq!(ids(&open(&st, "/c/f.parquet")), ids(&a));
    assert_eq!(st.shared_blocks(), 0);
    // The last copy takes them with it.
    st.apply(&Mutation::Delete { path: p("/c/f.parquet"), recursive: false, mtime: 7 }).unwrap();
    assert_eq!(st.pending_deletes(w).len(), 3);
    assert!(st.data().blocks.is_empty());

    // A share whose source changed since it was chosen is refused, and changes nothing.
    st.apply(&Mutation::Mount { path: p("/b"), ufs_url: p("s3://b/x"), mode: MountMode::Cache, options: ep.into() })
        .unwrap();
    let m = record(&mut st, "/a", "g", "e1");
    st.apply(&m).unwrap();
    let shared = record(&mut st, "/b", "g", "e1");
    assert!(matches!(shared, Mutation::UfsFileShared { .. }));
    st.apply(&Mutation::Delete { path: p("/a/g"), recursive: false, mtime: 8 }).unwrap();
    let before = st.data().clone();
    assert_eq!(kind(st.apply(&shared)), ErrorKind::Changed);
    assert_eq!(st.data(), &before);
}

#[test]
fn an_overwrite_is_published_only_when_complete_and_a_failed_one_leaves_the_old_version() {
    let mut st = State::new();
    let w = worker(&mut st, 1);
    let (f1, b1) = written(&mut st, "/f", w);
    let version1 = st.stat(&cv("/f")).unwrap().version;

    // While the new version is written, everything reads the old one.
    let f2 = replace(&mut st, "/f").unwrap();
    let b2 = add_block(&mut st, f2, w).unwrap();
    assert!(st.is_held_back(f2));
    assert_eq!(st.open_file(&cv("/f")).unwrap().file_id, f1);
    let page = st.list(&cv("/"), None, 10).unwrap();
    assert_eq!(page.entries.iter().map(|e| e.stat.id).collect::<Vec<_>>(), vec![f1]);

    // Given up: removed by id; the old version and its block stay.
    assert_eq!(st.apply(&Mutation::Abandon { file_id: f2, mtime: 40 }).unwrap(), Applied::Deleted { blocks: 1 });
    assert_eq!(st.pending_deletes(w), vec![b2]);
    assert!(!st.data().inodes.contains_key(&f2) && !st.is_held_back(f2));
    assert_eq!(st.open_file(&cv("/f")).unwrap().file_id, f1);
    // Abandoning again, or a complete file, changes nothing.
    let before = st.data().clone();
    st.apply(&Mutation::Abandon { file_id: f2, mtime: 41 }).unwrap();
    st.apply(&Mutation::Abandon { file_id: f1, mtime: 41 }).unwrap();
    assert_eq!(&before, st.data());

    // Completed: published in the same step, the old file's block queued for deletion.
    let (f3, _) = written(&mut st, "/f", w);
    assert_eq!(st.open_file(&cv("/f")).unwrap().file_id, f3);
    assert!(st.pending_deletes(w).contains(&b1));
    assert!(!st.data().inodes.contains_key(&f1));
    let version3 = st.stat(&cv("/f")).unwrap().version;
    assert_ne!(version1, version3);
}

#[test]
fn a_conditional_completion_publishes_only_over_what_it_expects() {
    let mut st = State::new();
    let w = worker(&mut st, 1);
    let (f1, _) = written(&mut st, "/f", w);
    let v1 = st.stat(&cv("/f")).unwrap().version;

    // Two writers expect f1: the first to complete wins, the second finds another version.
    let a = replace(&mut st, "/f").unwrap();
    let b = replace(&mut st, "/f").unwrap();
    let expect = Expect::Version { file_id: f1, version: v1 };
    complete_if(&mut st, a, &[], expect).unwrap();
    let before = st.data().clone();
    assert_eq!(kind(complete_if(&mut st, b, &[], expect)), ErrorKind::ConditionFailed);
    assert_eq!(&before, st.data(), "a failed expectation changes nothing");
    assert!(st.is_held_back(b));
    assert_eq!(kind(complete_if(&mut st, b, &[], Expect::Absent)), ErrorKind::AlreadyExists);
    let va = st.stat(&cv("/f")).unwrap().version;
    complete_if(&mut st, b, &[], Expect::Version { file_id: a, version: va }).unwrap();
    assert_eq!(st.stat(&cv("/f")).unwrap().id, b);

    // Absent: holds for a new path, whether or not another writer is on it.
    let c = create(&mut st, "/g", false).unwrap();
    let d = replace(&mut st, "/g").unwrap();
    complete_if(&mut st, d, &[], Expect::Absent).unwrap();
    assert_eq!(kind(complete_if(&mut st, c, &[], Expect::Absent)), ErrorKind::AlreadyExists);
    assert_eq!(st.stat(&cv("/g")).unwrap().id, d);
}

#[test]
fn a_replaced_writer_takes_the_path_back_when_it_completes_last() {
    let mut st = State::new();
    let w = worker(&mut st, 1);
    let first = create(&mut st, "/f", false).unwrap();
    let b1 = add_block(&mut st, first, w).unwrap();
    let second = replace(&mut st, "/f").unwrap();
    complete(&mut st, second, &[]).unwrap();
    assert_eq!(st.stat(&cv("/f")).unwrap().id, second);
    assert!(st.is_held_back(first));
    complete(&mut st, first, &[4]).unwrap();
    assert_eq!(st.stat(&cv("/f")).unwrap().id, first, "the last completion wins");
    assert!(!st.data().inodes.contains_key(&second));
    assert!(st.pending_deletes(w).is_empty(), "{b1} is the published file's");
}

#[test]
fn replacements_go_with_their_directory_and_survive_a_snapshot() {
    let mut st = State::new();
    let w = worker(&mut st, 1);
    mkdir(&mut st, "/d", false).unwrap();
    written(&mut st, "/d/x", w);
    let g = replace(&mut st, "/d/x").unwrap();
    let gb = add_block(&mut st, g, w).unwrap();
    let (h, hv) = replace_as(&mut st, "/d/x", 7).unwrap();
    assert_eq!(st.created_by(&cv("/d/x"), 7), Some((h, hv)), "a retried create finds its held-back file");

    let restored = State::from_data(st.data().clone());
    assert!(restored.is_held_back(g) && restored.is_held_back(h));
    assert_eq!(restored.writing_files().filter(|&f| f == g || f == h).count(), 2);

    st.apply(&Mutation::Delete { path: p("/d"), recursive: true, mtime: 50 }).unwrap();
    assert!(!st.data().inodes.contains_key(&g) && !st.is_held_back(g));
    assert!(st.pending_deletes(w).contains(&gb));
    assert_eq!(st.writing_files().count(), 0);
}

#[test]
fn a_directory_that_took_the_name_refuses_the_publish() {
    let mut st = State::new();
    let w = worker(&mut st, 1);
    written(&mut st, "/f", w);
    let g = replace(&mut st, "/f").unwrap();
    st.apply(&Mutation::Delete { path: p("/f"), recursive: false, mtime: 1 }).unwrap();
    mkdir(&mut st, "/f", false).unwrap();
    assert_eq!(kind(complete(&mut st, g, &[])), ErrorKind::IsADirectory);
    st.apply(&Mutation::Delete { path: p("/f"), recursive: false, mtime: 1 }).unwrap();
    complete(&mut st, g, &[]).unwrap();
    assert_eq!(st.stat(&cv("/f")).unwrap().id, g, "published at a path that went away meanwhile");
}

#[test]
fn compose_lists_the_sources_blocks_and_keeps_them_while_any_file_does() {
    let mut st = State::new();
    let w = worker(&mut st, 1);
    let a = create(&mut st, "/a", false).unwrap();
    let (a0, a1) = (add_block(&mut st, a, w).unwrap(), add_block(&mut st, a, w).unwrap());
    complete(&mut st, a, &[4, 1]).unwrap();
    let b = create(&mut st, "/b", false).unwrap();
    let b0 = add_block(&mut st, b, w).unwrap();
    complete(&mut st, b, &[3]).unwrap();
    let (old, _) = written(&mut st, "/t", w);
    let old_block = st.data().inodes[&old].body.clone();

    let compose = |st: &mut State, sources: Vec<InodeId>| {
        let (file_id, version) = (st.next_inode_id(), st.next_version());
        let m = Mutation::Compose { path: p("/t"), sources, file_id, version, mode: 0o644, mtime: 9 };
        st.apply(&m).map(|_| file_id)
    };
    assert_eq!(kind(compose(&mut st, vec![a, a])), ErrorKind::InvalidArgument);
    assert_eq!(kind(compose(&mut st, vec![a, old])), ErrorKind::InvalidArgument, "composed over itself");
    let t = compose(&mut st, vec![a, b]).unwrap();
    let open = st.open_file(&cv("/t")).unwrap();
    assert_eq!((open.file_id, open.length), (t, 8));
    let layout: Vec<_> = open.blocks.iter().map(|l| (l.block_id, l.offset_in_file, l.len)).collect();
    assert_eq!(layout, vec![(a0, 0, 4), (a1, 4, 1), (b0, 5, 3)]);
    let InodeBody::File(f) = old_block else { unreachable!() };
    assert_eq!(st.pending_deletes(w), f.blocks, "the replaced file's block goes, the sources' stay");

    // The sources go: their blocks stay for the composed file, then go with it.
    st.apply(&Mutation::Delete { path: p("/a"), recursive: false, mtime: 10 }).unwrap();
    st.apply(&Mutation::Delete { path: p("/b"), recursive: false, mtime: 10 }).unwrap();
    assert_eq!(st.pending_deletes(w), f.blocks);
    assert_eq!(st.open_file(&cv("/t")).unwrap().blocks.len(), 3);
    st.apply(&Mutation::Delete { path: p("/t"), recursive: false, mtime: 11 }).unwrap();
    let mut gone = st.pending_deletes(w);
    gone.sort_unstable();
    let mut want = [f.blocks.clone(), vec![a0, a1, b0]].concat();
    want.sort_unstable();
    assert_eq!(gone, want);

    // Under a mount the bytes belong to a store: refused, so the caller copies.
    st.apply(&Mutation::Mount {
        path: p("/m"),
        ufs_url: p("s3://b/m"),
        mode: MountMode::Fs,
        options: Default::default(),
    })
    .unwrap();
    let c = create(&mut st, "/c", false).unwrap();
    complete(&mut st, c, &[]).unwrap();
    let (file_id, version) = (st.next_inode_id(), st.next_version());
    let m = Mutation::Compose { path: p("/m/t"), sources: vec![c], file_id, version, mode: 0o644, mtime: 12 };
    assert_eq!(kind(st.apply(&m)), ErrorKind::Unsupported);
}
