//! What a shard does with bad input: malformed, oversized, truncated or mis-checksummed
//! frames get an error reply and the shard keeps serving; peers without a cluster identity
//! and peers speaking another protocol version are refused.
#![allow(
    clippy::disallowed_types,
    clippy::disallowed_methods,
    reason = "the test's peers (client, master, object store) run on tokio; the ban is for shard and store code"
)]

#[path = "server_common.rs"]
mod common;

use std::sync::Arc;

use common::*;
use cv_net::capability::Access;
use cv_net::identity::CertRole;
use cv_net::rpc::{Conn, check_reply, read_frame};
use cv_net::tls::{ClusterCa, Identity, SERVER_NAME};
use cv_wire::msg::{Hello, Ping, Pong, Role, Stat, WriteBlock};
use cv_wire::{ErrorCode, HEADER_LEN, Limits, block_id};

/// Sends raw bytes as one request stream and returns the error code of the reply.
async fn raw_call(conn: &Conn, bytes: &[u8]) -> ErrorCode {
    let (mut send, mut recv) = conn.quinn().open_bi().await.unwrap();
    send.write_all(bytes).await.unwrap();
    send.finish().unwrap();
    let frame = read_frame(&mut recv, &Limits::DEFAULT).await.expect("an error reply frame");
    check_reply(frame).expect_err("an error reply").code().expect("a remote code")
}

async fn still_serves(conn: &Conn) {
    let pong: Pong = conn.call(&Ping { nonce: 5 }, &[]).await.unwrap().decode_body().unwrap();
    assert_eq!(pong.nonce, 5);
}

#[tokio::test(flavor = "current_thread")]
async fn malformed_frames_get_errors_and_the_shard_survives() {
    let pki = pki();
    let dir = scratch();
    let worker = start(&pki, &settings(dir.path()));
    let client = connect(&pki.client, worker.shard_addrs()).await;
    let s0 = &client.shards[0];
    let ping = cv_wire::encode(&Ping { nonce: 1 }, 1, &[]).unwrap().head().to_vec();

    // Not a frame at all.
    assert_eq!(raw_call(s0, &[0xAB; 64]).await, ErrorCode::Malformed);
    still_serves(s0).await;

    // A valid frame with one body byte flipped: the checksum catches it.
    let mut flipped = ping.clone();
    flipped[HEADER_LEN] ^= 1;
    assert_eq!(raw_call(s0, &flipped).await, ErrorCode::Malformed);

    // A header declaring a 1 GiB payload is refused before anything is allocated.
    let mut huge = ping.clone();
    huge[16..20].copy_from_slice(&(1u32 << 30).to_le_bytes());
    assert_eq!(raw_call(s0, &huge).await, ErrorCode::LimitExceeded);

    // A frame cut short by the end of its stream.
    assert_eq!(raw_call(s0, &ping[..HEADER_LEN + 2]).await, ErrorCode::Malformed);
    assert_eq!(raw_call(s0, &ping[..10]).await, ErrorCode::Malformed);

    // An unknown kind number, and a frame of another protocol version.
    let mut unknown = ping.clone();
    unknown[6..8].copy_from_slice(&999u16.to_le_bytes());
    assert_eq!(raw_call(s0, &unknown).await, ErrorCode::Malformed);
    let mut next = ping.clone();
    next[4..6].copy_from_slice(&(cv_wire::PROTOCOL_VERSION + 1).to_le_bytes());
    assert_eq!(raw_call(s0, &next).await, ErrorCode::VersionMismatch);

    // A master request is not a shard's business.
    assert_eq!(code(s0.call(&Stat { path: "/x".into() }, &[]).await), ErrorCode::Unsupported);

    // A write whose payload was damaged in flight is refused and nothing is stored.
    let id = block_id(1, 0);
    let data = pattern(id, 200_000);
    let frame =
        cv_wire::encode(&WriteBlock { block_id: id, pinned: false, cap: cap(Access::Write, id) }, 9, &data).unwrap();
    let mut bytes = frame.head().to_vec();
    bytes.extend_from_slice(&data);
    let last = bytes.len() - 1;
    bytes[last] ^= 0x80;
    assert_eq!(raw_call(s0, &bytes).await, ErrorCode::Malformed);
    assert_eq!(code(read(s0, id, 0, 1).await), ErrorCode::NotFound);
    // The same write cut short is refused too.
    bytes[last] ^= 0x80;
    assert_eq!(raw_call(s0, &bytes[..bytes.len() - 1000]).await, ErrorCode::Malformed);
    assert_eq!(code(read(s0, id, 0, 1).await), ErrorCode::NotFound);
    // And intact, it is stored.
    assert_eq!(write(s0, id, &data).await.unwrap().len, 200_000);

    // The other shard was never disturbed, and this one still serves.
    still_serves(&client.shards[1]).await;
    still_serves(s0).await;
    client.endpoint.close(0u32.into(), b"done");
    worker.shutdown().unwrap();
}

