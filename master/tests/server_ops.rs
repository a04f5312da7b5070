//! Every master operation over real QUIC on loopback (mutual TLS from a fresh CA, journal in
//! a tempdir), including the error codes clients branch on.

mod server_support;

use cv_net::rpc::Conn;
use cv_wire::msg::*;
use cv_wire::{ErrorCode, Frame, Kind};
use server_support::*;
use std::time::Duration;

async fn register(worker: &Conn, ports: Vec<u16>) -> u64 {
    register_keys(worker, ports).await.0
}

/// [`register`], with the generation of the capability keys the master handed over.
async fn register_keys(worker: &Conn, ports: Vec<u16>) -> (u64, u64) {
    let req = RegisterWorker {
        worker_id: None,
        host: "127.0.0.1".into(),
        shard_ports: ports,
        capacity: 1 << 30,
        used: 0,
        zone: String::new(),
    };
    let (ok, _): (RegisterOk, _) = call(worker, &req, &[]).await;
    assert!(ok.heartbeat_ms > 0);
    assert!(!ok.keys.keys.is_empty(), "no capability keys at registration");
    (ok.worker_id, ok.keys.generation)
}

/// Creates a one-block file holding `bytes`, sends its last `tail` bytes with complete.
async fn write_file(c: &Conn, path: &str, bytes: &[u8], tail: usize) -> (u64, BlockLoc) {
    let create = Create { path: path.into(), overwrite: false, mode: 0o644, block_size: 0 };
    let (created, _): (CreateOk, _) = call(c, &create, &[]).await;
    let (added, _): (AddBlockOk, _) =
        call(c, &AddBlock { file_id: created.file_id, index: 0, exclude: vec![] }, &[]).await;
    let len = bytes.len() as u64;
    let complete = Complete {
        file_id: created.file_id,
        length: len,
        blocks: vec![BlockLen { block_id: added.block.block_id, len }],
        tail_offset: len - tail as u64,
    };
    let _: (Done, _) = call(c, &complete, &bytes[bytes.len() - tail..]).await;
    (created.file_id, added.block)
}

