//! The hello across protocol versions, over real QUIC with the cluster's certificates: a
//! client or a worker of another version against a real master is refused at once with a
//! typed `VersionMismatch` that it can read (an `Error` frame stamped with its own version,
//! as a build that reads only its own version needs) naming both versions, and the master
//! closes the connection; this build against a master of another version fails at once,
//! not retryable, naming the master and both versions (wire/FORMAT.md, "Compatibility").

mod server_support;

use cv_net::identity::CertRole;
use cv_net::quic::TransportSettings;
use cv_net::rpc::{self, Conn};
use cv_net::tls::SERVER_NAME;
use cv_wire::msg::{ErrorReply, Hello, Role};
use cv_wire::{ErrorCode, Frame, HEADER_LEN, Kind, Limits, PROTOCOL_VERSION};
use server_support::*;
use std::time::{Duration, Instant};

/// An answer must come this soon: a refusal, not a timeout.
const PROMPT: Duration = Duration::from_secs(2);

/// `frame` with its header's version set to `version` and its crc made right again: the
/// frame a build of that version sends.
fn stamped(frame: &[u8], version: u16) -> Vec<u8> {
    let mut b = frame.to_vec();
    b[4..6].copy_from_slice(&version.to_le_bytes());
    let mut crc = crc32fast::Hasher::new();
    crc.update(&b[..28]);
    crc.update(&b[HEADER_LEN..]);
    b[28..32].copy_from_slice(&crc.finalize().to_le_bytes());
    b
}

/// What a peer of another version gets back for its hello: the reply's bytes, read the way
/// a build that speaks only `expect_version` reads them (its header must claim that version),
/// and how long it took.
async fn foreign_hello(h: &Harness, addr: std::net::SocketAddr, usage: CertRole, hello: &[u8]) -> (Vec<u8>, Duration) {
    let ep = rpc::client_endpoint(&h.identity(usage), &TransportSettings::default()).unwrap();
    let conn = ep.connect(addr, SERVER_NAME).unwrap().await.unwrap();
    let start = Instant::now();
    let (mut send, mut recv) = conn.open_bi().await.unwrap();
    send.write_all(hello).await.unwrap();
    send.finish().unwrap();
    let reply = tokio::time::timeout(PROMPT, recv.read_to_end(1 << 16)).await.expect("refused at once").unwrap();
    let took = start.elapsed();
    // The master then closes the connection: the hello is not retried on it.
    let closed = tokio::time::timeout(Duration::from_secs(5), conn.closed()).await.expect("the master closes");
    assert!(matches!(closed, quinn::ConnectionError::ApplicationClosed(_)), "{closed:?}");
    (reply, took)
}