#[tokio::test(flavor = "current_thread")]
async fn unfinished_requests_cannot_hold_more_than_their_connections_budget() {
    let pki = pki();
    let dir = scratch();
    let worker = start(&pki, &settings(dir.path()));
    let client = connect(&pki.client, worker.shard_addrs()).await;
    let s0 = &client.shards[0];
    // A ping announcing the largest payload the limits allow; only its header and body are sent.
    let mut big = cv_wire::encode(&Ping { nonce: 3 }, 3, &[]).unwrap().head().to_vec();
    big[16..20].copy_from_slice(&Limits::DEFAULT.max_payload.to_le_bytes());

    // One such request, left unfinished, holds most of the connection's budget...
    let (mut stalled, _stalled_recv) = s0.quinn().open_bi().await.unwrap();
    stalled.write_all(&big).await.unwrap();
    still_serves(s0).await;
    // ...so a second one is refused at once, before anything is allocated, and may be retried.
    let busy = raw_call(s0, &big).await;
    assert_eq!(busy, ErrorCode::Unavailable);
    assert!(busy.retryable());
    // Small requests still fit, and another connection has a budget of its own: its big
    // request is read (and then found cut short: the payload never came).
    still_serves(s0).await;
    let other = connect(&pki.client, worker.shard_addrs()).await;
    assert_eq!(raw_call(&other.shards[0], &big).await, ErrorCode::Malformed);

    // The stalled request goes away: its bytes come back to the connection.
    stalled.reset(0u32.into()).unwrap();
    let start = std::time::Instant::now();
    loop {
        match raw_call(s0, &big).await {
            ErrorCode::Malformed => break,
            ErrorCode::Unavailable if start.elapsed() < std::time::Duration::from_secs(10) => {
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
            other => panic!("expected the budget back, got {other:?}"),
        }
    }
    other.endpoint.close(0u32.into(), b"done");
    client.endpoint.close(0u32.into(), b"done");
    worker.shutdown().unwrap();
}

#[tokio::test(flavor = "current_thread")]
async fn peers_without_a_cluster_identity_or_version_are_refused() {
    let pki = pki();
    let dir = scratch();
    let worker = start(&pki, &settings(dir.path()));
    let addr = worker.shard_addrs()[0];

    // No client certificate at all.
    let roots = {
        let mut r = rustls::RootCertStore::empty();
        use rustls::pki_types::pem::PemObject;
        r.add(rustls::pki_types::CertificateDer::from_pem_slice(pki.ca.cert_pem().as_bytes()).unwrap()).unwrap();
        Arc::new(r)
    };
    let mut tls = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    tls.alpn_protocols = vec![cv_wire::ALPN.to_vec()];
    let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(tls).unwrap();
    let mut anon = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
    anon.set_default_client_config(quinn::ClientConfig::new(Arc::new(crypto)));
    let r = Conn::connect(&anon, addr, Role::Client, "anon", Limits::DEFAULT).await;
    assert!(r.is_err(), "a peer without a certificate must not be served");

    // A certificate from another CA, presented to a server it trusts.
    let other = ClusterCa::generate("other").unwrap();
    let issued = other.issue("intruder", &CertRole::Client, &[]).unwrap();
    let intruder = Identity::from_pem(&pki.ca.cert_pem(), &issued.cert_pem, &issued.key_pem).unwrap();
    let ep = cv_net::rpc::client_endpoint(&intruder, &Default::default()).unwrap();
    let r = Conn::connect(&ep, addr, Role::Client, "intruder", Limits::DEFAULT).await;
    assert!(r.is_err(), "a certificate from a foreign CA must not be served");

    // A member of the cluster speaking only a future protocol version.
    let good = connect(&pki.client, &[]).await;
    let conn = good.endpoint.connect(addr, SERVER_NAME).unwrap().await.unwrap();
    let (mut send, mut recv) = conn.open_bi().await.unwrap();
    let v = cv_wire::PROTOCOL_VERSION;
    let hello = Hello { min_version: v + 1, max_version: v + 3, role: Role::Client, node: "future".into() };
    send.write_all(cv_wire::encode(&hello, 1, &[]).unwrap().head()).await.unwrap();
    send.finish().unwrap();
    let e = check_reply(read_frame(&mut recv, &Limits::DEFAULT).await.unwrap()).unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::VersionMismatch));

    // A member of the cluster that never says hello is closed once it is overdue.
    let silent = good.endpoint.connect(addr, SERVER_NAME).unwrap().await.unwrap();
    let started = std::time::Instant::now();
    let within = cv_net::quic::HELLO_WITHIN + std::time::Duration::from_secs(5);
    let why = tokio::time::timeout(within, silent.closed()).await.expect("a silent connection is kept open");
    assert!(started.elapsed() >= cv_net::quic::HELLO_WITHIN - std::time::Duration::from_millis(100));
    match why {
        quinn::ConnectionError::ApplicationClosed(c) => assert_eq!(&c.reason[..], b"no hello in time"),
        other => panic!("closed for another reason: {other}"),
    }

    // Members of the cluster are still served.
    let ok = connect(&pki.client, worker.shard_addrs()).await;
    still_serves(&ok.shards[0]).await;
    for ep in [anon, ep, good.endpoint, ok.endpoint] {
        ep.close(0u32.into(), b"done");
    }
    worker.shutdown().unwrap();
}