async fn stat(c: &Conn, path: &str) -> FileStatus {
    let (ok, _): (StatOk, _) = call(c, &Stat { path: path.into() }, &[]).await;
    ok.status
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespace_operations_and_error_codes() {
    let h = Harness::new();
    let server = h.start().await;
    let c = h.connect(&server, Role::Client).await;

    let (pong, _): (Pong, _) = call(&c, &Ping { nonce: 42 }, &[]).await;
    assert_eq!(pong.nonce, 42);

    let _: (Done, _) = call(&c, &Mkdir { path: "/a/b".into(), parents: true, mode: 0o755 }, &[]).await;
    assert_eq!(
        call_err(&c, &Mkdir { path: "/a/b".into(), parents: false, mode: 0o755 }).await,
        ErrorCode::AlreadyExists
    );
    assert_eq!(call_err(&c, &Mkdir { path: "relative".into(), parents: true, mode: 0 }).await, ErrorCode::InvalidPath);
    assert_eq!(call_err(&c, &Stat { path: "/a/\0".into() }).await, ErrorCode::InvalidPath);
    assert_eq!(stat(&c, "/a//b/.").await.kind, FileKind::Dir);
    assert_eq!(stat(&c, "/a//b/.").await.path, "/a/b");

    // A file being written: visible to stat, not to open.
    let create = Create { path: "/a/b/f".into(), overwrite: false, mode: 0o600, block_size: 0 };
    let (created, _): (CreateOk, _) = call(&c, &create, &[]).await;
    assert_eq!(created.block_size, 4 << 20);
    assert_eq!(call_err(&c, &create).await, ErrorCode::AlreadyExists);
    let st = stat(&c, "/a/b/f").await;
    assert_eq!((st.id, st.kind, st.complete, st.mode), (created.file_id, FileKind::File, false, 0o600));
    // Not retryable (its writer may take hours), and the message says why.
    let e = call_frame(&c, &Open { path: "/a/b/f".into() }, &[]).await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::FileIncomplete), "{e}");
    assert!(e.to_string().contains("/a/b/f: the file is being written"), "{e}");
    // No worker registered: nowhere to put a block, and the client may retry later.
    assert_eq!(
        call_err(&c, &AddBlock { file_id: created.file_id, index: 0, exclude: vec![] }).await,
        ErrorCode::NoWorkers
    );
    let complete = Complete { file_id: created.file_id, length: 0, blocks: vec![], tail_offset: 0 };
    let _: (Done, _) = call(&c, &complete, &[]).await;
    // The same completion again (a retry whose reply a restart forgot) is done; another is not.
    let _: (Done, _) = call(&c, &complete, &[]).await;
    let other = Complete { length: 1, blocks: vec![], ..complete.clone() };
    assert_eq!(call_err(&c, &other).await, ErrorCode::NotWritable);
    let st = stat(&c, "/a/b/f").await;
    assert!(st.complete && st.length == 0);
    let (open, tail): (OpenOk, _) = call(&c, &Open { path: "/a/b/f".into() }, &[]).await;
    assert!(open.tail_cached && tail.is_empty() && open.blocks.is_empty());
    let odd = Create { path: "/a/odd".into(), overwrite: false, mode: 0o644, block_size: 12345 };
    assert_eq!(call_err(&c, &odd).await, ErrorCode::Unsupported);

    // Errors of the path walk.
    assert_eq!(call_err(&c, &Stat { path: "/a/b/f/x".into() }).await, ErrorCode::NotADirectory);
    assert_eq!(call_err(&c, &Stat { path: "/nope".into() }).await, ErrorCode::NotFound);
    assert_eq!(call_err(&c, &Open { path: "/a/b".into() }).await, ErrorCode::IsADirectory);

    // Paged, sorted listing.
    for name in ["z", "m", "c"] {
        let cr = Create { path: format!("/a/b/{name}"), overwrite: false, mode: 0o644, block_size: 0 };
        let _: (CreateOk, _) = call(&c, &cr, &[]).await;
    }
    let mut names = Vec::new();
    let mut after = None;
    loop {
        let req = List { path: "/a/b".into(), start_after: after.clone(), limit: 3 };
        let (page, _): (ListOk, _) = call(&c, &req, &[]).await;
        assert!(page.entries.len() <= 3);
        names.extend(page.entries.iter().map(|e| e.path.clone()));
        after = page.entries.last().map(|e| e.path.rsplit('/').next().unwrap().to_string());
        if !page.more {
            break;
        }
    }
    assert_eq!(names, ["/a/b/c", "/a/b/f", "/a/b/m", "/a/b/z"]);
    assert_eq!(
        call_err(&c, &List { path: "/a/b".into(), start_after: None, limit: 0 }).await,
        ErrorCode::InvalidArgument
    );
    assert_eq!(
        call_err(&c, &List { path: "/a/b/f".into(), start_after: None, limit: 9 }).await,
        ErrorCode::NotADirectory
    );

    // Rename, then delete with and without recursion.
    let _: (Done, _) = call(&c, &Rename { src: "/a/b/f".into(), dst: "/a/g".into() }, &[]).await;
    assert_eq!(call_err(&c, &Stat { path: "/a/b/f".into() }).await, ErrorCode::NotFound);
    assert_eq!(stat(&c, "/a/g").await.id, created.file_id);
    assert_eq!(call_err(&c, &Rename { src: "/a/g".into(), dst: "/a/b/c".into() }).await, ErrorCode::AlreadyExists);
    assert_eq!(call_err(&c, &Rename { src: "/gone".into(), dst: "/x".into() }).await, ErrorCode::NotFound);
    assert_eq!(call_err(&c, &Delete { path: "/a".into(), recursive: false }).await, ErrorCode::NotEmpty);
    let _: (Done, _) = call(&c, &Delete { path: "/a".into(), recursive: true }, &[]).await;
    assert_eq!(call_err(&c, &Stat { path: "/a/g".into() }).await, ErrorCode::NotFound);
    assert_eq!(call_err(&c, &Delete { path: "/a".into(), recursive: true }).await, ErrorCode::NotFound);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mounts_never_return_secrets() {
    use std::os::unix::fs::PermissionsExt;
    let h = Harness::new();
    // A journal directory made by hand, readable by everyone.
    std::fs::create_dir_all(h.journal_dir()).unwrap();
    std::fs::set_permissions(h.journal_dir(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let server = h.start().await;
    let c = h.connect(&server, Role::Admin).await;
    let kv = |k: &str, v: &str| KeyValue { key: k.into(), value: v.into() };
    // A real S3 server: the master lists the mount's root before recording it.
    let store_dir = tempfile::tempdir().unwrap();
    let s3 = cv_testkit::S3Server::start(store_dir.path()).unwrap();
    s3.create_bucket("bucket").unwrap();
    let m = Mount {
        ufs_url: "s3://bucket/prefix".into(),
        cv_path: "/s3".into(),
        mode: MountMode::Cache,
        options: vec![
            kv("region", "us-east-1"),
            kv("endpoint", &s3.endpoint()),
            kv("access_key_id", cv_testkit::S3Server::ACCESS_KEY),
            kv("secret_access_key", cv_testkit::S3Server::SECRET_KEY),
        ],
    };
    let _: (Done, _) = call(&c, &m, &[]).await;
    assert_eq!(call_err(&c, &m).await, ErrorCode::AlreadyExists);
    let bad = Mount { ufs_url: "no-scheme".into(), cv_path: "/x".into(), ..m.clone() };
    assert_eq!(call_err(&c, &bad).await, ErrorCode::InvalidArgument);
    // Wrong credentials are refused when mounting, not at the first read.
    let mut wrong = Mount { cv_path: "/y".into(), ..m.clone() };
    wrong.options[3] = kv("secret_access_key", "hunter2");
    assert_eq!(call_err(&c, &wrong).await, ErrorCode::PermissionDenied);
    // A store that does not answer is refused too.
    let mut dead = Mount { cv_path: "/z".into(), ..m.clone() };
    dead.options[1] = kv("endpoint", "http://127.0.0.1:9");
    assert!(matches!(call_err(&c, &dead).await, ErrorCode::UfsFailed | ErrorCode::Unavailable));
    let (list, _): (ListMountsOk, _) = call(&c, &ListMounts {}, &[]).await;
    assert_eq!(list.mounts.len(), 1);
    let got = &list.mounts[0];
    assert_eq!((got.cv_path.as_str(), got.ufs_url.as_str(), got.mode), ("/s3", "s3://bucket/prefix", MountMode::Cache));
    assert_eq!(
        got.options,
        vec![
            kv("region", "us-east-1"),
            kv("endpoint", &s3.endpoint()),
            kv("access_key_id", "***"),
            kv("secret_access_key", "***")
        ]
    );
    // The master still holds the real value (workers need it to reach the store).
    let stored = server.core().list_mounts().unwrap();
    assert_eq!(stored[0].options[3].1, cv_testkit::S3Server::SECRET_KEY);
    let _: (Done, _) = call(&c, &Unmount { cv_path: "/s3".into(), force: false }, &[]).await;
    assert_eq!(call_err(&c, &Unmount { cv_path: "/s3".into(), force: false }).await, ErrorCode::NotFound);
    let (list, _): (ListMountsOk, _) = call(&c, &ListMounts {}, &[]).await;
    assert!(list.mounts.is_empty());
    server.shutdown().await;
    // The journal holds the secret (workers need it): only the master's user may read it.
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&h.journal_dir()), 0o700, "the journal directory");
    let mut holds_secret = false;
    for f in std::fs::read_dir(h.journal_dir()).unwrap() {
        let p = f.unwrap().path();
        assert_eq!(mode(&p) & 0o077, 0, "{} is readable by others", p.display());
        let bytes = std::fs::read(&p).unwrap();
        holds_secret |= bytes
            .windows(cv_testkit::S3Server::SECRET_KEY.len())
            .any(|w| w == cv_testkit::S3Server::SECRET_KEY.as_bytes());
    }
    assert!(holds_secret, "no file of the journal holds the secret: the check above proves nothing");
}

