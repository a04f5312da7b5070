//! Dialing within a deadline (`cv_net::dial`): a server that is slow to answer is dialed
//! again until it does, one that has answered is waited for past the answer window, and one
//! that never answers fails at the deadline with an error naming it.

mod common;

use common::{PingService, identity};
use cv_net::NetErrorKind;
use cv_net::dial::{Dial, Persist};
use cv_net::identity::CertRole;
use cv_net::quic::TransportSettings;
use cv_net::rpc;
use cv_net::tls::ClusterCa;
use cv_wire::Limits;
use cv_wire::msg::Role;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

fn dial<'a>(ep: &'a quinn::Endpoint, addr: SocketAddr, within: Duration, persist: Persist) -> Dial<'a> {
    Dial {
        endpoint: ep,
        addr,
        peer: &"master",
        role: Role::Client,
        node: "test",
        limits: Limits::DEFAULT,
        answer_within: Duration::from_millis(200),
        deadline: Instant::now() + within,
        persist,
    }
}

fn client(ca: &ClusterCa) -> quinn::Endpoint {
    rpc::client_endpoint(&identity(ca, CertRole::Client), &TransportSettings::default()).unwrap()
}

/// A ping server that takes each connection attempt only `hold` after it arrived (as a
/// server too busy to get to it would) and answers its hello after `hello_late` more.
fn slow_server(ca: &ClusterCa, hold: Duration, hello_late: Duration) -> SocketAddr {
    let ep = rpc::server_endpoint("127.0.0.1:0".parse().unwrap(), &identity(ca, CertRole::Node), &Default::default())
        .unwrap();
    let addr = ep.local_addr().unwrap();
    tokio::spawn(async move {
        while let Some(incoming) = ep.accept().await {
            tokio::spawn(async move {
                tokio::time::sleep(hold).await;
                let Ok(conn) = incoming.await else { return };
                tokio::time::sleep(hello_late).await;
                if rpc::accept_hello(&conn, Role::Master, "m", &Limits::DEFAULT).await.is_ok() {
                    conn.closed().await;
                }
            });
        }
    });
    addr
}

#[tokio::test]
async fn a_server_slow_to_answer_is_dialed_again_until_it_does() {
    let ca = ClusterCa::generate("t").unwrap();
    // Attempts wait 200, 400, 600 ms for an answer: the third outlasts the 500 ms hold.
    let addr = slow_server(&ca, Duration::from_millis(500), Duration::ZERO);
    let ep = client(&ca);
    let conn = dial(&ep, addr, Duration::from_secs(10), Persist::UntilDeadline).connect().await.unwrap();
    assert_eq!(conn.peer_role(), Role::Master);
    // One attempt gives up after its window.
    let err = dial(&ep, addr, Duration::from_secs(10), Persist::Once).connect().await.unwrap_err();
    assert_eq!(err.kind(), NetErrorKind::Timeout, "{err}");
    assert!(err.message().contains("1 attempt"), "{err}");
}

#[tokio::test]
async fn a_server_that_answered_is_waited_for_past_the_answer_window() {
    let ca = ClusterCa::generate("t").unwrap();
    // It answers the handshake at once and the hello a second later, five answer windows.
    let addr = slow_server(&ca, Duration::ZERO, Duration::from_secs(1));
    let ep = client(&ca);
    let started = Instant::now();
    dial(&ep, addr, Duration::from_secs(10), Persist::Once).connect().await.unwrap();
    assert!(started.elapsed() >= Duration::from_secs(1));
}

#[tokio::test]
async fn a_silent_address_fails_at_the_deadline_naming_the_peer() {
    let ca = ClusterCa::generate("t").unwrap();
    // A bound socket that never answers: a dead master's port.
    let silent = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = silent.local_addr().unwrap();
    let ep = client(&ca);
    let started = Instant::now();
    let err = dial(&ep, addr, Duration::from_millis(1500), Persist::UntilDeadline).connect().await.unwrap_err();
    let took = started.elapsed();
    assert_eq!(err.kind(), NetErrorKind::Timeout, "{err}");
    assert!(err.retryable());
    let msg = err.to_string();
    assert!(msg.contains(&format!("master at {addr}")), "the error does not name the peer: {msg}");
    assert!(msg.contains("attempts"), "{msg}");
    assert!(took >= Duration::from_millis(1000) && took < Duration::from_secs(3), "gave up after {took:?}");
}

#[tokio::test]
async fn a_refusing_server_is_not_dialed_again() {
    let ca = ClusterCa::generate("t").unwrap();
    let other = ClusterCa::generate("other").unwrap();
    let ep = rpc::server_endpoint("127.0.0.1:0".parse().unwrap(), &identity(&ca, CertRole::Node), &Default::default())
        .unwrap();
    let addr = ep.local_addr().unwrap();
    tokio::spawn(rpc::serve(ep, Arc::new(PingService), Role::Master, "m".into(), Limits::DEFAULT));
    // A certificate of another CA: refused by TLS, which no attempt mends.
    let ep = client(&other);
    let started = Instant::now();
    let err = dial(&ep, addr, Duration::from_secs(10), Persist::UntilDeadline).connect().await.unwrap_err();
    assert_eq!(err.kind(), NetErrorKind::Tls, "{err}");
    assert!(started.elapsed() < Duration::from_secs(5), "a TLS refusal was retried");
}
