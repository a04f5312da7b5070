//! The in-process S3 server, driven through OpenDAL's S3 service exactly as the product uses it.

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use cv_testkit::{DelayProxy, Fault, Op, S3Server};
use opendal::{BytesRange, ErrorKind, Operator};

const BUCKET: &str = "cvtest";

fn operator(endpoint: &str, secret_key: &str) -> Operator {
    cv_ufs::install();
    let builder = opendal::services::S3::default()
        .bucket(BUCKET)
        .endpoint(endpoint)
        .region(S3Server::REGION)
        .access_key_id(S3Server::ACCESS_KEY)
        .secret_access_key(secret_key)
        .disable_config_load()
        .disable_ec2_metadata();
    Operator::new(builder).expect("s3 operator")
}

fn start() -> (tempfile::TempDir, S3Server, Operator) {
    let dir = tempfile::tempdir().unwrap();
    let server = S3Server::start(dir.path()).unwrap();
    server.create_bucket(BUCKET).unwrap();
    let op = operator(&server.endpoint(), S3Server::SECRET_KEY);
    (dir, server, op)
}

fn ops(server: &S3Server) -> Vec<Op> {
    server.requests().iter().map(|r| r.op).collect()
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
}

#[tokio::test]
async fn write_stat_read_ranges_list() {
    let (_dir, server, op) = start();
    let data = pattern(100_000, 7);

    op.write("dir/obj", data.clone()).await.unwrap();
    assert_eq!(ops(&server), [Op::Put]);

    server.reset_requests();
    let meta = op.stat("dir/obj").await.unwrap();
    assert_eq!(meta.content_length(), data.len() as u64);
    assert!(meta.etag().is_some());
    assert_eq!(ops(&server), [Op::Head]);
    assert_eq!(server.requests()[0].path, format!("/{BUCKET}/dir/obj"));

    server.reset_requests();
    assert_eq!(op.read("dir/obj").await.unwrap().to_vec(), data);
    assert_eq!(ops(&server), [Op::Get]);

    // One ranged read is exactly one ranged GET, with the range we asked for.
    server.reset_requests();
    let got = op.read_with("dir/obj").range(1000..5096).await.unwrap().to_vec();
    assert_eq!(got, data[1000..5096]);
    let reqs = server.requests();
    assert_eq!(reqs.iter().map(|r| r.op).collect::<Vec<_>>(), [Op::RangedGet]);
    assert_eq!(reqs[0].range.as_deref(), Some("bytes=1000-5095"));
    assert_eq!(server.count(|r| r.op == Op::RangedGet), 1);

    // Suffix range: the last 16 bytes.
    server.reset_requests();
    let tail = op.read_with("dir/obj").range(BytesRange::suffix(16)).await.unwrap().to_vec();
    assert_eq!(tail, data[data.len() - 16..]);
    let reqs = server.requests();
    assert_eq!(reqs.len(), 1, "{reqs:?}");
    assert_eq!((reqs[0].op, reqs[0].range.as_deref()), (Op::RangedGet, Some("bytes=-16")));

    // Zero-byte object.
    op.write("empty", Vec::<u8>::new()).await.unwrap();
    assert_eq!(op.stat("empty").await.unwrap().content_length(), 0);
    server.reset_requests();
    assert!(op.read("empty").await.unwrap().is_empty());
    assert_eq!(ops(&server), [Op::Get]);

    // Missing object.
    assert_eq!(op.stat("nope").await.unwrap_err().kind(), ErrorKind::NotFound);

    // List with a delimiter: one level, sub-"directories" as prefixes.
    op.write("dir/a", b"a".to_vec()).await.unwrap();
    op.write("dir/sub/b", b"b".to_vec()).await.unwrap();
    server.reset_requests();
    let mut names: Vec<String> = op.list("dir/").await.unwrap().into_iter().map(|e| e.path().to_owned()).collect();
    names.sort();
    assert_eq!(names, ["dir/a", "dir/obj", "dir/sub/"].map(String::from));
    let reqs = server.requests();
    assert_eq!(reqs.iter().map(|r| r.op).collect::<Vec<_>>(), [Op::List]);
    // OpenDAL sends the query unencoded: `list-type=2&prefix=dir/&delimiter=/`.
    assert!(reqs[0].query.contains("delimiter=/") || reqs[0].query.contains("delimiter=%2F"), "{reqs:?}");
}

