//! The quinn server's peer registry (`cv_net::peers`, what the master serves through): a
//! client certificate holds at most its cap of connections while node certificates are not
//! counted, and a revocation refuses new hellos and closes the live connections it names.

mod common;

use common::PingService;
use cv_net::identity::{CertRole, PeerCert};
use cv_net::peers::Peers;
use cv_net::revoked::Revoked;
use cv_net::rpc::{self, Conn};
use cv_net::tls::{ClusterCa, Identity};
use cv_wire::msg::{Ping, Pong, RevokedCert, Role};
use cv_wire::{ErrorCode, Limits};
use std::sync::Arc;
use std::time::Duration;

fn issued(ca: &ClusterCa, name: &str, role: CertRole) -> (Identity, PeerCert) {
    let i = ca.issue(name, &role, &[]).unwrap();
    (Identity::from_pem(&ca.cert_pem(), &i.cert_pem, &i.key_pem).unwrap(), PeerCert::from_pem(&i.cert_pem).unwrap())
}

async fn ping(conn: &Conn) -> Result<(), cv_net::NetError> {
    conn.call(&Ping { nonce: 7 }, &[]).await?.access::<Pong>().map(|_| ()).map_err(Into::into)
}

#[tokio::test]
async fn connections_per_identity_are_capped_and_revoked_ones_are_cut_off() {
    let ca = ClusterCa::generate("t").unwrap();
    let (server, _) = issued(&ca, "server", CertRole::Node);
    let ep = rpc::server_endpoint("127.0.0.1:0".parse().unwrap(), &server, &Default::default()).unwrap();
    let addr = ep.local_addr().unwrap();
    let peers = Arc::new(Peers::new(2));
    let stats = Arc::default();
    let serving = (Role::Master, "m".to_string());
    tokio::spawn(rpc::serve_admitting(ep, Arc::new(PingService), serving, Limits::DEFAULT, (stats, peers.clone()), 64));

    let (alice, alice_cert) = issued(&ca, "alice", CertRole::Client);
    let (bob, _) = issued(&ca, "bob", CertRole::Client);
    let (node, _) = issued(&ca, "w1", CertRole::Worker("w1".into()));
    let dial = |id: &Identity, role| {
        let ep = rpc::client_endpoint(id, &Default::default()).unwrap();
        async move { Conn::connect(&ep, addr, role, "w1", Limits::DEFAULT).await }
    };
    let a1 = dial(&alice, Role::Client).await.unwrap();
    let a2 = dial(&alice, Role::Client).await.unwrap();
    let e = dial(&alice, Role::Client).await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::LimitExceeded), "{e}");
    assert!(e.to_string().contains("alice") && e.to_string().contains("limit"), "{e}");
    // Another identity, and nodes, are not held back by alice's connections.
    let b = dial(&bob, Role::Client).await.unwrap();
    let mut nodes = Vec::new();
    for _ in 0..3 {
        nodes.push(dial(&node, Role::Worker).await.unwrap());
    }
    // One of hers closes: she may connect again.
    a2.quinn().close(0u32.into(), b"done");
    let a3 = loop {
        match dial(&alice, Role::Client).await {
            Ok(c) => break c,
            Err(e) if e.code() == Some(ErrorCode::LimitExceeded) => tokio::time::sleep(Duration::from_millis(20)).await,
            Err(e) => panic!("{e}"),
        }
    };

    // Revoked by serial: her live connections close, saying why, and a new hello is refused.
    let list = Revoked::new(1, &[RevokedCert { serial: alice_cert.serial.clone(), ..Default::default() }]);
    assert_eq!(peers.update(list), 2);
    for c in [&a1, &a3] {
        let why = tokio::time::timeout(Duration::from_secs(5), c.quinn().closed()).await.unwrap();
        assert!(why.to_string().contains("certificate revoked"), "{why}");
    }
    let e = dial(&alice, Role::Client).await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::PermissionDenied), "{e}");
    assert!(e.to_string().contains("revoked"), "{e}");
    ping(&b).await.unwrap();
    for n in &nodes {
        ping(n).await.unwrap();
    }
    // The same generation again changes nothing; a list without her lets her back.
    assert_eq!(peers.update(Revoked::new(1, &[])), 0);
    peers.update(Revoked::new(2, &[]));
    ping(&dial(&alice, Role::Client).await.unwrap()).await.unwrap();
}
