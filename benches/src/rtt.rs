//! QUIC loopback round trip of a 64-byte request: bare quinn echo on a new
//! stream per request (the baseline) against a cv `Ping` call through
//! cv-net (framing, crc, validation, hello-established connection). Both
//! use the same mutual-TLS identities and transport settings. This is the
//! floor every later latency is compared to.

use crate::report::{Latency, histogram};
use cv_net::identity::CertRole;
use cv_net::quic::TransportSettings;
use cv_net::rpc::{self, BoxFuture, Conn, Peer, Reply, Service};
use cv_net::tls::{ClusterCa, Identity, SERVER_NAME};
use cv_wire::msg::{Ping, Pong, Role};
use cv_wire::{Frame, Limits};
use std::sync::Arc;
use std::time::Instant;

struct PingService;

impl Service for PingService {
    fn handle<'a>(&'a self, _peer: &'a Peer, frame: Frame) -> BoxFuture<'a, Reply> {
        Box::pin(async move { rpc::answer_ping(&frame) })
    }
}

fn identities() -> (Identity, Identity) {
    let ca = ClusterCa::generate("bench").expect("ca");
    let node = ca.issue("bench-node", &CertRole::Node, &[]).expect("node");
    let client = ca.issue("bench-client", &CertRole::Client, &[]).expect("client");
    (
        Identity::from_pem(&ca.cert_pem(), &node.cert_pem, &node.key_pem).expect("node id"),
        Identity::from_pem(&ca.cert_pem(), &client.cert_pem, &client.key_pem).expect("client id"),
    )
}

/// Runs `n` sequential round trips of each kind after `warmup` unmeasured
/// ones. The servers run on their own one-thread runtime, the client on the
/// calling thread's runtime.
pub fn run(n: u32, warmup: u32) -> Vec<Latency> {
    let (node, client) = identities();
    let settings = TransportSettings::default();
    let server_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .thread_name("bench-server")
        .build()
        .expect("server runtime");
    let (cv_addr, echo_addr) = server_rt.block_on(async {
        let cv = rpc::server_endpoint("127.0.0.1:0".parse().expect("addr"), &node, &settings).expect("cv endpoint");
        let echo = rpc::server_endpoint("127.0.0.1:0".parse().expect("addr"), &node, &settings).expect("echo endpoint");
        let addrs = (cv.local_addr().expect("addr"), echo.local_addr().expect("addr"));
        tokio::spawn(rpc::serve(cv, Arc::new(PingService), Role::Master, "bench".into(), Limits::DEFAULT));
        tokio::spawn(bare_echo(echo));
        addrs
    });

    let client_rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("client runtime");
    let rows = client_rt.block_on(async {
        let ep = rpc::client_endpoint(&client, &settings).expect("client endpoint");
        let request = [7u8; 64];

        let bare = ep.connect(echo_addr, SERVER_NAME).expect("connect").await.expect("handshake");
        let mut h = histogram();
        for i in 0..(warmup + n) {
            let t = Instant::now();
            let (mut send, mut recv) = bare.open_bi().await.expect("open");
            send.write_all(&request).await.expect("write");
            send.finish().expect("finish");
            let reply = recv.read_to_end(1024).await.expect("read");
            assert_eq!(reply.len(), 64);
            if i >= warmup {
                h.record(t.elapsed().as_nanos() as u64).expect("record");
            }
        }
        let base = Latency::from_hist("quinn echo, 64 B, stream/request", &h);

        // 32 B header + 8 B body + 24 B payload = 64 B each way, as the baseline.
        let pad = [7u8; 24];
        let conn = Conn::connect(&ep, cv_addr, Role::Client, "bench", Limits::DEFAULT).await.expect("cv connect");
        let mut h = histogram();
        for i in 0..(warmup + n) {
            let t = Instant::now();
            let reply = conn.call(&Ping { nonce: u64::from(i) }, &[&pad]).await.expect("ping");
            assert!(reply.access::<Pong>().is_ok());
            if i >= warmup {
                h.record(t.elapsed().as_nanos() as u64).expect("record");
            }
        }
        let cv = Latency::from_hist("cv Ping frame (64 B on the wire)", &h);
        ep.close(0u32.into(), b"done");
        vec![base, cv]
    });
    server_rt.shutdown_background();
    rows
}

async fn bare_echo(ep: quinn::Endpoint) {
    while let Some(incoming) = ep.accept().await {
        tokio::spawn(async move {
            let Ok(conn) = incoming.await else { return };
            while let Ok((mut send, mut recv)) = conn.accept_bi().await {
                tokio::spawn(async move {
                    if let Ok(data) = recv.read_to_end(1024).await {
                        let _ = send.write_all(&data).await;
                        let _ = send.finish();
                    }
                });
            }
        });
    }
}