#[tokio::test]
async fn multipart_upload_of_12_mib() {
    let (_dir, server, op) = start();
    let data = pattern(12 << 20, 3);
    let mut writer = op.writer_with("big").chunk(5 << 20).await.unwrap();
    for piece in data.chunks(1 << 20) {
        writer.write(piece.to_vec()).await.unwrap();
    }
    writer.close().await.unwrap();
    assert_eq!(
        ops(&server),
        [Op::MultipartCreate, Op::MultipartPart, Op::MultipartPart, Op::MultipartPart, Op::MultipartComplete]
    );
    let meta = op.stat("big").await.unwrap();
    assert_eq!(meta.content_length(), data.len() as u64);
    assert!(meta.etag().unwrap().trim_matches('"').ends_with("-3"), "{:?}", meta.etag());
    assert!(op.read("big").await.unwrap().to_vec() == data);
}

#[tokio::test]
async fn put_object_is_served_and_changes_the_etag() {
    let (dir, server, op) = start();
    server.put_object(BUCKET, "k/v", b"first").unwrap();
    assert!(dir.path().join(BUCKET).join("k/v").is_file());
    let e1 = op.stat("k/v").await.unwrap().etag().unwrap().to_owned();
    assert_eq!(e1, "\"8b04d5e3775d298e78455efc5ca404d5\""); // md5("first")
    assert_eq!(op.read("k/v").await.unwrap().to_vec(), b"first");

    server.put_object(BUCKET, "k/v", b"second").unwrap();
    let e2 = op.stat("k/v").await.unwrap().etag().unwrap().to_owned();
    assert_ne!(e1, e2);
    assert_eq!(op.read("k/v").await.unwrap().to_vec(), b"second");

    // An object stored through S3 (s3s-fs keeps its ETag in a sidecar file), then replaced directly.
    op.write("w", b"via s3".to_vec()).await.unwrap();
    let e3 = op.stat("w").await.unwrap().etag().unwrap().to_owned();
    server.put_object(BUCKET, "w", b"via put_object").unwrap();
    let e4 = op.stat("w").await.unwrap().etag().unwrap().to_owned();
    assert_ne!(e3, e4);
    assert_eq!(op.read("w").await.unwrap().to_vec(), b"via put_object");

    // Setup writes are not requests; the listing shows the objects and no temporary files.
    server.reset_requests();
    let mut names: Vec<String> =
        op.list_with("").recursive(true).await.unwrap().into_iter().map(|e| e.path().to_owned()).collect();
    names.sort();
    assert!(names.contains(&"k/v".to_owned()) && names.contains(&"w".to_owned()), "{names:?}");
    assert!(names.iter().all(|n| !n.contains("tmp")), "{names:?}");
    assert!(server.put_object("nobucket", "x", b"").is_err());
    assert!(server.put_object(BUCKET, "../escape", b"").is_err());
}

#[tokio::test]
async fn wrong_secret_and_anonymous_requests_are_refused() {
    let (_dir, server, op) = start();
    op.write("secret", b"x".to_vec()).await.unwrap();

    let bad = operator(&server.endpoint(), "not-the-secret");
    let err = bad.stat("secret").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::PermissionDenied, "{err}");
    assert!(bad.read("secret").await.is_err());
    assert!(bad.write("other", b"y".to_vec()).await.is_err());

    // No signature at all.
    let mut tcp = std::net::TcpStream::connect(server.addr()).unwrap();
    write!(tcp, "GET /{BUCKET}/secret HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n", server.addr()).unwrap();
    let mut resp = String::new();
    tcp.read_to_string(&mut resp).unwrap();
    assert!(resp.starts_with("HTTP/1.1 403"), "{resp}");
    assert!(!resp.contains("\r\n\r\nx"));
}

