//! The shard-runtime-driven QUIC endpoint against a real quinn 0.11 client on tokio, over loopback,
//! with mutual TLS from a test CA.
//!
//! Request protocol of the test server (one request per bidirectional stream): one op byte,
//! then the op's payload; the client finishes its side after the payload.
//! - `E` echo: the reply is the payload.
//! - `D` download: payload is a u64 length; the reply is that many pattern bytes.
//! - `U` upload: the reply is crc32 (u32) and length (u64) of the payload.
//! - `X` early drop: the server drops the receive half unread, replies `ok`.
//! - `R` abandon: the server drops both halves at once (reset + stop).

use std::cell::RefCell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cv_rt::quic::{
    Connection, Endpoint, EndpointOptions, ErrorKind, RecvStream, SendStream, ServerConfig, TransportConfig, VarInt,
};
use rand::{RngCore, SeedableRng};
use rustls::RootCertStore;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::server::WebPkiClientVerifier;

const LIMIT: usize = 32 << 20;
/// Pattern period: a prime, so chunk boundaries never line up with it.
const PERIOD: usize = 65_521;

fn pattern() -> Vec<u8> {
    (0..PERIOD * 2).map(|i| ((i % PERIOD) * 131 % 251) as u8).collect()
}

// ---------------------------------------------------------------- certificates

struct Pki {
    ca: CertificateDer<'static>,
    server: (CertificateDer<'static>, Vec<u8>),
    client: (CertificateDer<'static>, Vec<u8>),
}

fn pki() -> Pki {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let leaf = |name: &str| {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert =
            rcgen::CertificateParams::new(vec![name.to_string()]).unwrap().signed_by(&key, &ca, &ca_key).unwrap();
        (cert.der().clone(), key.serialize_der())
    };
    Pki { ca: ca.der().clone(), server: leaf("localhost"), client: leaf("client.cv") }
}

fn key(der: &[u8]) -> PrivateKeyDer<'static> {
    PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(der.to_vec()))
}

fn roots(pki: &Pki) -> Arc<RootCertStore> {
    let mut roots = RootCertStore::empty();
    roots.add(pki.ca.clone()).unwrap();
    Arc::new(roots)
}

#[derive(Clone, Copy)]
struct Spec {
    idle: Duration,
    keep_alive: Option<Duration>,
    max_bidi: u32,
    max_connections: usize,
}

impl Default for Spec {
    fn default() -> Self {
        Self { idle: Duration::from_secs(10), keep_alive: None, max_bidi: 100, max_connections: 64 }
    }
}

fn server_config(pki: &Pki, spec: Spec) -> Arc<ServerConfig> {
    let verifier = WebPkiClientVerifier::builder(roots(pki)).build().unwrap();
    let tls = rustls::ServerConfig::builder()
        .with_client_cert_verifier(verifier)
        .with_single_cert(vec![pki.server.0.clone()], key(&pki.server.1))
        .unwrap();
    let crypto = quinn_proto::crypto::rustls::QuicServerConfig::try_from(tls).unwrap();
    let mut transport = TransportConfig::default();
    transport
        .max_idle_timeout(Some(spec.idle.try_into().unwrap()))
        .keep_alive_interval(spec.keep_alive)
        .max_concurrent_bidi_streams(VarInt::from_u32(spec.max_bidi));
    let mut config = ServerConfig::with_crypto(Arc::new(crypto));
    config.transport_config(Arc::new(transport));
    Arc::new(config)
}

// ---------------------------------------------------------------- shard-runtime server

#[derive(Debug, Default, Clone)]
struct Report {
    connections: usize,
    accepted: usize,
    /// One line per connection whose handler ended, with the error that ended it.
    ended: Vec<String>,
    peer_leafs: Vec<Vec<u8>>,
}

enum Ctl {
    Report(flume::Sender<Report>),
    Close(u32),
}

