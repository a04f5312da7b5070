//! A server's connection buffers at most one largest frame of unfinished requests: a peer
//! that opens streams announcing large frames and never finishes them is refused at once
//! (`Unavailable`, retryable) instead of making the server allocate what they announce.

mod common;

use common::{identity, serve_pings};
use cv_net::identity::CertRole;
use cv_net::quic::TransportSettings;
use cv_net::rpc::{self, Conn, check_reply, read_frame};
use cv_net::tls::ClusterCa;
use cv_wire::msg::{Ping, Pong, Role};
use cv_wire::{ErrorCode, Limits};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

async fn connect(ca: &ClusterCa, addr: SocketAddr) -> Conn {
    let ep = rpc::client_endpoint(&identity(ca, CertRole::Client), &TransportSettings::default()).unwrap();
    Conn::connect(&ep, addr, Role::Client, "test", Limits::DEFAULT).await.unwrap()
}

/// Sends raw bytes as one request stream and returns the error code of the reply.
async fn raw_call(conn: &Conn, bytes: &[u8]) -> ErrorCode {
    let (mut send, mut recv) = conn.quinn().open_bi().await.unwrap();
    send.write_all(bytes).await.unwrap();
    send.finish().unwrap();
    let frame = read_frame(&mut recv, &Limits::DEFAULT).await.expect("an error reply frame");
    check_reply(frame).expect_err("an error reply").code().expect("a remote code")
}

async fn pings(conn: &Conn) {
    let reply = conn.call(&Ping { nonce: 5 }, &[b"small"]).await.unwrap();
    assert_eq!(reply.access::<Pong>().unwrap().nonce.to_native(), 5);
}

#[tokio::test]
async fn unfinished_requests_cannot_hold_more_than_their_connections_budget() {
    let ca = ClusterCa::generate("t").unwrap();
    let addr = serve_pings(&ca);
    let conn = connect(&ca, addr).await;
    // A ping announcing the largest payload the limits allow; only its header and body are sent.
    let mut big = cv_wire::encode(&Ping { nonce: 3 }, 3, &[]).unwrap().head().to_vec();
    big[16..20].copy_from_slice(&Limits::DEFAULT.max_payload.to_le_bytes());

    // One such request, left unfinished, holds most of the connection's budget...
    let (mut stalled, _stalled_recv) = conn.quinn().open_bi().await.unwrap();
    stalled.write_all(&big).await.unwrap();
    pings(&conn).await;
    // ...so a second one is refused at once, and may be retried.
    let busy = raw_call(&conn, &big).await;
    assert_eq!(busy, ErrorCode::Unavailable);
    assert!(busy.retryable());
    // Small requests still fit, and another connection has a budget of its own: its big
    // request is read (and then found cut short: the payload never came).
    pings(&conn).await;
    let other = connect(&ca, addr).await;
    assert_eq!(raw_call(&other, &big).await, ErrorCode::Malformed);

    // The stalled request goes away: its bytes come back to the connection.
    stalled.reset(0u32.into()).unwrap();
    let start = Instant::now();
    loop {
        match raw_call(&conn, &big).await {
            ErrorCode::Malformed => break,
            ErrorCode::Unavailable if start.elapsed() < Duration::from_secs(10) => {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            other => panic!("expected the budget back, got {other:?}"),
        }
    }
}
