//! Mutual TLS and the hello exchange over real QUIC on loopback: peers
//! without a certificate from the cluster CA are refused in both directions.

use cv_net::NetErrorKind;
use cv_net::quic::TransportSettings;
mod common;

use common::{PingService, identity};
use cv_net::identity::CertRole;
use cv_net::rpc::{self, Conn};
use cv_net::tls::{ClusterCa, Identity};
use cv_wire::msg::{Hello, Ping, Pong, Role};
use cv_wire::{ErrorCode, Kind, Limits};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// Starts a ping server with `server_id`, returning its address.
fn start_server(server_id: &Identity) -> (SocketAddr, quinn::Endpoint) {
    let ep = rpc::server_endpoint("127.0.0.1:0".parse().unwrap(), server_id, &TransportSettings::default()).unwrap();
    let addr = ep.local_addr().unwrap();
    tokio::spawn(rpc::serve(ep.clone(), Arc::new(PingService), Role::Master, "test-master".into(), Limits::DEFAULT));
    (addr, ep)
}

async fn connect(client_id: &Identity, addr: SocketAddr) -> Result<Conn, cv_net::NetError> {
    let ep = rpc::client_endpoint(client_id, &TransportSettings::default()).unwrap();
    tokio::time::timeout(Duration::from_secs(10), Conn::connect(&ep, addr, Role::Client, "test", Limits::DEFAULT))
        .await
        .expect("connect must not hang")
}

#[tokio::test]
async fn cluster_members_talk() {
    let ca = ClusterCa::generate("t").unwrap();
    let (addr, _ep) = start_server(&identity(&ca, CertRole::Node));
    let conn = connect(&identity(&ca, CertRole::Client), addr).await.unwrap();
    assert_eq!(conn.peer_role(), Role::Master);
    let calls = (0..200u64).map(|n| {
        let conn = conn.clone();
        async move {
            let reply = conn.call(&Ping { nonce: n }, &[&n.to_le_bytes()]).await.unwrap();
            assert_eq!(reply.access::<Pong>().unwrap().nonce.to_native(), n);
            assert_eq!(reply.payload(), n.to_le_bytes());
        }
    });
    futures_join_all(calls).await;
}

async fn futures_join_all<F: std::future::Future<Output = ()> + Send + 'static>(fs: impl Iterator<Item = F>) {
    let handles: Vec<_> = fs.map(tokio::spawn).collect();
    for h in handles {
        h.await.unwrap();
    }
}