/// A worker may advertise a name; the master resolves it once, at registration, and block
/// locations carry the address. A name that does not resolve is refused, naming it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_host_name_is_resolved_once_at_registration() {
    let h = Harness::new();
    let server = h.start().await;
    let worker = h.connect(&server, Role::Worker).await;
    let named = RegisterWorker {
        worker_id: None,
        host: "localhost".into(),
        shard_ports: vec![7001],
        capacity: 1 << 30,
        used: 0,
        zone: String::new(),
    };
    let (ok, _): (RegisterOk, _) = call(&worker, &named, &[]).await;
    let host = server.core().inspect(|st| st.worker(ok.worker_id).map(|w| w.host.clone())).unwrap();
    assert!(host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback()), "journaled {host}");
    let c = h.connect(&server, Role::Client).await;
    let (_, block) = write_file(&c, "/named", b"abc", 3).await;
    assert!(block.addr.socket_addr().ip().is_loopback() && block.addr.port == 7001, "{}", block.addr);
    let bad = RegisterWorker { host: "no-such-host.invalid".into(), ..named };
    assert_eq!(call_err(&worker, &bad).await, ErrorCode::InvalidArgument);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_returns_the_footer_in_the_same_reply() {
    let h = Harness::new();
    let server = h.start().await;
    let worker = h.connect(&server, Role::Worker).await;
    let worker_id = register(&worker, vec![7001, 7002]).await;
    let c = h.connect(&server, Role::Client).await;

    // 200 KiB Parquet file with a 3000-byte footer; the client sends its last 64 KiB.
    let bytes = parquet_bytes(200 << 10, 3000);
    let (file_id, block) = write_file(&c, "/t.parquet", &bytes, 64 << 10).await;
    assert_eq!(block.worker_id, worker_id);
    let addr = block.addr.socket_addr();
    assert!(["127.0.0.1:7001", "127.0.0.1:7002"].contains(&addr.to_string().as_str()), "{addr}");
    let (open, tail): (OpenOk, _) = call(&c, &Open { path: "/t.parquet".into() }, &[]).await;
    assert_eq!(open.status.id, file_id);
    assert_eq!(open.status.length, bytes.len() as u64);
    assert!(open.tail_cached);
    // Exactly the footer, its length and the magic: what a Parquet reader reads first.
    assert_eq!(tail.len(), 3008);
    assert_eq!(open.tail_offset, (bytes.len() - 3008) as u64);
    assert_eq!(tail, bytes[bytes.len() - 3008..]);
    assert_eq!(open.blocks.len(), 1);
    assert_eq!(
        (open.blocks[0].block_id, open.blocks[0].len, open.blocks[0].offset),
        (block.block_id, bytes.len() as u64, 0)
    );
    assert_eq!(open.blocks[0].addr, block.addr);

    // A small file of no known format comes back whole.
    let small: Vec<u8> = (0..5000u32).map(|i| i as u8).collect();
    write_file(&c, "/small.bin", &small, small.len()).await;
    let (open, tail): (OpenOk, _) = call(&c, &Open { path: "/small.bin".into() }, &[]).await;
    assert!(open.tail_cached);
    assert_eq!((open.tail_offset, tail), (0, small));

    // A tail that does not end at the file's end is refused.
    let (cr, _): (CreateOk, _) =
        call(&c, &Create { path: "/bad".into(), overwrite: false, mode: 0o644, block_size: 0 }, &[]).await;
    let (ab, _): (AddBlockOk, _) = call(&c, &AddBlock { file_id: cr.file_id, index: 0, exclude: vec![] }, &[]).await;
    let complete = Complete {
        file_id: cr.file_id,
        length: 100,
        blocks: vec![BlockLen { block_id: ab.block.block_id, len: 100 }],
        tail_offset: 10,
    };
    let err = call_frame(&c, &complete, &[1u8; 10]).await.unwrap_err();
    assert_eq!(err.code(), Some(ErrorCode::InvalidArgument));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_file_sends_delete_blocks_in_the_next_heartbeat() {
    let h = Harness::new();
    let server = h.start().await;
    let worker = h.connect(&server, Role::Worker).await;
    let (worker_id, keys) = register_keys(&worker, vec![7001]).await;
    let c = h.connect(&server, Role::Client).await;
    let bytes = parquet_bytes(10_000, 100);
    let (_, block) = write_file(&c, "/doomed", &bytes, 108).await;

    let hb = |added: Vec<BlockReport>| Heartbeat {
        worker_id,
        capacity: 1 << 30,
        used: 10_000,
        added,
        removed: vec![],
        memory: Default::default(),
        disk: Default::default(),
        full: false,
        cap_keys: keys,
    };
    let report = BlockReport { block_id: block.block_id, len: 10_000, shard: 0 };
    let (ok, _): (HeartbeatOk, _) = call(&worker, &hb(vec![report]), &[]).await;
    assert!(ok.commands.is_empty(), "{:?}", ok.commands);
    // A worker holding other keys (another master's) is handed this master's.
    let (ok, _): (HeartbeatOk, _) = call(&worker, &Heartbeat { cap_keys: keys ^ 1, ..hb(vec![]) }, &[]).await;
    assert!(
        matches!(&ok.commands[..], [WorkerCommand::CapabilityKeys(k)] if k.generation == keys && !k.keys.is_empty()),
        "{:?}",
        ok.commands
    );
    // An admin's report counts the worker's blocks; a client's has the workers' capacity but no
    // per-block walk (it never names paths).
    let admin = h.connect(&server, Role::Admin).await;
    let (full, _): (ReportOk, _) = call(&admin, &Report {}, &[]).await;
    assert_eq!(full.workers[0].blocks, 1, "{full:?}");
    let (view, _): (ReportOk, _) = call(&c, &Report {}, &[]).await;
    assert_eq!((view.workers[0].capacity, view.workers[0].used, view.workers[0].live), (1 << 30, 10_000, true));
    assert_eq!((view.workers[0].blocks, view.workers[0].only_copies), (0, 0), "{view:?}");
    assert_eq!((view.inodes, view.blocks), (full.inodes, full.blocks));

    let _: (Done, _) = call(&c, &Delete { path: "/doomed".into(), recursive: false }, &[]).await;
    let (ok, _): (HeartbeatOk, _) = call(&worker, &hb(vec![]), &[]).await;
    assert_eq!(ok.commands, vec![WorkerCommand::DeleteBlocks(vec![block.block_id])]);
    // Handed out once.
    let (ok, _): (HeartbeatOk, _) = call(&worker, &hb(vec![]), &[]).await;
    assert!(ok.commands.is_empty());

    // The report shows the worker and the namespace.
    let (rep, _): (ReportOk, _) = call(&c, &Report {}, &[]).await;
    assert_eq!(rep.workers.len(), 1);
    assert!(rep.workers[0].live && rep.workers[0].worker_id == worker_id && rep.workers[0].used == 10_000);
    assert_eq!((rep.inodes, rep.blocks), (1, 0));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_calls_from_other_roles_are_denied() {
    let h = Harness::new();
    let server = h.start().await;
    let worker = h.connect(&server, Role::Worker).await;
    let (worker_id, keys) = register_keys(&worker, vec![7001]).await;
    for role in [Role::Client, Role::Admin] {
        let c = h.connect(&server, role).await;
        let hb = Heartbeat {
            worker_id,
            capacity: 0,
            used: 0,
            added: vec![],
            removed: vec![],
            memory: Default::default(),
            disk: Default::default(),
            full: false,
            cap_keys: keys,
        };
        assert_eq!(call_err(&c, &hb).await, ErrorCode::PermissionDenied);
        let reg = RegisterWorker {
            worker_id: None,
            host: "evil".into(),
            shard_ports: vec![1],
            capacity: 1,
            used: 0,
            zone: String::new(),
        };
        assert_eq!(call_err(&c, &reg).await, ErrorCode::PermissionDenied);
    }
    // Nothing was registered by the refused calls.
    assert_eq!(server.core().state_data().workers.len(), 1);
    server.shutdown().await;
}

/// Sends raw bytes as one request on a new stream and reads the reply frame.
async fn raw_call(c: &Conn, bytes: &[u8]) -> Frame {
    let (mut send, mut recv) = c.quinn().open_bi().await.unwrap();
    send.write_all(bytes).await.unwrap();
    send.finish().unwrap();
    let reply = tokio::time::timeout(Duration::from_secs(10), recv.read_to_end(1 << 20)).await.unwrap().unwrap();
    Frame::decode(&reply, &cv_wire::Limits::DEFAULT).unwrap()
}

fn error_code(f: &Frame) -> ErrorCode {
    assert_eq!(f.kind(), Kind::Error);
    ErrorCode::from_u16(f.decode_body::<ErrorReply>().unwrap().code)
}

/// Rewrites the crc32 field after a header or body edit.
fn reseal(bytes: &mut [u8]) {
    let mut h = crc32fast::Hasher::new();
    h.update(&bytes[..28]);
    h.update(&bytes[32..]);
    let crc = h.finalize();
    bytes[28..32].copy_from_slice(&crc.to_le_bytes());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_frames_get_errors_and_the_server_keeps_serving() {
    let h = Harness::new();
    let server = h.start().await;
    let c = h.connect(&server, Role::Client).await;
    let good = cv_wire::encode(&Stat { path: "/".into() }, 9, &[]).unwrap().into_head().to_vec();

    // A flipped bit: the checksum catches it.
    let mut flipped = good.clone();
    let last = flipped.len() - 1;
    flipped[last] ^= 0x40;
    assert_eq!(error_code(&raw_call(&c, &flipped).await), ErrorCode::Malformed);

    // A checksummed frame whose body is not the archive its kind names.
    let mut wrong_kind = cv_wire::encode(&Ping { nonce: 1 }, 10, &[]).unwrap().into_head().to_vec();
    wrong_kind[6..8].copy_from_slice(&(Kind::Rename as u16).to_le_bytes());
    reseal(&mut wrong_kind);
    assert_eq!(error_code(&raw_call(&c, &wrong_kind).await), ErrorCode::Malformed);

    // A frame cut short.
    assert_eq!(error_code(&raw_call(&c, &good[..good.len() - 3]).await), ErrorCode::Malformed);

    // A valid frame of a kind the master does not serve.
    let block = cv_wire::encode(&DeleteBlocks { block_ids: vec![1] }, 11, &[]).unwrap().into_head().to_vec();
    assert_eq!(error_code(&raw_call(&c, &block).await), ErrorCode::Unsupported);

    // Same connection, still served.
    let reply = raw_call(&c, &good).await;
    assert_eq!(reply.kind(), Kind::StatOk);
    assert_eq!(reply.header().request_id, 9);
    assert_eq!(stat(&c, "/").await.kind, FileKind::Dir);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_workers_are_marked_lost_by_the_tick() {
    let h = Harness::new();
    let clock = cv_master_core::config::ManualClock::new(1_000_000);
    let cfg = cv_master::server::ServerConfig {
        heartbeat_timeout: cv_net::config::Dur::secs(1),
        tick_interval: cv_net::config::Dur::millis(20),
        ..h.config()
    };
    let server = h.start_with(&cfg, Some(std::sync::Arc::new(clock.clone()))).await;
    let worker = h.connect(&server, Role::Worker).await;
    let (worker_id, keys) = register_keys(&worker, vec![7001]).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(server.core().state_data().workers[&worker_id].live, "lost before its timeout");
    clock.advance(Duration::from_secs(5));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while server.core().state_data().workers[&worker_id].live {
        assert!(tokio::time::Instant::now() < deadline, "worker never marked lost");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // A lost worker's next heartbeat brings it back.
    let hb = Heartbeat {
        worker_id,
        capacity: 1,
        used: 0,
        added: vec![],
        removed: vec![],
        memory: Default::default(),
        disk: Default::default(),
        full: false,
        cap_keys: keys,
    };
    let (ok, _): (HeartbeatOk, _) = call(&worker, &hb, &[]).await;
    assert!(ok.commands.is_empty());
    server.shutdown().await;
}

/// A client whose reply was lost sends the call again with the same request id, possibly on
/// a new connection: the master answers with the first reply instead of applying it twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retried_mutation_gets_its_first_reply_not_a_second_application() {
    let h = Harness::new();
    let server = h.start().await;
    let first = h.connect(&server, Role::Client).await;
    let again = h.connect(&server, Role::Client).await;
    let id = first.next_request_id();
    let create = Create { path: "/once".into(), overwrite: false, mode: 0o644, block_size: 0 };

    let one = first.call_as(id, &create, &[]).await.unwrap().decode_body::<CreateOk>().unwrap();
    let two = again.call_as(id, &create, &[]).await.unwrap().decode_body::<CreateOk>().unwrap();
    assert_eq!(one.file_id, two.file_id, "the retry is answered with the first reply");
    // The same request under a new id is a new call.
    let other = again.call_as(id + 1, &create, &[]).await.unwrap_err();
    assert_eq!(other.code(), Some(ErrorCode::AlreadyExists), "{other}");

    let delete = Delete { path: "/once".into(), recursive: false };
    let _: Done = first.call_as(id + 2, &delete, &[]).await.unwrap().decode_body().unwrap();
    let _: Done = again.call_as(id + 2, &delete, &[]).await.unwrap().decode_body().unwrap();
    assert_eq!(call_err(&first, &Stat { path: "/once".into() }).await, ErrorCode::NotFound);
    // Reads are not remembered: a stat repeated under its id asks again and sees the change.
    let stat_e = Stat { path: "/e".into() };
    assert_eq!(first.call_as(id + 3, &stat_e, &[]).await.unwrap_err().code(), Some(ErrorCode::NotFound));
    let mkdir_e = Mkdir { path: "/e".into(), parents: false, mode: 0o755 };
    let _: Done = first.call_as(id + 4, &mkdir_e, &[]).await.unwrap().decode_body().unwrap();
    let seen: StatOk = first.call_as(id + 3, &stat_e, &[]).await.unwrap().decode_body().unwrap();
    assert_eq!(seen.status.path, "/e");
}

/// A worker whose control connection closes is lost at once, long before its heartbeat
/// timeout; a master that shuts down closes every connection itself and loses nobody, so the
/// master started again on the same journal still counts its workers live.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_worker_connection_loses_the_worker_but_a_master_shutdown_does_not() {
    let h = Harness::new();
    let cfg = cv_master::server::ServerConfig { heartbeat_timeout: cv_net::config::Dur::secs(60), ..h.config() };
    let server = h.start_with(&cfg, None).await;
    let gone = h.connect(&server, Role::Worker).await;
    let gone_id = register(&gone, vec![7001]).await;
    let stays = h.connect(&server, Role::Worker).await;
    let stays_id = register(&stays, vec![7002]).await;
    gone.quinn().close(0u32.into(), b"worker stopping");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while server.core().state_data().workers[&gone_id].live {
        assert!(tokio::time::Instant::now() < deadline, "a closed connection did not lose its worker");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(server.core().state_data().workers[&stays_id].live, "another worker was lost with it");

    server.shutdown().await;
    let again = h.start_with(&cfg, None).await;
    let workers = again.core().state_data().workers;
    assert!(workers[&stays_id].live && !workers[&gone_id].live, "the shutdown lost a worker: {workers:?}");
    again.shutdown().await;
}
