//! Object storage under cv, end to end: a real cluster and a real S3 server
//! (s3s in-process over HTTP on loopback), requests counted at the server.

use cv_client::{Client, ErrorKind, MountMode};
use cv_net::config::ByteSize;
use cv_testkit::{Op, S3Server};
use cv_tools::cluster::{ClusterOptions, LocalCluster};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BLOCK: usize = 4 << 20;

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u32).wrapping_mul(2_654_435_761).rotate_left(u32::from(seed)) as u8).collect()
}

fn s3_options(s3: &S3Server) -> Vec<(String, String)> {
    vec![
        ("endpoint".into(), s3.endpoint()),
        ("region".into(), S3Server::REGION.into()),
        ("access_key_id".into(), S3Server::ACCESS_KEY.into()),
        ("secret_access_key".into(), S3Server::SECRET_KEY.into()),
    ]
}

/// An S3 server on loopback holding an empty bucket `lake`, its files in a temporary directory.
fn lake() -> (tempfile::TempDir, S3Server) {
    let store = tempfile::tempdir().unwrap();
    let s3 = S3Server::start(store.path()).unwrap();
    s3.create_bucket("lake").unwrap();
    (store, s3)
}

/// An embedded cluster in a temporary directory, and a client of it.
async fn embedded_cluster() -> (tempfile::TempDir, LocalCluster, Client) {
    let dir = tempfile::tempdir().unwrap();
    let cluster = LocalCluster::start(&ClusterOptions::ephemeral(dir.path())).await.unwrap();
    let client = cluster.client().await.unwrap();
    (dir, cluster, client)
}

async fn read_all(client: &Client, path: &str) -> Vec<u8> {
    let f = client.open(path).await.unwrap();
    let mut buf = vec![0u8; f.len() as usize];
    let n = f.read_at(0, &mut buf).await.unwrap();
    assert_eq!(n, buf.len(), "{path}");
    buf
}

/// GETs of `key` that are not the master's tail read (which ends at the object's end and is
/// at most 64 KiB): the block fetches of the shards.
fn block_gets(s3: &S3Server, key: &str) -> usize {
    s3.count(|r| {
        matches!(r.op, Op::Get | Op::RangedGet) && r.path.ends_with(key) && !r.range.as_deref().is_some_and(tail_range)
    })
}