/// The reply is an `Error { VersionMismatch }` frame stamped `version`, valid (crc, body),
/// whose message names both versions.
fn assert_refusal(reply: &[u8], version: u16, names: &str) {
    assert_eq!(&reply[0..4], b"CVWF");
    assert_eq!(u16::from_le_bytes([reply[4], reply[5]]), version, "stamped with the peer's version");
    let frame = Frame::decode(reply, &Limits::DEFAULT).expect("a valid frame");
    assert_eq!(frame.kind(), Kind::Error);
    let e: ErrorReply = frame.decode_body().unwrap();
    assert_eq!(ErrorCode::from_u16(e.code), ErrorCode::VersionMismatch, "{}", e.message);
    assert!(!ErrorCode::VersionMismatch.retryable());
    assert!(e.message.contains(names), "{}", e.message);
    assert!(e.message.contains(&format!("this master speaks {PROTOCOL_VERSION}")), "{}", e.message);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peers_of_another_version_are_refused_at_once_in_their_own_version() {
    let h = Harness::new();
    let server = h.start().await;
    let addr = server.local_addr();
    let (old, new) = (PROTOCOL_VERSION - 1, PROTOCOL_VERSION + 1);
    for (usage, role) in [(CertRole::Client, Role::Client), (CertRole::Node, Role::Worker)] {
        // A build of the previous version and one of the next, each speaking only its own.
        for v in [old, new] {
            let hello = Hello { min_version: v, max_version: v, role, node: format!("{role:?}-v{v}") };
            let frame = cv_wire::encode(&hello, 1, &[]).unwrap();
            let (reply, took) = foreign_hello(&h, addr, usage.clone(), &stamped(frame.head(), v)).await;
            assert_refusal(&reply, v, &format!("the peer speaks protocol version {v}"));
            assert!(took < PROMPT, "{role:?} v{v}: {took:?}");
        }
        // A later build that writes its hello in this version but no longer speaks it.
        let hello = Hello { min_version: new, max_version: new + 1, role, node: "beyond the window".into() };
        let frame = cv_wire::encode(&hello, 1, &[]).unwrap();
        let (reply, _) = foreign_hello(&h, addr, usage, frame.head()).await;
        assert_refusal(&reply, PROTOCOL_VERSION, &format!("{new}..={}", new + 1));
    }
    // The master serves this version as before.
    let conn = h.connect(&server, Role::Client).await;
    let (_, _): (cv_wire::msg::Pong, _) = call(&conn, &cv_wire::msg::Ping { nonce: 1 }, &[]).await;
    server.shutdown().await;
}

/// A master of the previous version, as that build answers this build's hello: it cannot
/// read the frame, and refuses it with an `Error` frame of its own version.
async fn old_master(h: &Harness) -> (std::net::SocketAddr, quinn::Endpoint) {
    let ep = rpc::server_endpoint(
        "127.0.0.1:0".parse().unwrap(),
        &h.identity(CertRole::Node),
        &TransportSettings::default(),
    )
    .unwrap();
    let addr = ep.local_addr().unwrap();
    let accept = ep.clone();
    tokio::spawn(async move {
        while let Some(incoming) = accept.accept().await {
            tokio::spawn(async move {
                let Ok(conn) = incoming.await else { return };
                let Ok((mut send, mut recv)) = conn.accept_bi().await else { return };
                let Ok(hello) = recv.read_to_end(1 << 16).await else { return };
                let old = PROTOCOL_VERSION - 1;
                let theirs = u16::from_le_bytes([hello[4], hello[5]]);
                let message = format!(
                    "wire UnsupportedVersion: frame version {theirs}, this build speaks {old}; this server speaks version {old}"
                );
                let reply = ErrorReply { code: ErrorCode::VersionMismatch as u16, message, redirect: None };
                let frame = cv_wire::encode(&reply, 0, &[]).unwrap();
                let _ = send.write_all(&stamped(frame.head(), old)).await;
                let _ = send.finish();
                let _ = tokio::time::timeout(Duration::from_secs(2), conn.closed()).await;
            });
        }
    });
    (addr, ep)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn this_build_against_a_master_of_the_previous_version_fails_at_once_naming_both() {
    let h = Harness::new();
    let (addr, _ep) = old_master(&h).await;
    let ep = rpc::client_endpoint(&h.identity(CertRole::Client), &TransportSettings::default()).unwrap();
    let start = Instant::now();
    let connect = Conn::connect(&ep, addr, Role::Client, "new-client", Limits::DEFAULT);
    let err = tokio::time::timeout(PROMPT, connect).await.expect("refused at once").expect_err("refused");
    assert_eq!(err.code(), Some(ErrorCode::VersionMismatch), "{err}");
    assert!(!err.retryable(), "{err}");
    let msg = err.to_string();
    assert!(msg.contains(&addr.to_string()), "names the master: {msg}");
    assert!(msg.contains(&format!("this build speaks protocol version {PROTOCOL_VERSION}")), "{msg}");
    assert!(msg.contains(&format!("this build speaks {}", PROTOCOL_VERSION - 1)), "{msg}");
    assert!(start.elapsed() < PROMPT);
}
