//! A worker and a master of different protocol versions, over real QUIC with the cluster's
//! certificates: a worker whose master refuses its version (or answers in a version it
//! cannot read) stops at once and says why, instead of retrying forever; a client of another
//! version gets a refusal from a shard that it can read (wire/FORMAT.md, "Compatibility").
#![allow(
    clippy::disallowed_types,
    clippy::disallowed_methods,
    reason = "the test's peers (client, master) run on tokio; the ban is for shard and store code"
)]

#[path = "server_common.rs"]
mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::*;
use cv_net::quic::TransportSettings;
use cv_net::rpc::{client_endpoint, server_endpoint};
use cv_net::tls::SERVER_NAME;
use cv_wire::msg::{ErrorReply, Hello, Role};
use cv_wire::{ErrorCode, Frame, HEADER_LEN, Kind, Limits, PROTOCOL_VERSION};

/// `frame` with its header's version set to `version` and its crc made right again.
fn stamped(frame: &[u8], version: u16) -> Vec<u8> {
    let mut b = frame.to_vec();
    b[4..6].copy_from_slice(&version.to_le_bytes());
    let mut crc = crc32fast::Hasher::new();
    crc.update(&b[..28]);
    crc.update(&b[HEADER_LEN..]);
    b[28..32].copy_from_slice(&crc.finalize().to_le_bytes());
    b
}

/// A master that refuses every hello for its version, the way a build of protocol `version`
/// does: an `Error { VersionMismatch }` frame stamped `stamp`. Counts the hellos it got.
fn refusing_master(pki: &Pki, version: u16, stamp: u16) -> (std::net::SocketAddr, quinn::Endpoint, Arc<AtomicUsize>) {
    let ep = server_endpoint("127.0.0.1:0".parse().unwrap(), &pki.node, &TransportSettings::default()).unwrap();
    let addr = ep.local_addr().unwrap();
    let hellos = Arc::new(AtomicUsize::new(0));
    let (accept, count) = (ep.clone(), hellos.clone());
    tokio::spawn(async move {
        while let Some(incoming) = accept.accept().await {
            let count = count.clone();
            tokio::spawn(async move {
                let Ok(conn) = incoming.await else { return };
                let Ok((mut send, mut recv)) = conn.accept_bi().await else { return };
                let Ok(_hello) = recv.read_to_end(1 << 16).await else { return };
                count.fetch_add(1, Ordering::SeqCst);
                let message =
                    format!("the peer speaks protocol version {PROTOCOL_VERSION}, this master speaks {version}");
                let reply = ErrorReply { code: ErrorCode::VersionMismatch as u16, message, redirect: None };
                let frame = cv_wire::encode(&reply, 0, &[]).unwrap();
                let _ = send.write_all(&stamped(frame.head(), stamp)).await;
                let _ = send.finish();
                let _ = tokio::time::timeout(Duration::from_secs(2), conn.closed()).await;
            });
        }
    });
    (addr, ep, hellos)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_refused_for_its_version_stops_at_once_and_says_why() {
    let pki = pki();
    // A master of the previous version (answers in its own version, which this build reads
    // only because an `Error` frame's layout is frozen), and one beyond the window that
    // answers in this build's version.
    for (version, stamp) in [(PROTOCOL_VERSION - 1, PROTOCOL_VERSION - 1), (PROTOCOL_VERSION + 2, PROTOCOL_VERSION)] {
        let (addr, _ep, hellos) = refusing_master(&pki, version, stamp);
        let dir = scratch();
        let mut s = settings(dir.path());
        s.master = Some(addr.to_string());
        let worker = start(&pki, &s);
        let started = Instant::now();
        let why =
            tokio::time::timeout(Duration::from_secs(5), worker.refused()).await.expect("the worker stops at once");
        assert!(started.elapsed() < Duration::from_secs(5));
        assert!(why.contains("protocol version"), "{why}");
        assert!(why.contains(&addr.to_string()), "names the master: {why}");
        assert!(why.contains(&format!("this master speaks {version}")), "{why}");
        assert!(why.contains(&format!("this build speaks protocol version {PROTOCOL_VERSION}")), "{why}");
        // Stopped for good: no second hello, even after several retry periods.
        tokio::time::sleep(Duration::from_millis(1500)).await;
        assert_eq!(hellos.load(Ordering::SeqCst), 1, "the worker retried");
        assert_eq!(worker.worker_id(), None);
        worker.shutdown().unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_of_another_version_gets_a_refusal_from_a_shard_it_can_read() {
    let pki = pki();
    let dir = scratch();
    let worker = start(&pki, &settings(dir.path()));
    let ep = client_endpoint(&pki.client, &TransportSettings::default()).unwrap();
    for v in [PROTOCOL_VERSION - 1, PROTOCOL_VERSION + 1] {
        let conn = ep.connect(worker.shard_addrs()[0], SERVER_NAME).unwrap().await.unwrap();
        let (mut send, mut recv) = conn.open_bi().await.unwrap();
        let hello = Hello { min_version: v, max_version: v, role: Role::Client, node: format!("client-v{v}") };
        send.write_all(&stamped(cv_wire::encode(&hello, 1, &[]).unwrap().head(), v)).await.unwrap();
        send.finish().unwrap();
        let reply = tokio::time::timeout(Duration::from_secs(2), recv.read_to_end(1 << 16))
            .await
            .expect("refused at once")
            .unwrap();
        assert_eq!(u16::from_le_bytes([reply[4], reply[5]]), v, "stamped with the client's version");
        let frame = Frame::decode(&reply, &Limits::DEFAULT).unwrap();
        assert_eq!(frame.kind(), Kind::Error);
        let e: ErrorReply = frame.decode_body().unwrap();
        assert_eq!(ErrorCode::from_u16(e.code), ErrorCode::VersionMismatch);
        let want = format!("the peer speaks protocol version {v}, this worker speaks {PROTOCOL_VERSION}");
        assert_eq!(e.message, want);
    }
    worker.shutdown().unwrap();
}
