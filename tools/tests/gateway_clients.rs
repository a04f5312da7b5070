//! The S3 gateway against real S3 clients: boto3 and the AWS CLI (HTTP and
//! HTTPS with the cluster's certificate), DuckDB's httpfs, and OpenDAL's S3
//! service, each over a real cluster on loopback. The Python clients come
//! from `scripts/install-gateway-tests`.

use cv_client::Client;
use cv_gateway::{AccessKey, Bucket, Gateway, GatewaySettings, GatewayTls, TlsMode};
use cv_tools::cluster::{ClusterOptions, LocalCluster};
use std::path::{Path, PathBuf};
use std::process::Command;

const AK: &str = "AKCVGATEWAYTEST";
const SK: &str = "gateway-test-secret-key";

fn venv_python() -> PathBuf {
    let venv = std::env::var_os("CV_S3_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache/cv/venv-s3"));
    let py = venv.join("bin/python");
    assert!(py.exists(), "{} is missing: run scripts/install-gateway-tests", py.display());
    py
}

fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/gateway").join(name)
}

fn settings(tls: GatewayTls) -> GatewaySettings {
    GatewaySettings {
        bind: "127.0.0.1:0".parse().unwrap(),
        tls,
        buckets: vec![
            Bucket { name: "lake".into(), path: "/warehouse".into(), public: false },
            Bucket { name: "open-data".into(), path: "/public".into(), public: true },
        ],
        keys: vec![AccessKey { access_key: AK.into(), secret_key: Some(SK.into()), secret_key_file: None }],
        ..GatewaySettings::default()
    }
}

struct Bed {
    _dir: tempfile::TempDir,
    cluster: LocalCluster,
    client: Client,
    gateway: Gateway,
    certs: PathBuf,
}

async fn bed(tls: GatewayTls) -> Bed {
    bed_with(settings(tls)).await
}

async fn bed_with(settings: GatewaySettings) -> Bed {
    let dir = tempfile::tempdir().unwrap();
    let cluster = LocalCluster::start(&ClusterOptions::ephemeral(dir.path())).await.unwrap();
    let client = cluster.client().await.unwrap();
    client.mkdir("/warehouse", true).await.unwrap();
    client.mkdir("/public", true).await.unwrap();
    let certs = dir.path().join("certs");
    let node = Some((certs.join("node.pem"), certs.join("node.key")));
    let gateway = Gateway::start(client.clone(), &settings, node).await.unwrap();
    Bed { _dir: dir, cluster, client, gateway, certs }
}

impl Bed {
    async fn stop(self) {
        self.gateway.stop().await;
        self.client.shutdown().await;
        self.cluster.shutdown().await.unwrap();
    }
}

