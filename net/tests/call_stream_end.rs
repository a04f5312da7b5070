//! A call reads its reply stream to the end: no STOP_SENDING goes back per call (an extra
//! packet that wakes the server), and bytes after the reply frame are refused.

use cv_net::NetErrorKind;
use cv_net::quic::TransportSettings;
mod common;

use common::{identity, serve_one, serve_pings};
use cv_net::identity::CertRole;
use cv_net::rpc::{self, Conn};
use cv_net::tls::ClusterCa;
use cv_wire::Limits;
use cv_wire::msg::{Ping, Pong, Role};
use std::net::SocketAddr;
use std::time::Duration;

async fn connect(ca: &ClusterCa, addr: SocketAddr) -> Conn {
    let ep = rpc::client_endpoint(&identity(ca, CertRole::Client), &TransportSettings::default()).unwrap();
    tokio::time::timeout(Duration::from_secs(10), Conn::connect(&ep, addr, Role::Client, "test", Limits::DEFAULT))
        .await
        .expect("connect must not hang")
        .unwrap()
}

#[tokio::test]
async fn calls_stop_no_reply_stream() {
    let ca = ClusterCa::generate("t").unwrap();
    let addr = serve_pings(&ca);
    let conn = connect(&ca, addr).await;
    let payload = vec![7u8; 100 << 10];
    for n in 0..50u64 {
        let reply = conn.call(&Ping { nonce: n }, &[&payload]).await.unwrap();
        assert_eq!(reply.access::<Pong>().unwrap().nonce.to_native(), n);
        assert_eq!(reply.payload(), payload);
    }
    let stats = conn.quinn().stats();
    assert_eq!(stats.frame_tx.stop_sending, 0, "a call stopped its reply stream: {:?}", stats.frame_tx);
    assert!(stats.frame_tx.stream >= 50, "{:?}", stats.frame_tx);
    // Nor does the server stop the request streams (the hello's included).
    assert_eq!(stats.frame_rx.stop_sending, 0, "the server stopped request streams: {:?}", stats.frame_rx);
}

#[tokio::test]
async fn bytes_after_the_reply_frame_are_refused() {
    let ca = ClusterCa::generate("t").unwrap();
    // A server that follows its one good reply frame with stray bytes.
    let addr = serve_one(&ca, |mut send, id| async move {
        let reply = cv_wire::encode(&Pong { nonce: 1 }, id, &[]).unwrap();
        // One write: the stray bytes arrive in the same packet as the frame.
        send.write_all(&[reply.head(), b"stray"].concat()).await.unwrap();
        send.finish().unwrap();
    });
    let conn = connect(&ca, addr).await;
    let err = conn.call(&Ping { nonce: 1 }, &[]).await.unwrap_err();
    assert_eq!(err.kind(), NetErrorKind::Protocol, "{err}");
    assert!(!err.retryable(), "{err}");
    assert!(err.to_string().contains("5 bytes after the frame"), "{err}");
}

#[tokio::test]
async fn a_late_stream_end_neither_delays_the_call_nor_stops_the_stream() {
    let ca = ClusterCa::generate("t").unwrap();
    // A server that sends its reply frame at once and the stream's end 400 ms later.
    let addr = serve_one(&ca, |mut send, id| async move {
        let reply = cv_wire::encode(&Pong { nonce: 9 }, id, &[]).unwrap();
        send.write_all(reply.head()).await.unwrap();
        tokio::time::sleep(Duration::from_millis(400)).await;
        send.finish().unwrap();
    });
    let conn = connect(&ca, addr).await;
    let started = std::time::Instant::now();
    let reply = conn.call(&Ping { nonce: 9 }, &[]).await.unwrap();
    assert_eq!(reply.access::<Pong>().unwrap().nonce.to_native(), 9);
    assert!(started.elapsed() < Duration::from_millis(300), "the call waited for the end: {:?}", started.elapsed());
    tokio::time::sleep(Duration::from_millis(800)).await;
    let stats = conn.quinn().stats();
    assert_eq!(stats.frame_tx.stop_sending, 0, "the late end was not waited for: {:?}", stats.frame_tx);
}