/// Per identity: a client certificate holds at most `max_connections_per_identity` connections
/// to a shard (the next is refused `LimitExceeded`), others are not held back, node
/// certificates are not counted; a revocation handed to the worker closes the revoked one's
/// live connections and refuses its next hello.
#[tokio::test(flavor = "current_thread")]
async fn connections_per_identity_are_capped_and_a_revocation_cuts_them_off() {
    let pki = pki();
    let dir = scratch();
    let worker = start(&pki, &cv_worker::WorkerSettings { max_connections_per_identity: 2, ..settings(dir.path()) });
    let shard = worker.shard_addrs()[0];
    let issue = |name: &str| {
        let issued = pki.ca.issue(name, &CertRole::Client, &[]).unwrap();
        let cert = cv_net::identity::PeerCert::from_pem(&issued.cert_pem).unwrap();
        (Identity::from_pem(&pki.ca.cert_pem(), &issued.cert_pem, &issued.key_pem).unwrap(), cert)
    };
    let (alice, alice_cert) = issue("alice");
    let (other, _) = issue("other");
    let dial = |id: &Identity, role: Role| {
        let ep = cv_net::rpc::client_endpoint(id, &Default::default()).unwrap();
        let node = if role == Role::Master { MASTER } else { "c" };
        async move { Conn::connect(&ep, shard, role, node, Limits::DEFAULT).await }
    };
    let a1 = dial(&alice, Role::Client).await.unwrap();
    let _a2 = dial(&alice, Role::Client).await.unwrap();
    let e = dial(&alice, Role::Client).await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::LimitExceeded), "{e}");
    let o = dial(&other, Role::Client).await.unwrap();
    for _ in 0..3 {
        dial(&pki.master, Role::Master).await.unwrap();
    }

    let entry = cv_wire::msg::RevokedCert { serial: alice_cert.serial, ..Default::default() };
    worker.revoke(cv_net::revoked::Revoked::new(1, &[entry]));
    let why = tokio::time::timeout(std::time::Duration::from_secs(5), a1.quinn().closed()).await.unwrap();
    assert!(why.to_string().contains("certificate revoked"), "{why}");
    let e = dial(&alice, Role::Client).await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::PermissionDenied), "{e}");
    assert!(e.to_string().contains("revoked"), "{e}");
    let pong = o.call(&Ping { nonce: 9 }, &[]).await.unwrap();
    assert_eq!(pong.access::<Pong>().unwrap().nonce, 9);
    worker.shutdown().unwrap();
}