/// Runs a client script off the runtime; its output is shown when it fails.
async fn run_script(args: Vec<String>) {
    let name = args[0].clone();
    let out =
        tokio::task::spawn_blocking(move || Command::new(venv_python()).args(&args).output().unwrap()).await.unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    println!("{text}");
    assert!(out.status.success(), "{name} failed:\n{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn boto3_and_the_aws_cli_see_s3_semantics() {
    let b = bed(GatewayTls::OFF).await;
    let sem = script("s3_semantics.py").display().to_string();
    run_script(vec![sem, b.gateway.endpoint(), AK.into(), SK.into(), "lake".into(), "open-data".into()]).await;
    // What the clients wrote is cv's, read by a cv client.
    let f = b.client.open("/warehouse/mp/big.bin").await.unwrap();
    assert_eq!(f.len(), 2 * (5 << 20) + 777);
    // Completed without copying: the object lists its parts' blocks (4 MiB + 1 MiB per 5 MiB part).
    let lens: Vec<u64> = f.blocks().iter().map(|b| b.len).collect();
    assert_eq!(lens, [4 << 20, 1 << 20, 4 << 20, 1 << 20, 777], "the parts' own blocks");
    let gone = b.client.list("/.cv-gateway/uploads").await.map(|v| v.len()).unwrap_or(0);
    assert_eq!(gone, 0, "completed and aborted uploads leave no parts behind");
    let st = b.gateway.stats();
    assert!(st.gets >= 10 && st.heads >= 3 && st.lists >= 10 && st.writes >= 30, "{st:?}");
    assert!(st.bytes_out >= 2 * (3 << 20), "the whole-object GETs alone were 6 MiB: {st:?}");
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_open_ttl_the_gateway_still_sees_its_own_writes_at_once() {
    // The semantics script overwrites, deletes and copies keys and reads them back at once.
    let mut s = settings(GatewayTls::OFF);
    s.open_ttl = "60s".parse().unwrap();
    let b = bed_with(s).await;
    let sem = script("s3_semantics.py").display().to_string();
    run_script(vec![sem, b.gateway.endpoint(), AK.into(), SK.into(), "lake".into(), "open-data".into()]).await;
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_with_the_cluster_certificate() {
    let b = bed(GatewayTls::Named(TlsMode::Cluster)).await;
    let endpoint = format!("https://localhost:{}", b.gateway.addr().port());
    assert!(b.gateway.endpoint().starts_with("https://"));
    let sem = script("s3_semantics.py").display().to_string();
    let ca = b.certs.join("ca.pem").display().to_string();
    run_script(vec![sem, endpoint, AK.into(), SK.into(), "lake".into(), "open-data".into(), ca]).await;
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duckdb_httpfs_reads_and_writes_parquet_through_the_gateway() {
    let b = bed(GatewayTls::OFF).await;
    let work = tempfile::tempdir().unwrap();
    let args = vec![
        script("duckdb_httpfs.py").display().to_string(),
        b.gateway.addr().to_string(),
        AK.into(),
        SK.into(),
        "lake".into(),
        work.path().display().to_string(),
    ];
    run_script(args).await;
    // DuckDB's multipart uploads became plain cv files.
    for i in 0..3 {
        let st = b.client.stat(&format!("/warehouse/duck/p{i}.parquet")).await.unwrap();
        let local = std::fs::metadata(work.path().join(format!("local/p{i}.parquet"))).unwrap();
        assert_eq!(st.length, local.len(), "p{i}.parquet");
    }
    b.stop().await;
}

/// One HTTP/1.1 request on a fresh connection: (status, the whole response as text).
async fn http_get(addr: std::net::SocketAddr, path: &str, range: &str) -> (u16, String) {
    let (status, raw) = http_get_raw(addr, path, range).await;
    (status, String::from_utf8_lossy(&raw).into_owned())
}

/// One HTTP/1.1 request on a fresh connection: (status, the whole response).
async fn http_get_raw(addr: std::net::SocketAddr, path: &str, range: &str) -> (u16, Vec<u8>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nRange: {range}\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).await.unwrap();
    let status = String::from_utf8_lossy(&out[..out.len().min(16)]).split(' ').nth(1).and_then(|c| c.parse().ok());
    (status.unwrap_or(0), out)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_request_that_held_back_its_body_closes_the_connection() {
    // An unsigned PUT is refused before its body is read. The client asked `Expect:
    // 100-continue` and sent no body: whatever it sends next on this connection could be taken
    // for that body, so the answer closes the connection.
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let b = bed(GatewayTls::OFF).await;
    let addr = b.gateway.addr();
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let req = format!(
        "PUT /open-data/held.bin HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n"
    );
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    let read = tokio::time::timeout(std::time::Duration::from_secs(10), s.read_to_end(&mut out)).await;
    let text = String::from_utf8_lossy(&out).to_ascii_lowercase();
    assert!(read.is_ok(), "the connection stayed open after the refusal: {text}");
    assert!(text.starts_with("http/1.1 403"), "{text}");
    assert!(text.contains("connection: close\r\n"), "{text}");
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_worker_is_an_error_that_names_the_object_and_no_internals() {
    // The file's only copy was on the stopped worker, which may come back with it: the client
    // reports it unreachable (retryable), which S3 clients see as a 503 naming the object (they
    // retry it), not a hang, a NoSuchKey or a loss.
    let mut b = bed(GatewayTls::OFF).await;
    let data: Vec<u8> = (0..3u32 << 20).map(|i| (i * 31 % 251) as u8).collect();
    let mut w = b.client.create("/public/big.bin", false).await.unwrap();
    w.write(&data).await.unwrap();
    w.close().await.unwrap();
    let (status, text) = http_get(b.gateway.addr(), "/open-data/big.bin", "bytes=0-99").await;
    assert_eq!(status, 206, "{text}");
    assert!(text.to_ascii_lowercase().contains("content-length: 100\r\n"), "{text}");
    b.cluster.stop_worker().await.unwrap();
    // The bytes read before are in the gateway's memory (`[gateway] cache`), still served:
    // they are this version's. Bytes it never read are lost with the worker.
    let (status, text) = http_get(b.gateway.addr(), "/open-data/big.bin", "bytes=0-99").await;
    assert_eq!(status, 206, "{text}");
    let (status, text) = http_get(b.gateway.addr(), "/open-data/big.bin", "bytes=2000000-2000099").await;
    assert_eq!(status, 503, "{text}");
    assert!(text.contains("<Code>ServiceUnavailable</Code>") && text.contains("open-data/big.bin"), "{text}");
    assert!(text.contains("<RequestId>"), "an error carries a request id: {text}");
    assert!(!text.contains("127.0.0.1") && !text.contains("/public/"), "no cv internals in a response: {text}");
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_being_written_is_no_such_key_until_it_is_complete() {
    // An upload in progress is not an object in S3: a GET of a file whose writer has not
    // closed it is NoSuchKey at once, not a 503 that clients retry (issue 40).
    let b = bed(GatewayTls::OFF).await;
    let mut w = b.client.create("/public/busy.bin", false).await.unwrap();
    w.write(b"not yet").await.unwrap();
    let t = std::time::Instant::now();
    let (status, text) = http_get(b.gateway.addr(), "/open-data/busy.bin", "bytes=0-3").await;
    assert_eq!(status, 404, "{text}");
    assert!(text.contains("<Code>NoSuchKey</Code>") && text.contains("open-data/busy.bin"), "{text}");
    assert!(t.elapsed() < std::time::Duration::from_secs(1), "took {:?}", t.elapsed());
    w.close().await.unwrap();
    let (status, text) = http_get(b.gateway.addr(), "/open-data/busy.bin", "bytes=0-3").await;
    assert_eq!(status, 206, "{text}");
    assert!(text.ends_with("not "), "{text}");
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cvctl_gateway_serves_from_its_config_and_stops_on_sigterm() {
    let b = bed(GatewayTls::OFF).await;
    let mut w = b.client.create("/public/hello.txt", false).await.unwrap();
    w.write(b"hello from cv").await.unwrap();
    w.close().await.unwrap();
    let base = std::fs::read_to_string(b.cluster.client_config()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let no_section = dir.path().join("plain.toml");
    std::fs::write(&no_section, &base).unwrap();
    let out =
        Command::new(env!("CARGO_BIN_EXE_cvctl")).args(["gateway", "--config"]).arg(&no_section).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no [gateway] section"), "{out:?}");

    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let cfg = dir.path().join("gw.toml");
    let section = format!(
        "[gateway]\nbind = \"127.0.0.1:{port}\"\n[[gateway.buckets]]\nname = \"open-data\"\npath = \"/public\"\npublic = true\n"
    );
    std::fs::write(&cfg, base + &section).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_cvctl"))
        .args(["gateway", "--config"])
        .arg(&cfg)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let (status, text) = loop {
        if tokio::net::TcpStream::connect(addr).await.is_ok() {
            break http_get(addr, "/open-data/hello.txt", "bytes=0-").await;
        }
        assert!(std::time::Instant::now() < deadline, "cvctl gateway did not listen");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    assert_eq!(status, 206, "{text}");
    assert!(text.ends_with("hello from cv"), "{text}");
    // SIGTERM: it stops and exits cleanly.
    let pid = child.id().to_string();
    assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    let done = tokio::task::spawn_blocking(move || child.wait().unwrap()).await.unwrap();
    assert!(done.success(), "{done:?}");
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_open_ttl_a_file_replaced_elsewhere_is_served_as_one_whole_version() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = LocalCluster::start(&ClusterOptions::ephemeral(dir.path())).await.unwrap();
    let client = cluster.client().await.unwrap();
    client.mkdir("/public", true).await.unwrap();
    let mut s = settings(GatewayTls::OFF);
    s.open_ttl = "60s".parse().unwrap();
    let gateway = Gateway::start(client.clone(), &s, None).await.unwrap();
    let put = |data: Vec<u8>| {
        let client = client.clone();
        async move {
            let mut w = client.create("/public/r.bin", true).await.unwrap();
            w.write(&data).await.unwrap();
            w.close().await.unwrap();
        }
    };
    let old: Vec<u8> = (0..(6u32 << 20)).map(|i| (i % 253) as u8).collect();
    let new: Vec<u8> = (0..(5u32 << 20)).map(|i| (i % 241) as u8).collect();
    put(old.clone()).await;
    let body = |raw: &[u8]| raw.windows(4).position(|w| w == b"\r\n\r\n").map(|i| raw[i + 4..].to_vec());
    let (status, _) = http_get(gateway.addr(), "/open-data/r.bin", "bytes=0-9").await;
    assert_eq!(status, 206);
    // Replaced by another client while the gateway holds the old version open: once the old
    // blocks are gone (the worker has heard of the delete: a heartbeat after it), the gateway
    // opens afresh; what it serves is one whole version. (Deletes sent while a body streams
    // cut that body short: see the gateway's README.)
    put(new.clone()).await;
    cv_client::wait_for_heartbeats(&client, 1).await.unwrap();
    let (status, raw) = http_get_raw(gateway.addr(), "/open-data/r.bin", "bytes=1000-1999").await;
    assert_eq!(status, 206, "{}", String::from_utf8_lossy(&raw));
    let got = body(&raw).unwrap();
    assert!(got == old[1000..2000] || got == new[1000..2000], "a range of neither version");
    let (status, raw) = http_get_raw(gateway.addr(), "/open-data/r.bin", "bytes=0-").await;
    assert_eq!(status, 206);
    let whole = body(&raw).unwrap();
    assert!(whole == old || whole == new, "a whole version");
    gateway.stop().await;
    client.shutdown().await;
    cluster.shutdown().await.unwrap();
}

/// ListMultipartUploads and ListParts as boto3 sees them, and an upload left alone expiring
/// with its parts (`multipart_expiry`, 8 s here): its directory, and with it the parts'
/// pinned blocks, are gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn incomplete_multipart_uploads_are_listed_and_expire() {
    let settings = GatewaySettings { multipart_expiry: cv_net::config::Dur::secs(8), ..settings(GatewayTls::OFF) };
    let b = bed_with(settings).await;
    let mp = script("multipart.py").display().to_string();
    run_script(vec![mp, b.gateway.endpoint(), AK.into(), SK.into(), "lake".into(), "8".into()]).await;
    let left = b.client.list("/.cv-gateway/uploads").await.map(|v| v.len()).unwrap_or(0);
    assert_eq!(left, 0, "the expired upload's parts were removed");
    b.stop().await;
}

/// A peer that connects and says nothing, or trickles its headers, is closed after
/// `header_timeout`; beyond `max_connections` a new connection waits for a slot instead of
/// taking memory, and is served once one frees.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_and_slow_connections_are_closed_and_a_crowd_waits_for_a_slot() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let within = std::time::Duration::from_secs(1);
    let settings = GatewaySettings {
        header_timeout: cv_net::config::Dur(within),
        max_connections: 2,
        ..settings(GatewayTls::OFF)
    };
    let b = bed_with(settings).await;
    let addr = b.gateway.addr();
    let started = std::time::Instant::now();
    // Two connections take both slots: one silent, one stopping mid-header.
    let mut silent = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut slow = tokio::net::TcpStream::connect(addr).await.unwrap();
    slow.write_all(b"GET /open-data?list-type=2 HTTP/1.1\r\nHost: x\r\n").await.unwrap();
    // A third, complete request waits until one of them is closed.
    let third = tokio::spawn(async move {
        let mut c = tokio::net::TcpStream::connect(addr).await.unwrap();
        c.write_all(b"GET /open-data?list-type=2 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await.unwrap();
        let mut answer = Vec::new();
        c.read_to_end(&mut answer).await.unwrap();
        (started.elapsed(), String::from_utf8_lossy(&answer).into_owned())
    });
    for (name, conn) in [("silent", &mut silent), ("slow", &mut slow)] {
        let mut buf = [0u8; 256];
        let n = tokio::time::timeout(within * 10, conn.read(&mut buf)).await.expect("kept open").unwrap_or(0);
        assert_eq!(n, 0, "{name}: answered instead of closed: {}", String::from_utf8_lossy(&buf[..n]));
        assert!(started.elapsed() >= within, "{name} closed before its headers were due");
    }
    let (took, answer) = tokio::time::timeout(within * 10, third).await.expect("never served").unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(took >= within, "served at {took:?}, while both slots were taken");
    b.stop().await;
}