#[tokio::test]
async fn faults_fail_and_delay_requests() {
    let (_dir, server, op) = start();
    op.write("f", b"data".to_vec()).await.unwrap();

    server.set_fault(Fault::Status(503));
    server.reset_requests();
    let err = op.stat("f").await.unwrap_err();
    assert!(err.is_temporary(), "503 should be retryable: {err}");
    assert!(op.read("f").await.is_err());
    assert!(op.write("g", b"x".to_vec()).await.is_err());
    assert_eq!(ops(&server), [Op::Head, Op::Get, Op::Put], "faulted requests are still logged");

    server.set_fault(Fault::Delay(Duration::from_millis(150)));
    let t = Instant::now();
    op.stat("f").await.unwrap();
    assert!(t.elapsed() >= Duration::from_millis(150), "{:?}", t.elapsed());

    server.set_fault(Fault::DelayThenStatus(Duration::from_millis(100), 500));
    let t = Instant::now();
    assert!(op.stat("f").await.is_err());
    assert!(t.elapsed() >= Duration::from_millis(100), "{:?}", t.elapsed());

    server.set_fault(Fault::None);
    let t = Instant::now();
    assert_eq!(op.read("f").await.unwrap().to_vec(), b"data");
    assert!(op.stat("g").await.is_err(), "the faulted write must not have reached s3s");
    assert!(t.elapsed() < Duration::from_millis(100), "{:?}", t.elapsed());
}

#[tokio::test]
async fn delay_proxy_adds_a_round_trip() {
    let (_dir, server, direct) = start();
    direct.write("p", b"proxied".to_vec()).await.unwrap();
    let one_way = Duration::from_millis(5);
    let proxy = DelayProxy::start(server.addr(), one_way).unwrap();
    let via = operator(&proxy.endpoint(), S3Server::SECRET_KEY);

    // Warm both connections up, then time single stats.
    direct.stat("p").await.unwrap();
    via.stat("p").await.unwrap();
    let mut fastest_direct = Duration::MAX;
    for _ in 0..5 {
        let t = Instant::now();
        direct.stat("p").await.unwrap();
        fastest_direct = fastest_direct.min(t.elapsed());
    }
    let mut slowest_via = Duration::ZERO;
    let mut fastest_via = Duration::MAX;
    for _ in 0..5 {
        let t = Instant::now();
        via.stat("p").await.unwrap();
        slowest_via = slowest_via.max(t.elapsed());
        fastest_via = fastest_via.min(t.elapsed());
    }
    eprintln!("stat direct (fastest of 5) {fastest_direct:?}, via proxy {fastest_via:?}..{slowest_via:?}");
    assert!(fastest_via >= 2 * one_way, "{fastest_via:?}");
    assert!(fastest_direct < 2 * one_way, "{fastest_direct:?}");
    // Bodies pass through intact, both ways.
    via.write("q", pattern(300_000, 9)).await.unwrap();
    assert_eq!(via.read("q").await.unwrap().to_vec(), pattern(300_000, 9));
    proxy.shutdown();
}

/// From a plain (sync) test, with the client on a runtime of its own; shutdown stops serving.
#[test]
fn works_from_sync_code_and_shuts_down() {
    let dir = tempfile::tempdir().unwrap();
    let server = S3Server::start(dir.path()).unwrap();
    server.create_bucket(BUCKET).unwrap();
    server.put_object(BUCKET, "s", b"sync").unwrap();
    let op = operator(&server.endpoint(), S3Server::SECRET_KEY);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    assert_eq!(rt.block_on(op.read("s")).unwrap().to_vec(), b"sync");
    assert_eq!(server.count(|r| r.op == Op::Get), 1);
    let addr = server.addr();
    server.shutdown();
    assert!(std::net::TcpStream::connect(addr).is_err());
}