fn tail_range(range: &str) -> bool {
    let Some((a, b)) = range.trim_start_matches("bytes=").split_once('-') else { return false };
    match (a.parse::<u64>(), b.parse::<u64>()) {
        (Ok(a), Ok(b)) => b - a < 64 << 10,
        _ => a.is_empty(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cache_mode_serves_objects_byte_exact_and_fetches_each_block_once() {
    let (store, s3) = lake();
    let sizes = [("empty", 0), ("small", 1000), ("exact", BLOCK), ("multi", 2 * BLOCK + 123), ("hot", 3 << 20)];
    let mut objects = Vec::new();
    for (i, (name, len)) in sizes.into_iter().enumerate() {
        let data = pattern(len, i as u8);
        s3.put_object("lake", &format!("t/{name}"), &data).unwrap();
        objects.push((name, data));
    }
    let (_dir, cluster, client) = embedded_cluster().await;
    client.mount("s3://lake/t", "/lake", MountMode::Cache, s3_options(&s3)).await.unwrap();
    assert_eq!(s3.count(|r| r.op == Op::List), 1, "validating a mount lists one page, not the whole root");

    // Listing is served from the master's copy: one LIST however often it is asked.
    let lists = s3.count(|r| r.op == Op::List);
    let names: Vec<String> = client.list("/lake").await.unwrap().into_iter().map(|e| e.path).collect();
    assert_eq!(names, ["/lake/empty", "/lake/exact", "/lake/hot", "/lake/multi", "/lake/small"]);
    client.list("/lake").await.unwrap();
    client.stat("/lake/multi").await.unwrap();
    assert_eq!(s3.count(|r| r.op == Op::List), lists + 1, "one LIST for two lists and a stat");
    assert_eq!(client.stat("/lake/multi").await.unwrap().length, (2 * BLOCK + 123) as u64);

    // Byte-exact, every size; the open of a listed object costs no HEAD.
    let heads = s3.count(|r| r.op == Op::Head);
    for (name, data) in objects.iter().filter(|(n, _)| *n != "hot") {
        assert_eq!(&read_all(&client, &format!("/lake/{name}")).await, data, "{name}");
    }
    assert_eq!(s3.count(|r| r.op == Op::Head), heads, "listed objects are opened without a HEAD");
    // A second read is served by the shards: no new GET.
    let gets = s3.count(|r| matches!(r.op, Op::Get | Op::RangedGet));
    assert_eq!(&read_all(&client, "/lake/multi").await, &objects[3].1);
    assert_eq!(s3.count(|r| matches!(r.op, Op::Get | Op::RangedGet)), gets, "warm read went to the store");

    // 16 concurrent readers of a cold block: one GET of it at the store.
    let mut readers = Vec::new();
    for _ in 0..16 {
        let c = client.clone();
        readers.push(tokio::spawn(async move { read_all(&c, "/lake/hot").await }));
    }
    for r in readers {
        assert_eq!(r.await.unwrap(), objects[4].1);
    }
    assert_eq!(block_gets(&s3, "/t/hot"), 1, "{:#?}", s3.requests());

    // An object replaced in the store: the old version is served until sync, then the new one.
    let new = pattern(5000, 99);
    s3.put_object("lake", "t/small", &new).unwrap();
    assert_eq!(read_all(&client, "/lake/small").await, objects[1].1, "within the validity period");
    client.sync_mount("/lake").await.unwrap();
    assert_eq!(read_all(&client, "/lake/small").await, new, "after mount sync");
    // An unchanged object after sync is revalidated with one HEAD; its tail is kept.
    let on = |op: Op| s3.count(|r| r.op == op && r.path.ends_with("/t/multi"));
    let (heads, gets) = (on(Op::Head), on(Op::RangedGet));
    client.sync_mount("/lake").await.unwrap();
    let f = client.open("/lake/multi").await.unwrap();
    assert_eq!((on(Op::Head), on(Op::RangedGet)), (heads + 1, gets), "{:#?}", s3.requests());
    assert_eq!(f.len(), objects[3].1.len() as u64);

    // Free drops the blocks, keeps the metadata: the next read fetches again, same bytes.
    let freed = client.free("/lake/multi").await.unwrap();
    assert_eq!((freed.files, freed.blocks), (1, 3));
    let before = block_gets(&s3, "/t/multi");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        // The drop reaches the worker with its next heartbeat.
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(read_all(&client, "/lake/multi").await, objects[3].1);
        if block_gets(&s3, "/t/multi") > before {
            break;
        }
        assert!(Instant::now() < deadline, "freed blocks were never fetched again");
    }

    // An object deleted from the store disappears after sync.
    std::fs::remove_file(store.path().join("lake/t/empty")).unwrap();
    client.sync_mount("/lake").await.unwrap();
    let names: Vec<String> = client.list("/lake").await.unwrap().into_iter().map(|e| e.path).collect();
    assert!(!names.contains(&"/lake/empty".to_string()), "{names:?}");
    assert_eq!(client.open("/lake/empty").await.unwrap_err().kind(), ErrorKind::NotFound);
    cluster.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cache_mode_writes_go_to_the_store_before_complete_answers() {
    let (store, s3) = lake();
    let (_dir, cluster, client) = embedded_cluster().await;
    client.mount("s3://lake/w", "/w", MountMode::Cache, s3_options(&s3)).await.unwrap();
    let data = pattern(BLOCK + 77, 5);
    let mut w = client.create("/w/new.bin", false).await.unwrap();
    w.write(&data).await.unwrap();
    w.close().await.unwrap();
    // Already in the store when close returned.
    assert_eq!(std::fs::read(store.path().join("lake/w/new.bin")).unwrap(), data);
    assert_eq!(read_all(&client, "/w/new.bin").await, data);
    // A store that refuses the upload: the write fails and leaves nothing visible.
    s3.set_fault(cv_testkit::Fault::Status(403));
    let mut w = client.create("/w/refused.bin", false).await.unwrap();
    w.write(b"nope").await.unwrap();
    assert!(w.close().await.is_err());
    s3.set_fault(cv_testkit::Fault::None);
    assert_eq!(client.stat("/w/refused.bin").await.unwrap_err().kind(), ErrorKind::NotFound);
    // A store that fails (503 to everything, after the master's retries): the write fails at
    // once naming the store, not retried (the file is not kept), not `NotFound` for an inode.
    s3.set_fault(cv_testkit::Fault::Status(503));
    let e = async {
        let mut w = client.create("/w/down.bin", false).await?;
        w.write(b"nope").await?;
        w.close().await
    }
    .await
    .unwrap_err();
    s3.set_fault(cv_testkit::Fault::None);
    assert_eq!(e.kind(), ErrorKind::StoreUnavailable, "{e}");
    assert!(!e.retryable(), "{e}");
    assert!(e.message().contains("s3://lake/w") && e.message().contains("/w/down.bin"), "{e}");
    assert_eq!(client.stat("/w/down.bin").await.unwrap_err().kind(), ErrorKind::NotFound);
    // Deleting through cv deletes the object.
    client.delete("/w/new.bin", false).await.unwrap();
    assert!(!store.path().join("lake/w/new.bin").exists());
    cluster.shutdown().await.unwrap();
}

/// A `cvctl up` child, killed when dropped (also when a test fails).
struct Up(Child);

impl Up {
    fn kill(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Up {
    fn drop(&mut self) {
        self.kill();
    }
}

/// `cvctl up` as a child process on `dir` (same data after a restart).
fn cvctl_up(dir: &Path) -> Up {
    let mut child = Command::new(env!("CARGO_BIN_EXE_cvctl"))
        .args(["up", "--shards", "2", "--capacity", "1GiB", "--memory", "32MiB"])
        .args(["--master-port", "0", "--worker-port", "0", "--dir"])
        .env("CV_LOG", "info")
        .arg(dir)
        .stdout(Stdio::piped())
        .stderr(std::fs::OpenOptions::new().create(true).append(true).open(dir.join("up.log")).unwrap())
        .spawn()
        .unwrap();
    let out = child.stdout.take().unwrap();
    let mut lines = BufReader::new(out).lines();
    loop {
        match lines.next() {
            Some(Ok(l)) if l.starts_with("cv is up") => break,
            Some(_) => {}
            None => panic!("cvctl up exited before it was up"),
        }
    }
    // Keep draining its output so it never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    Up(child)
}

/// A client of `cvctl up`'s cluster with the operator's identity (these tests mount).
async fn connect(dir: &Path) -> Client {
    let args = cv_tools::connect::ClientArgs { config: dir.join("admin.toml"), master: None, leader_hint: None };
    args.connect().await.unwrap()
}

/// Whether the store's file at `path` holds `want` within the time given.
async fn wait_for_object(path: &Path, want: &[u8], within: Duration) -> bool {
    let deadline = Instant::now() + within;
    while std::fs::read(path).ok().as_deref() != Some(want) {
        if Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    true
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fs_mode_exports_and_an_export_killed_midway_completes_after_restart() {
    let (store, s3) = lake();
    let dir = tempfile::tempdir().unwrap();
    let mut up = cvctl_up(dir.path());
    let client = connect(dir.path()).await;
    client.mount("s3://lake/out", "/out", MountMode::Fs, s3_options(&s3)).await.unwrap();

    // A file written in fs mode reaches the store in the background, multipart when large.
    let a = pattern(10 << 20, 1);
    let mut w = client.create("/out/a.bin", false).await.unwrap();
    w.write(&a).await.unwrap();
    w.close().await.unwrap();
    assert!(wait_for_object(&store.path().join("lake/out/a.bin"), &a, Duration::from_secs(20)).await);
    assert!(s3.count(|r| r.op == Op::MultipartPart) >= 2, "a 10 MiB file goes up in parts");
    // The object is in the store a moment before the master has journaled the export.
    let started = Instant::now();
    let mut report = client.report().await.unwrap();
    while report.exported == 0 && started.elapsed() < Duration::from_secs(10) {
        tokio::time::sleep(Duration::from_millis(50)).await;
        report = client.report().await.unwrap();
    }
    assert_eq!((report.export_backlog, report.exported), (0, 1));

    // A slow store, and the whole cluster killed while the upload is under way.
    s3.set_fault(cv_testkit::Fault::Delay(Duration::from_millis(700)));
    let b = pattern(20 << 20, 2);
    let mut w = client.create("/out/b.bin", false).await.unwrap();
    w.write(&b).await.unwrap();
    w.close().await.unwrap();
    let started = Instant::now();
    while s3.count(|r| r.op == Op::MultipartCreate) < 2 {
        assert!(started.elapsed() < Duration::from_secs(20), "the export never started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let backlog = client.report().await.unwrap();
    assert_eq!(backlog.export_backlog, 1);
    assert_eq!(backlog.export_backlog_bytes, b.len() as u64);
    up.kill();
    client.close();
    assert!(!store.path().join("lake/out/b.bin").exists(), "the upload was not complete yet");

    // After the restart the export is done again from the pinned blocks, exactly as written.
    s3.set_fault(cv_testkit::Fault::None);
    let mut up = cvctl_up(dir.path());
    let log = dir.path().join("up.log");
    if !wait_for_object(&store.path().join("lake/out/b.bin"), &b, Duration::from_secs(30)).await {
        panic!("not exported after restart; cvctl up said:\n{}", std::fs::read_to_string(&log).unwrap_or_default());
    }
    let client = connect(dir.path()).await;
    assert_eq!(read_all(&client, "/out/b.bin").await, b);
    client.close();
    up.kill();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_object_is_seen_after_the_validity_period_and_a_failing_store_serves_what_cv_holds() {
    let (_store, s3) = lake();
    let old = pattern(3000, 1);
    s3.put_object("lake", "v/x", &old).unwrap();
    let (_dir, cluster, client) = embedded_cluster().await;
    let mut opts = s3_options(&s3);
    opts.push(("cv.ttl".into(), "400ms".into()));
    client.mount("s3://lake/v", "/v", MountMode::Cache, opts).await.unwrap();
    assert_eq!(read_all(&client, "/v/x").await, old);
    client.list("/v").await.unwrap();
    let heads = s3.count(|r| r.op == Op::Head);
    assert_eq!(read_all(&client, "/v/x").await, old);
    assert_eq!(s3.count(|r| r.op == Op::Head), heads, "within the validity period: no call to the store");
    let new = pattern(2000, 2);
    s3.put_object("lake", "v/x", &new).unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(read_all(&client, "/v/x").await, new, "after the validity period");

    // A store that answers 503 to everything: a file cv holds is served as it is (validated
    // within `cv.max_stale`); one it never opened fails with a clear, retryable error within
    // the deadline.
    s3.put_object("lake", "v/never", &old).unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    s3.set_fault(cv_testkit::Fault::Status(503));
    assert_eq!(read_all(&client, "/v/x").await, new, "a cached file is served while the store fails");
    let started = Instant::now();
    let e = client.open("/v/never").await.unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(20), "gave up after {:?}", started.elapsed());
    assert!(e.message().contains("503") || e.message().contains("object store"), "{e}");

    // A store that hangs (every request waits 30 s): the cached file is served within the
    // revalidation bound (1 s), not after the store's deadline.
    s3.set_fault(cv_testkit::Fault::Delay(Duration::from_secs(30)));
    tokio::time::sleep(Duration::from_millis(500)).await;
    let started = Instant::now();
    assert_eq!(read_all(&client, "/v/x").await, new);
    assert!(started.elapsed() < Duration::from_millis(1_500), "served after {:?}", started.elapsed());
    let started = Instant::now();
    client.list("/v").await.unwrap();
    assert!(started.elapsed() < Duration::from_millis(1_500), "listed after {:?}", started.elapsed());
    s3.set_fault(cv_testkit::Fault::None);
    assert_eq!(read_all(&client, "/v/never").await, old, "recovers once the store does");
    cluster.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mount_options_set_the_deadlines_and_retries_of_master_and_workers() {
    let (_store, s3) = lake();
    // Larger than the tail, so a read at offset 0 goes to a worker.
    let data = pattern(300_000, 3);
    s3.put_object("lake", "d/x", &data).unwrap();
    s3.put_object("lake", "d/y", &data).unwrap();
    let (_dir, cluster, client) = embedded_cluster().await;

    let mut bad = s3_options(&s3);
    bad.push(("cv.retries".into(), "many".into()));
    let e = client.mount("s3://lake/d", "/d", MountMode::Cache, bad).await.unwrap_err();
    assert!(e.message().contains("cv.retries"), "{e}");

    // One 300 ms attempt, no retry. The store below answers after 3 s: within the default
    // 4 s deadline that would succeed; with these options it fails, and fast.
    let mut opts = s3_options(&s3);
    for (k, v) in [("cv.op_timeout", "300ms"), ("cv.io_timeout", "300ms"), ("cv.retries", "0")] {
        opts.push((k.into(), v.into()));
    }
    client.mount("s3://lake/d", "/d", MountMode::Cache, opts).await.unwrap();
    let x = client.open("/d/x").await.unwrap();

    s3.set_fault(cv_testkit::Fault::Delay(Duration::from_secs(3)));
    // The master: the first open of an object (HEAD + tail).
    let started = Instant::now();
    client.open("/d/y").await.unwrap_err();
    assert!(started.elapsed() < Duration::from_millis(2500), "master gave up after {:?}", started.elapsed());
    // A worker: a block fetch (the client retries 3 times; each fails in one attempt).
    let started = Instant::now();
    let mut buf = vec![0u8; 1000];
    x.read_at(0, &mut buf).await.unwrap_err();
    assert!(started.elapsed() < Duration::from_millis(2900), "worker gave up after {:?}", started.elapsed());

    s3.set_fault(cv_testkit::Fault::None);
    assert_eq!(read_all(&client, "/d/y").await, data, "recovers once the store does");
    cluster.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renames_under_a_mount_move_the_objects_and_keep_the_cached_blocks() {
    let (store, s3) = lake();
    let (one, two, file) = (pattern(BLOCK + 5, 1), pattern(1000, 2), pattern(3000, 3));
    s3.put_object("lake", "r/dir/one", &one).unwrap();
    s3.put_object("lake", "r/dir/sub/two", &two).unwrap();
    s3.put_object("lake", "r/file", &file).unwrap();
    let (_dir, cluster, client) = embedded_cluster().await;
    client.mount("s3://lake/r", "/r", MountMode::Cache, s3_options(&s3)).await.unwrap();
    let obj = |key: &str| std::fs::read(store.path().join("lake").join(key)).ok();

    // A file cv has never listed: its directory is listed, the object copied, the old one deleted.
    client.rename("/r/file", "/r/moved").await.unwrap();
    assert_eq!(obj("r/moved").as_deref(), Some(&file[..]));
    assert_eq!(obj("r/file"), None);
    assert_eq!(client.stat("/r/file").await.unwrap_err().kind(), ErrorKind::NotFound);
    assert_eq!(read_all(&client, "/r/moved").await, file);

    // A directory tree with a cached file: every object moves, the cached blocks stay valid.
    assert_eq!(read_all(&client, "/r/dir/one").await, one);
    let gets = s3.count(|r| matches!(r.op, Op::Get | Op::RangedGet));
    client.rename("/r/dir", "/r/dir2").await.unwrap();
    assert_eq!(obj("r/dir2/one").as_deref(), Some(&one[..]));
    assert_eq!(obj("r/dir2/sub/two").as_deref(), Some(&two[..]));
    assert_eq!((obj("r/dir/one"), obj("r/dir/sub/two")), (None, None));
    assert_eq!(read_all(&client, "/r/dir2/one").await, one);
    assert_eq!(s3.count(|r| matches!(r.op, Op::Get | Op::RangedGet)), gets, "{:#?}", s3.requests());
    assert_eq!(read_all(&client, "/r/dir2/sub/two").await, two);
    client.sync_mount("/r").await.unwrap();
    let names: Vec<String> = client.list("/r").await.unwrap().into_iter().map(|e| e.path).collect();
    assert_eq!(names, ["/r/dir2", "/r/moved"], "the store agrees after a sync");

    // A store that refuses the copy: the rename fails, nothing moved in cv or in the store.
    s3.set_fault(cv_testkit::Fault::Status(503));
    client.rename("/r/moved", "/r/moved2").await.unwrap_err();
    s3.set_fault(cv_testkit::Fault::None);
    assert_eq!((obj("r/moved").is_some(), obj("r/moved2")), (true, None));
    assert_eq!(read_all(&client, "/r/moved").await, file);

    // Across a mount boundary: refused, nothing moves.
    client.mount("s3://lake/o", "/o", MountMode::Fs, s3_options(&s3)).await.unwrap();
    let e = client.rename("/r/moved", "/o/moved").await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
    assert!(e.message().contains("copy, then delete"), "{e}");
    assert!(obj("r/moved").is_some());
    let e = client.rename("/r", "/r2").await.unwrap_err();
    assert!(e.message().contains("mount point"), "{e}");

    // Fs mode: an exported file renamed is at its new key in the store, and only there.
    let x = pattern(BLOCK * 2 + 9, 4);
    let mut w = client.create("/o/x", false).await.unwrap();
    w.write(&x).await.unwrap();
    w.close().await.unwrap();
    assert!(wait_for_object(&store.path().join("lake/o/x"), &x, Duration::from_secs(20)).await);
    client.rename("/o/x", "/o/y").await.unwrap();
    assert_eq!(obj("o/y").as_deref(), Some(&x[..]));
    assert_eq!(obj("o/x"), None);
    assert_eq!(read_all(&client, "/o/y").await, x);
    // A file renamed before its export is exported under its new name.
    s3.set_fault(cv_testkit::Fault::Status(503));
    let mut w = client.create("/o/early", false).await.unwrap();
    w.write(&two).await.unwrap();
    w.close().await.unwrap();
    client.rename("/o/early", "/o/late").await.unwrap();
    s3.set_fault(cv_testkit::Fault::None);
    assert!(wait_for_object(&store.path().join("lake/o/late"), &two, Duration::from_secs(20)).await);
    assert_eq!(obj("o/early"), None);
    cluster.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delete_through_cv_reaches_the_store_even_across_a_crash() {
    let (store, s3) = lake();
    let dir = tempfile::tempdir().unwrap();
    let mut up = cvctl_up(dir.path());
    let client = connect(dir.path()).await;
    let mut opts = s3_options(&s3);
    for (k, v) in [("cv.op_timeout", "300ms"), ("cv.retries", "0")] {
        opts.push((k.into(), v.into()));
    }
    client.mount("s3://lake/q", "/q", MountMode::Fs, opts).await.unwrap();
    let x = pattern(5000, 7);
    let mut w = client.create("/q/x", false).await.unwrap();
    w.write(&x).await.unwrap();
    w.close().await.unwrap();
    let object = store.path().join("lake/q/x");
    assert!(wait_for_object(&object, &x, Duration::from_secs(20)).await);

    // The store refuses the delete: cv's delete stands, the object's is queued durably...
    s3.set_fault(cv_testkit::Fault::Status(503));
    client.delete("/q/x", false).await.unwrap();
    assert_eq!(client.stat("/q/x").await.unwrap_err().kind(), ErrorKind::NotFound);
    assert!(object.exists());
    // ...and survives the cluster being killed.
    up.kill();
    client.close();
    s3.set_fault(cv_testkit::Fault::None);
    let mut up = cvctl_up(dir.path());
    let deadline = Instant::now() + Duration::from_secs(20);
    while object.exists() {
        assert!(Instant::now() < deadline, "the queued delete was lost in the crash");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    up.kill();
}

/// Flips the byte `at` bytes into the first copy of `block` found in a shard data file under
/// `dir`; false if no copy was found.
fn flip_on_disk(dir: &Path, block: &[u8], at: usize) -> bool {
    use std::os::unix::fs::FileExt;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().map(Result::unwrap) {
            let path = e.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.file_name().is_some_and(|n| n == "blocks.data") {
                let bytes = std::fs::read(&path).unwrap();
                if let Some(start) = bytes.windows(256).position(|w| w == &block[..256]) {
                    let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
                    f.write_all_at(&[bytes[start + at] ^ 0x10], (start + at) as u64).unwrap();
                    f.sync_all().unwrap();
                    return true;
                }
            }
        }
    }
    false
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_byte_flipped_on_a_workers_disk_is_never_served() {
    let (_store, s3) = lake();
    let data = pattern(1 << 20, 7);
    s3.put_object("lake", "t/flip", &data).unwrap();
    // No memory tier: every read of the block reads the disk (a small one, to search).
    let dir = tempfile::tempdir().unwrap();
    let opts = ClusterOptions {
        memory_tier: ByteSize(0),
        capacity: ByteSize::mib(64),
        ..ClusterOptions::ephemeral(dir.path())
    };
    let cluster = LocalCluster::start(&opts).await.unwrap();
    let client = cluster.client().await.unwrap();
    client.mount("s3://lake/t", "/lake", MountMode::Cache, s3_options(&s3)).await.unwrap();
    assert_eq!(read_all(&client, "/lake/flip").await, data);
    assert_eq!(block_gets(&s3, "/t/flip"), 1);

    // A whole chunk holding the flip goes out unchecked with its stored crc; the client's check
    // fails, its retry has the worker check the block, which drops it, and the next attempt
    // fetches it from the store again: the caller gets the right bytes. (Until the block is
    // committed, which may follow its bytes on disk, reads are still served from the fill.)
    assert!(flip_on_disk(dir.path(), &data, 300_000), "the cached block is on a shard's disk");
    let f = client.open("/lake/flip").await.unwrap();
    let mut buf = vec![0u8; 64 << 10];
    let deadline = Instant::now() + Duration::from_secs(10);
    while block_gets(&s3, "/t/flip") == 1 {
        assert!(Instant::now() < deadline, "the corrupt block was never dropped and fetched again");
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(f.read_at(256 << 10, &mut buf).await.unwrap(), buf.len());
        assert!(buf == data[256 << 10..320 << 10], "wrong bytes served");
    }
    assert_eq!(read_all(&client, "/lake/flip").await, data);

    // A file written to cv alone has nowhere to be fetched from: an error, never the bytes.
    let plain = pattern(1 << 20, 9);
    let mut w = client.create("/plain", true).await.unwrap();
    w.write(&plain).await.unwrap();
    w.close().await.unwrap();
    assert!(flip_on_disk(dir.path(), &plain, 200_000));
    let f = client.open("/plain").await.unwrap();
    let err = f.read_at(192 << 10, &mut buf).await.unwrap_err();
    // The worker dropped the corrupt block: its only copy is gone, which is data loss naming
    // the file and saying why (never `NotFound`, nor "the worker holds no copy").
    assert_eq!(err.kind(), ErrorKind::DataLoss, "{err}");
    assert!(err.message().contains("/plain") && err.message().contains("block"), "{err}");
    assert!(err.message().contains("only copy failed its checksum and was dropped"), "{err}");
    cluster.shutdown().await.unwrap();
}

/// Requests for `key` that check or read its tail: HEADs and the master's ranged tail GETs.
fn tail_checks(s3: &S3Server, key: &str) -> usize {
    s3.count(|r| {
        r.path.ends_with(key)
            && (r.op == Op::Head || (r.op == Op::RangedGet && r.range.as_deref().is_some_and(tail_range)))
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_master_keeps_its_tails_and_checks_unless_its_tails_file_is_damaged() {
    let (_store, s3) = lake();
    let objects: Vec<Vec<u8>> = (0..4).map(|i| pattern(300_000 + i * 1000, i as u8)).collect();
    for (i, o) in objects.iter().enumerate() {
        s3.put_object("lake", &format!("r/f{i}.bin"), o).unwrap();
    }
    let dir = tempfile::tempdir().unwrap();
    let mut cluster = LocalCluster::start(&ClusterOptions::ephemeral(dir.path())).await.unwrap();
    let client = cluster.client().await.unwrap();
    let mut opts = s3_options(&s3);
    opts.push(("cv.ttl".into(), "1h".into()));
    client.mount("s3://lake/r", "/r", MountMode::Cache, opts).await.unwrap();
    let open_all = |client: Client| {
        let objects = objects.clone();
        async move {
            for (i, o) in objects.iter().enumerate() {
                let f = client.open(&format!("/r/f{i}.bin")).await.unwrap();
                let (at, tail) = f.tail().expect("the open reply carries the tail");
                assert_eq!(tail, &o[at as usize..], "f{i}'s tail");
            }
            assert_eq!(read_all(&client, "/r/f1.bin").await, objects[1]);
            client.close();
        }
    };
    open_all(client).await;
    let checks = |s3: &S3Server| (0..4).map(|i| tail_checks(s3, &format!("/r/f{i}.bin"))).sum::<usize>();
    let first = checks(&s3);
    assert!(first >= 4, "each object's tail was read once: {:#?}", s3.requests());

    // A clean restart: the tails and the checks come back from the tails file, so within the
    // validity period the store is not asked again.
    cluster.stop_master(0).await;
    let tails = dir.path().join("master").join("tails");
    assert!(tails.exists(), "a clean stop saves the tails file");
    cluster.start_master(0).await.unwrap();
    open_all(cluster.client().await.unwrap()).await;
    assert_eq!(checks(&s3), first, "after a restart: {:#?}", s3.requests());

    // A damaged file is not trusted: its first record is bad, so every object is checked again,
    // and what is served is still each object's bytes.
    cluster.stop_master(0).await;
    let mut bytes = std::fs::read(&tails).unwrap();
    bytes[16 + 12 + 30] ^= 0x20;
    std::fs::write(&tails, &bytes).unwrap();
    cluster.start_master(0).await.unwrap();
    open_all(cluster.client().await.unwrap()).await;
    assert_eq!(checks(&s3), 2 * first, "after a damaged tails file: {:#?}", s3.requests());
    cluster.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_mounts_of_one_prefix_cache_each_object_once() {
    let (_store, s3) = lake();
    let data = pattern(9 << 20, 3);
    s3.put_object("lake", "d/t/x.bin", &data).unwrap();
    let (_dir, cluster, client) = embedded_cluster().await;
    for m in ["/d1", "/d2"] {
        client.mount("s3://lake/d", m, MountMode::Cache, s3_options(&s3)).await.unwrap();
    }
    assert_eq!(read_all(&client, "/d1/t/x.bin").await, data);
    let fetched = block_gets(&s3, "/d/t/x.bin");
    assert!(fetched >= 3, "three blocks fetched: {:#?}", s3.requests());
    // The other mount's copy lists the same blocks: nothing is fetched or stored again.
    assert_eq!(read_all(&client, "/d2/t/x.bin").await, data);
    assert_eq!(block_gets(&s3, "/d/t/x.bin"), fetched, "{:#?}", s3.requests());
    assert_eq!(client.report().await.unwrap().blocks, 3, "one block map entry per block of the object");
    // Removing the first mount keeps the blocks for the second.
    client.unmount("/d1", false).await.unwrap();
    assert_eq!(read_all(&client, "/d2/t/x.bin").await, data);
    assert_eq!(block_gets(&s3, "/d/t/x.bin"), fetched, "{:#?}", s3.requests());
    client.close();
    cluster.shutdown().await.unwrap();
}

/// An `fs://` store has no ETags: cv records an object as its modification time, length and
/// identity (inode, change time). Rewritten in place with its length and modification time kept
/// between two block fills of one open, the second
/// fill fails as `Stale` instead of serving one version made of two objects, and the next
/// open (well within `cv.ttl`) reads the new version whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_without_etag_rewritten_between_two_fills_is_stale_not_mixed() {
    let store = tempfile::tempdir().unwrap();
    let file = store.path().join("t.bin");
    let (old, new) = (pattern(2 * BLOCK + 10, 1), pattern(2 * BLOCK + 10, 2));
    std::fs::write(&file, &old).unwrap();
    let (_dir, cluster, client) = embedded_cluster().await;
    let url = format!("fs://{}", store.path().display());
    client.mount(&url, "/fsm", MountMode::Cache, vec![("cv.ttl".into(), "1h".into())]).await.unwrap();
    let f = client.open("/fsm/t.bin").await.unwrap();
    let mut head = vec![0u8; 1000];
    f.read_at(0, &mut head).await.unwrap();
    assert!(head == old[..1000]);

    // Same length, and its modification time set back to what it was (`cp -p`, `touch -r`).
    let mtime = std::fs::metadata(&file).unwrap().modified().unwrap();
    std::fs::write(&file, &new).unwrap();
    std::fs::File::options().write(true).open(&file).unwrap().set_modified(mtime).unwrap();
    let mut buf = vec![0u8; 1000];
    let e = f.read_at(BLOCK as u64 + 5, &mut buf).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Stale, "{e}");
    assert!(e.message().contains("changed"), "{e}");
    assert!(read_all(&client, "/fsm/t.bin").await == new, "the next open reads the new version whole");
    client.close();
    cluster.shutdown().await.unwrap();
}