#[tokio::test]
async fn client_without_certificate_is_refused() {
    let ca = ClusterCa::generate("t").unwrap();
    let (addr, _ep) = start_server(&identity(&ca, CertRole::Node));
    // A client that trusts the CA but presents no certificate of its own.
    let mut roots = rustls::RootCertStore::empty();
    for c in rustls_pki_types::CertificateDer::pem_slice_iter(ca.cert_pem().as_bytes()) {
        roots.add(c.unwrap()).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    tls.alpn_protocols = vec![cv_wire::ALPN.to_vec()];
    let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(tls).unwrap();
    let mut ep = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
    ep.set_default_client_config(quinn::ClientConfig::new(Arc::new(crypto)));
    let res =
        tokio::time::timeout(Duration::from_secs(10), Conn::connect(&ep, addr, Role::Client, "anon", Limits::DEFAULT))
            .await
            .expect("must not hang");
    let err = res.expect_err("a client without a certificate must be refused");
    // Refused by TLS: permanent, not a connection to retry.
    assert_eq!(err.kind(), NetErrorKind::Tls, "{err}");
    assert!(!err.retryable(), "{err}");
}

use rustls_pki_types::pem::PemObject;

#[tokio::test]
async fn client_from_another_ca_is_refused() {
    let ca = ClusterCa::generate("t").unwrap();
    let other = ClusterCa::generate("intruder").unwrap();
    let (addr, _ep) = start_server(&identity(&ca, CertRole::Node));
    // The intruder trusts the real CA but its own certificate is foreign.
    let foreign = other.issue("intruder", &CertRole::Client, &[]).unwrap();
    let id = Identity::from_pem(&ca.cert_pem(), &foreign.cert_pem, &foreign.key_pem).unwrap();
    let err = connect(&id, addr).await.expect_err("foreign client accepted");
    // Refused by TLS: permanent, not a connection to retry.
    assert_eq!(err.kind(), NetErrorKind::Tls, "{err}");
    assert!(!err.retryable(), "{err}");
}

#[tokio::test]
async fn server_from_another_ca_is_refused() {
    let ca = ClusterCa::generate("t").unwrap();
    let other = ClusterCa::generate("impostor").unwrap();
    let (addr, _ep) = start_server(&identity(&other, CertRole::Node));
    let err = connect(&identity(&ca, CertRole::Client), addr).await.expect_err("impostor server trusted");
    // Refused by TLS: permanent, not a connection to retry.
    assert_eq!(err.kind(), NetErrorKind::Tls, "{err}");
    assert!(!err.retryable(), "{err}");
}

#[tokio::test]
async fn client_certificate_cannot_serve() {
    let ca = ClusterCa::generate("t").unwrap();
    let (addr, _ep) = start_server(&identity(&ca, CertRole::Client));
    let err = connect(&identity(&ca, CertRole::Client), addr).await.expect_err("client cert accepted as server");
    // Refused by TLS: permanent, not a connection to retry.
    assert_eq!(err.kind(), NetErrorKind::Tls, "{err}");
    assert!(!err.retryable(), "{err}");
}

#[tokio::test]
async fn incompatible_version_gets_a_clear_error() {
    let ca = ClusterCa::generate("t").unwrap();
    let (addr, _ep) = start_server(&identity(&ca, CertRole::Node));
    let ep = rpc::client_endpoint(&identity(&ca, CertRole::Client), &TransportSettings::default()).unwrap();
    let conn = ep.connect(addr, cv_net::tls::SERVER_NAME).unwrap().await.unwrap();
    let (mut send, mut recv) = conn.open_bi().await.unwrap();
    let v = cv_wire::PROTOCOL_VERSION;
    let hello = Hello { min_version: v + 1, max_version: v + 3, role: Role::Client, node: "future".into() };
    let frame = cv_wire::encode(&hello, 1, &[]).unwrap();
    rpc::write_frame(&mut send, &frame, &[]).await.unwrap();
    let reply = rpc::read_frame(&mut recv, &Limits::DEFAULT).await.unwrap();
    let err = rpc::check_reply(reply).unwrap_err();
    assert_eq!(err.code(), Some(ErrorCode::VersionMismatch));
    assert!(err.message().contains("speaks"), "{err}");
}

/// A peer that completes the handshake and then says nothing (its QUIC stack keeps the
/// connection alive) is closed once the hello is overdue, instead of holding a slot for ever.
#[tokio::test]
async fn a_connection_that_never_says_hello_is_closed() {
    let ca = ClusterCa::generate("t").unwrap();
    let (addr, _ep) = start_server(&identity(&ca, CertRole::Node));
    let ep = rpc::client_endpoint(&identity(&ca, CertRole::Client), &TransportSettings::default()).unwrap();
    let started = std::time::Instant::now();
    let conn = ep.connect(addr, cv_net::tls::SERVER_NAME).unwrap().await.unwrap();
    let within = cv_net::quic::HELLO_WITHIN + Duration::from_secs(5);
    let why = tokio::time::timeout(within, conn.closed()).await.expect("a silent connection is kept open");
    let took = started.elapsed();
    assert!(took >= cv_net::quic::HELLO_WITHIN, "closed before the hello was due: {took:?}");
    match why {
        quinn::ConnectionError::ApplicationClosed(c) => assert_eq!(&c.reason[..], b"no hello in time"),
        other => panic!("closed for another reason: {other}"),
    }
}

#[tokio::test]
async fn malformed_and_oversized_frames_are_refused_and_server_survives() {
    let ca = ClusterCa::generate("t").unwrap();
    let (addr, _ep) = start_server(&identity(&ca, CertRole::Node));
    let conn = connect(&identity(&ca, CertRole::Client), addr).await.unwrap();

    // A valid frame with one payload bit flipped: checksum.
    let frame = cv_wire::encode(&Ping { nonce: 1 }, 5, &[1, 2, 3]).unwrap();
    let mut bytes = frame.head().to_vec();
    bytes.extend_from_slice(&[1, 2, 2]);
    let err = raw_call(&conn, &bytes).await;
    assert_eq!(err.code(), Some(ErrorCode::Malformed), "{err}");

    // A header claiming a 1 GiB payload: refused from the header alone.
    let mut bytes = frame.head().to_vec();
    bytes[16..20].copy_from_slice(&(1u32 << 30).to_le_bytes());
    let err = raw_call(&conn, &bytes).await;
    assert_eq!(err.code(), Some(ErrorCode::LimitExceeded), "{err}");

    // A well-formed frame of a kind the body does not match.
    let frame = cv_wire::encode(&Pong { nonce: 1 }, 6, &[]).unwrap();
    let err = raw_call(&conn, frame.head()).await;
    assert!(err.code().is_some(), "{err}");
    assert_eq!(Kind::Pong, frame.header().kind);

    // The same connection still serves.
    let reply = conn.call(&Ping { nonce: 77 }, &[]).await.unwrap();
    assert_eq!(reply.access::<Pong>().unwrap().nonce.to_native(), 77);
}

async fn raw_call(conn: &Conn, bytes: &[u8]) -> cv_net::NetError {
    let (mut send, mut recv) = conn.quinn().open_bi().await.unwrap();
    send.write_all(bytes).await.unwrap();
    send.finish().unwrap();
    let reply = rpc::read_frame(&mut recv, &Limits::DEFAULT).await.unwrap();
    rpc::check_reply(reply).expect_err("a bad frame got a success reply")
}

#[test]
fn cert_init_writes_a_usable_directory() {
    let dir = tempfile::tempdir().unwrap();
    ClusterCa::init_dir(dir.path(), "t", &["localhost".into()]).unwrap();
    for f in ["ca.pem", "ca.key", "node.pem", "node.key", "client.pem", "client.key"] {
        assert!(dir.path().join(f).is_file(), "{f}");
    }
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(dir.path().join("node.key")).unwrap().permissions().mode();
    assert_eq!(mode & 0o077, 0, "keys must not be readable by others");
    Identity::load(&cv_net::config::TlsConfig::in_dir(dir.path(), "node")).unwrap();
    Identity::load(&cv_net::config::TlsConfig::in_dir(dir.path(), "client")).unwrap();
    assert!(ClusterCa::init_dir(dir.path(), "t", &[]).is_err(), "must not overwrite a CA");
}

#[tokio::test]
async fn a_client_identity_cannot_claim_a_node_role() {
    let ca = ClusterCa::generate("t").unwrap();
    let (addr, _ep) = start_server(&identity(&ca, CertRole::Node));
    let client_id = identity(&ca, CertRole::Client);
    let ep = rpc::client_endpoint(&client_id, &TransportSettings::default()).unwrap();
    let err = Conn::connect(&ep, addr, Role::Worker, "pretender", Limits::DEFAULT).await.unwrap_err();
    assert_eq!(err.code(), Some(ErrorCode::PermissionDenied), "{err}");
    // The same identity as a client is fine, and a node identity may be a worker.
    Conn::connect(&ep, addr, Role::Client, "honest", Limits::DEFAULT).await.unwrap();
    let node_ep = rpc::client_endpoint(&identity(&ca, CertRole::Node), &TransportSettings::default()).unwrap();
    Conn::connect(&node_ep, addr, Role::Worker, "worker", Limits::DEFAULT).await.unwrap();
}

/// A node told to serve on one address sends from it too: the server sees the bound address.
#[tokio::test]
async fn an_endpoint_bound_to_an_address_sends_from_it() {
    let ca = ClusterCa::generate("t").unwrap();
    let (addr, server) = start_server(&identity(&ca, CertRole::Node));
    let ep = rpc::client_endpoint_at(&identity(&ca, CertRole::Node), &TransportSettings::default(), addr.ip()).unwrap();
    assert_eq!(ep.local_addr().unwrap().ip(), addr.ip());
    let conn = Conn::connect(&ep, addr, Role::Client, "t", Limits::DEFAULT).await.unwrap();
    conn.call(&Ping { nonce: 1 }, &[]).await.unwrap();
    assert!(server.open_connections() >= 1);
    // Unspecified: every interface, as client_endpoint binds.
    let any = rpc::client_endpoint_at(
        &identity(&ca, CertRole::Node),
        &TransportSettings::default(),
        "0.0.0.0".parse().unwrap(),
    )
    .unwrap();
    assert!(any.local_addr().unwrap().ip().is_unspecified());
}
