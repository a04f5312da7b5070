//! Helpers shared by the QUIC tests of this crate: a ping service and a server of it,
//! certificates from a test cluster CA, and a one-stream server that answers as a test
//! scripts it.

#![allow(dead_code)] // each test file uses its own subset

use cv_net::identity::CertRole;
use cv_net::rpc::{self, BoxFuture, Peer, Reply, Service};
use cv_net::tls::{ClusterCa, Identity};
use cv_wire::msg::Role;
use cv_wire::{Frame, Limits};
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

/// Answers every `Ping` with its `Pong`.
pub struct PingService;

impl Service for PingService {
    fn handle<'a>(&'a self, _peer: &'a Peer, frame: Frame) -> BoxFuture<'a, Reply> {
        Box::pin(async move { rpc::answer_ping(&frame) })
    }
}

/// A certificate for `usage` issued by `ca`.
pub fn identity(ca: &ClusterCa, usage: CertRole) -> Identity {
    let issued = ca.issue("test", &usage, &[]).unwrap();
    Identity::from_pem(&ca.cert_pem(), &issued.cert_pem, &issued.key_pem).unwrap()
}

/// A `PingService` master of `ca` on a loopback port (spawned on the test's runtime).
/// Returns its address.
pub fn serve_pings(ca: &ClusterCa) -> SocketAddr {
    let ep = rpc::server_endpoint("127.0.0.1:0".parse().unwrap(), &identity(ca, CertRole::Node), &Default::default())
        .unwrap();
    let addr = ep.local_addr().unwrap();
    tokio::spawn(rpc::serve(ep, Arc::new(PingService), Role::Master, "m".into(), Limits::DEFAULT));
    addr
}

/// A server of `ca` that accepts one connection, answers its hello, reads one request frame
/// and hands its reply stream and request id to `reply`. Returns the server's address.
pub fn serve_one<F, Fut>(ca: &ClusterCa, reply: F) -> SocketAddr
where
    F: FnOnce(quinn::SendStream, u64) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send,
{
    let ep = rpc::server_endpoint("127.0.0.1:0".parse().unwrap(), &identity(ca, CertRole::Node), &Default::default())
        .unwrap();
    let addr = ep.local_addr().unwrap();
    tokio::spawn(async move {
        let conn = ep.accept().await.unwrap().await.unwrap();
        rpc::accept_hello(&conn, Role::Master, "m", &Limits::DEFAULT).await.unwrap();
        let (send, mut recv) = conn.accept_bi().await.unwrap();
        let frame = rpc::read_frame(&mut recv, &Limits::DEFAULT).await.unwrap();
        reply(send, frame.header().request_id).await;
        conn.closed().await;
    });
    addr
}