struct Server {
    addr: SocketAddr,
    ctl: flume::Sender<Ctl>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Server {
    fn start(pki: &Pki, spec: Spec) -> Self {
        let config = server_config(pki, spec);
        let (addr_tx, addr_rx) = flume::bounded(1);
        let (ctl, ctl_rx) = flume::unbounded::<Ctl>();
        let thread = std::thread::spawn(move || {
            cv_rt::Runtime::new(Default::default()).unwrap().block_on(async move {
                let opts = EndpointOptions { max_connections: spec.max_connections, ..EndpointOptions::default() };
                let ep = Endpoint::bind("127.0.0.1:0".parse().unwrap(), config, opts).unwrap();
                addr_tx.send(ep.local_addr()).unwrap();
                let report = Rc::new(RefCell::new(Report::default()));
                cv_rt::spawn_local(accept_loop(ep.clone(), report.clone())).detach();
                while let Ok(ctl) = ctl_rx.recv_async().await {
                    match ctl {
                        Ctl::Report(tx) => {
                            let mut r = report.borrow().clone();
                            r.connections = ep.connection_count();
                            let _ = tx.send(r);
                        }
                        Ctl::Close(code) => {
                            ep.close(VarInt::from_u32(code), b"shutdown");
                            ep.wait_idle().await;
                            return;
                        }
                    }
                }
            })
        });
        let addr = addr_rx.recv_timeout(Duration::from_secs(10)).unwrap();
        Self { addr, ctl, thread: Some(thread) }
    }

    fn report(&self) -> Report {
        let (tx, rx) = flume::bounded(1);
        self.ctl.send(Ctl::Report(tx)).unwrap();
        rx.recv_timeout(Duration::from_secs(10)).unwrap()
    }

    /// Polls the report until `done` holds (or fails after `within`).
    fn wait_for(&self, within: Duration, done: impl Fn(&Report) -> bool) -> Report {
        let start = Instant::now();
        loop {
            let r = self.report();
            if done(&r) {
                return r;
            }
            assert!(start.elapsed() < within, "server state not reached: {r:?}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Closes the endpoint and waits until every connection drained and the thread ended.
    fn shutdown(mut self, code: u32) {
        self.ctl.send(Ctl::Close(code)).unwrap();
        let thread = self.thread.take().unwrap();
        let start = Instant::now();
        while !thread.is_finished() {
            assert!(start.elapsed() < Duration::from_secs(10), "server did not drain");
            std::thread::sleep(Duration::from_millis(10));
        }
        thread.join().unwrap();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(thread) = self.thread.take() {
            let _ = self.ctl.send(Ctl::Close(0));
            let _ = thread.join();
        }
    }
}

async fn accept_loop(ep: Endpoint, report: Rc<RefCell<Report>>) {
    while let Some(conn) = ep.accept().await {
        {
            let mut r = report.borrow_mut();
            r.accepted += 1;
            if let Some(leaf) = conn.peer_certificates().and_then(|c| c.first()) {
                r.peer_leafs.push(leaf.to_vec());
            }
        }
        cv_rt::spawn_local(serve_conn(conn, report.clone())).detach();
    }
}

async fn serve_conn(conn: Connection, report: Rc<RefCell<Report>>) {
    let err = loop {
        match conn.accept_bi().await {
            Ok((send, recv)) => {
                cv_rt::spawn_local(serve_stream(send, recv)).detach();
            }
            Err(e) => break e,
        }
    };
    let line = format!("{:?}: {:?}", err.kind(), err.connection_error());
    report.borrow_mut().ended.push(line);
}

async fn serve_stream(mut send: SendStream, mut recv: RecvStream) {
    let mut op = [0u8; 1];
    if recv.read_exact(&mut op).await.is_err() {
        return;
    }
    let _ = match op[0] {
        b'E' => match recv.read_to_end(LIMIT).await {
            Ok(body) => reply(&mut send, &body).await,
            Err(e) => Err(e),
        },
        b'D' => {
            let mut len = [0u8; 8];
            match recv.read_exact(&mut len).await {
                Ok(()) => download(&mut send, u64::from_le_bytes(len) as usize).await,
                Err(e) => Err(e),
            }
        }
        b'U' => {
            let mut crc = crc32fast::Hasher::new();
            let mut total = 0u64;
            let mut buf = vec![0u8; 64 << 10];
            loop {
                match recv.read(&mut buf).await {
                    Ok(Some(n)) => {
                        crc.update(&buf[..n]);
                        total += n as u64;
                    }
                    Ok(None) => break,
                    Err(_) => return,
                }
            }
            let mut out = crc.finalize().to_le_bytes().to_vec();
            out.extend_from_slice(&total.to_le_bytes());
            reply(&mut send, &out).await
        }
        b'X' => {
            drop(recv);
            reply(&mut send, b"ok").await
        }
        _ => Ok(()), // 'R' and unknown: both halves dropped here
    };
}

async fn reply(send: &mut SendStream, body: &[u8]) -> Result<(), cv_rt::quic::QuicError> {
    send.write_all(body).await?;
    send.finish()
}

async fn download(send: &mut SendStream, len: usize) -> Result<(), cv_rt::quic::QuicError> {
    let pat = pattern();
    let mut off = 0;
    while off < len {
        let start = off % PERIOD;
        let n = (len - off).min(PERIOD);
        send.write_all(&pat[start..start + n]).await?;
        off += n;
    }
    send.finish()
}

// ---------------------------------------------------------------- quinn client on tokio

fn client_config(pki: &Pki, idle: Duration, keep_alive: Option<Duration>) -> quinn::ClientConfig {
    let tls = rustls::ClientConfig::builder()
        .with_root_certificates(roots(pki))
        .with_client_auth_cert(vec![pki.client.0.clone()], key(&pki.client.1))
        .unwrap();
    let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(tls).unwrap();
    let mut transport = quinn::TransportConfig::default();
    transport.max_idle_timeout(Some(idle.try_into().unwrap())).keep_alive_interval(keep_alive);
    let mut config = quinn::ClientConfig::new(Arc::new(crypto));
    config.transport_config(Arc::new(transport));
    config
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

async fn connect(pki: &Pki, addr: SocketAddr) -> (quinn::Endpoint, quinn::Connection) {
    connect_with(pki, addr, Duration::from_secs(10), None).await.unwrap()
}

async fn connect_with(
    pki: &Pki,
    addr: SocketAddr,
    idle: Duration,
    keep_alive: Option<Duration>,
) -> Result<(quinn::Endpoint, quinn::Connection), quinn::ConnectionError> {
    // Like the server, the client needs larger socket buffers than Linux's default, or bursts
    // of GSO batches overflow it and congestion control collapses.
    let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::DGRAM, None).unwrap();
    sock.set_recv_buffer_size(4 << 20).unwrap();
    sock.set_send_buffer_size(4 << 20).unwrap();
    sock.bind(&"127.0.0.1:0".parse::<SocketAddr>().unwrap().into()).unwrap();
    let mut ep =
        quinn::Endpoint::new(quinn::EndpointConfig::default(), None, sock.into(), Arc::new(quinn::TokioRuntime))
            .unwrap();
    ep.set_default_client_config(client_config(pki, idle, keep_alive));
    let conn = ep.connect(addr, "localhost").unwrap().await?;
    Ok((ep, conn))
}

async fn call(conn: &quinn::Connection, op: u8, body: &[u8]) -> Result<Vec<u8>, String> {
    let (mut send, mut recv) = conn.open_bi().await.map_err(|e| e.to_string())?;
    let mut req = vec![op];
    req.extend_from_slice(body);
    // A server that stops our half early makes these fail; the reply still counts.
    let _ = send.write_all(&req).await;
    let _ = send.finish();
    recv.read_to_end(LIMIT).await.map_err(|e| e.to_string())
}

async fn within<T>(secs: u64, f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(secs), f).await.expect("timed out")
}

// ---------------------------------------------------------------- tests

#[test]
fn concurrent_echo_and_peer_certificate() {
    let pki = pki();
    let server = Server::start(&pki, Spec::default());
    runtime().block_on(async {
        let (_ep, conn) = connect(&pki, server.addr).await;
        // 1,000 calls of 64 B, 200 in flight, against a limit of 100 concurrent streams:
        // the client can only progress if the server returns stream credit.
        let mut tasks = tokio::task::JoinSet::new();
        for worker in 0..200u32 {
            let conn = conn.clone();
            tasks.spawn(async move {
                for i in 0..5u32 {
                    let mut body = [0u8; 64];
                    body[..4].copy_from_slice(&worker.to_le_bytes());
                    body[4..8].copy_from_slice(&i.to_le_bytes());
                    let got = call(&conn, b'E', &body).await.unwrap();
                    assert_eq!(got, body, "wrong echo for {worker}/{i}");
                }
            });
        }
        let mut done = 0;
        within(30, async {
            while let Some(r) = tasks.join_next().await {
                r.unwrap();
                done += 1;
            }
        })
        .await;
        assert_eq!(done, 200);

        // Sequential round trips (a rough latency figure; debug builds are slow).
        let mut rtts = Vec::new();
        for _ in 0..200 {
            let t = Instant::now();
            assert_eq!(call(&conn, b'E', &[7u8; 64]).await.unwrap(), [7u8; 64]);
            rtts.push(t.elapsed());
        }
        rtts.sort();
        eprintln!("64 B call on a new stream: p50 {:?} p99 {:?}", rtts[100], rtts[198]);
    });
    let r = server.report();
    assert_eq!(r.accepted, 1);
    assert_eq!(r.peer_leafs, vec![pki.client.0.to_vec()], "client leaf visible to handlers");
}

#[test]
fn download_64_mib_is_byte_exact() {
    let pki = pki();
    let server = Server::start(&pki, Spec::default());
    runtime().block_on(async {
        let (_ep, conn) = connect(&pki, server.addr).await;
        let len: usize = 64 << 20;
        let (mut send, mut recv) = conn.open_bi().await.unwrap();
        let mut req = vec![b'D'];
        req.extend_from_slice(&(len as u64).to_le_bytes());
        send.write_all(&req).await.unwrap();
        send.finish().unwrap();
        let pat = pattern();
        let start = Instant::now();
        let mut off = 0usize;
        within(30, async {
            while let Some(chunk) = recv.read_chunk(usize::MAX, true).await.unwrap() {
                let mut bytes = &chunk.bytes[..];
                while !bytes.is_empty() {
                    let p = off % PERIOD;
                    let n = bytes.len().min(PERIOD);
                    assert!(bytes[..n] == pat[p..p + n], "mismatch near offset {off}");
                    bytes = &bytes[n..];
                    off += n;
                }
            }
        })
        .await;
        let secs = start.elapsed().as_secs_f64();
        assert_eq!(off, len, "length");
        eprintln!("64 MiB download: {:.0} MB/s", len as f64 / secs / 1e6);
    });
}

#[test]
fn upload_16_mib_checked_by_crc() {
    let pki = pki();
    let server = Server::start(&pki, Spec::default());
    runtime().block_on(async {
        let (_ep, conn) = connect(&pki, server.addr).await;
        let mut body = vec![0u8; 16 << 20];
        rand::rngs::SmallRng::seed_from_u64(7).fill_bytes(&mut body);
        let got = within(30, call(&conn, b'U', &body)).await.unwrap();
        assert_eq!(got.len(), 12);
        assert_eq!(got[..4], crc32fast::hash(&body).to_le_bytes());
        assert_eq!(got[4..], (body.len() as u64).to_le_bytes());
    });
}

#[test]
fn dropped_streams_return_credit() {
    let pki = pki();
    let spec = Spec { max_bidi: 8, ..Spec::default() };
    let server = Server::start(&pki, spec);
    runtime().block_on(async {
        let (_ep, conn) = connect(&pki, server.addr).await;
        let payload = vec![1u8; 64 << 10];
        let mut tasks = tokio::task::JoinSet::new();
        for worker in 0..16 {
            let conn = conn.clone();
            let payload = payload.clone();
            tasks.spawn(async move {
                for _ in 0..10 {
                    // Receive half dropped unread: the reply must still arrive.
                    assert_eq!(call(&conn, b'X', &payload).await.unwrap(), b"ok");
                    // Both halves dropped: the client sees a reset, not a hang.
                    let err = call(&conn, b'R', &[]).await.unwrap_err();
                    assert!(err.contains("reset"), "worker {worker}: {err}");
                }
            });
        }
        within(30, async {
            while let Some(r) = tasks.join_next().await {
                r.unwrap();
            }
        })
        .await;
        // 320 streams went through 8 stream slots; the connection still works.
        assert_eq!(call(&conn, b'E', b"still").await.unwrap(), b"still");
    });
}

#[test]
fn disconnect_and_idle_timeout_free_connections() {
    let pki = pki();
    let spec = Spec { idle: Duration::from_millis(600), ..Spec::default() };
    let server = Server::start(&pki, spec);

    // A client that closes: the server sees the application close and frees the connection.
    runtime().block_on(async {
        let (ep, conn) = connect(&pki, server.addr).await;
        assert_eq!(call(&conn, b'E', b"hi").await.unwrap(), b"hi");
        conn.close(VarInt::from_u32(7), b"bye");
        ep.wait_idle().await;
    });
    let r = server.wait_for(Duration::from_secs(5), |r| r.connections == 0 && r.ended.len() == 1);
    assert!(r.ended[0].contains("ApplicationClosed"), "{:?}", r.ended);

    // A client that vanishes: its runtime stops running, nothing more is sent. The server's
    // idle timer must fire and free the connection.
    let rt = runtime();
    let vanished = rt.block_on(async { connect(&pki, server.addr).await });
    let t = Instant::now();
    let r = server.wait_for(Duration::from_secs(5), |r| r.connections == 0 && r.ended.len() == 2);
    assert!(r.ended[1].contains("TimedOut"), "{:?}", r.ended);
    assert!(t.elapsed() >= Duration::from_millis(400), "freed too early");
    drop(vanished);
    drop(rt);
}

#[test]
fn server_keep_alive_holds_an_idle_connection() {
    let pki = pki();
    let spec = Spec { idle: Duration::from_secs(10), keep_alive: Some(Duration::from_millis(150)), ..Spec::default() };
    let server = Server::start(&pki, spec);
    runtime().block_on(async {
        // The client allows 500 ms of silence and sends no keep-alives itself: only the
        // server's timer-driven pings keep the connection up.
        let (_ep, conn) = connect_with(&pki, server.addr, Duration::from_millis(500), None).await.unwrap();
        tokio::time::sleep(Duration::from_millis(1500)).await;
        assert!(conn.close_reason().is_none(), "{:?}", conn.close_reason());
        assert_eq!(call(&conn, b'E', b"alive").await.unwrap(), b"alive");
    });
}

#[test]
fn shutdown_closes_connections_visibly() {
    let pki = pki();
    let server = Server::start(&pki, Spec::default());
    let addr = server.addr;
    let rt = runtime();
    let (_ep, conn) = rt.block_on(async { connect(&pki, addr).await });
    rt.block_on(async { assert_eq!(call(&conn, b'E', b"x").await.unwrap(), b"x") });
    server.shutdown(42);
    rt.block_on(async {
        let err = within(5, conn.closed()).await;
        match err {
            quinn::ConnectionError::ApplicationClosed(close) => {
                assert_eq!(close.error_code, VarInt::from_u32(42));
                assert_eq!(&close.reason[..], b"shutdown");
            }
            other => panic!("unexpected close: {other}"),
        }
        // Nobody listens any more: a new connection fails rather than hangs.
        let res = connect_with(&pki, addr, Duration::from_millis(500), None).await;
        assert!(res.is_err());
    });
}

#[test]
fn connection_cap_and_exclusive_port() {
    let pki = pki();
    let spec = Spec { max_connections: 1, ..Spec::default() };
    let server = Server::start(&pki, spec);
    runtime().block_on(async {
        let (_ep, first) = connect(&pki, server.addr).await;
        let second = connect_with(&pki, server.addr, Duration::from_secs(2), None).await;
        match second {
            Err(quinn::ConnectionError::ConnectionClosed(close)) => {
                assert_eq!(close.error_code, quinn::TransportErrorCode::CONNECTION_REFUSED);
            }
            other => panic!("second connection not refused: {other:?}"),
        }
        assert_eq!(call(&first, b'E', b"one").await.unwrap(), b"one");
    });

    // The same port cannot be bound twice (no silent SO_REUSEPORT sharing).
    let addr = server.addr;
    let config = server_config(&pki, Spec::default());
    let kind = std::thread::spawn(move || {
        cv_rt::Runtime::new(Default::default()).unwrap().block_on(async move {
            Endpoint::bind(addr, config, EndpointOptions::default()).err().map(|e| (e.kind(), e.retryable()))
        })
    })
    .join()
    .unwrap();
    assert_eq!(kind, Some((ErrorKind::Io, false)));
}
