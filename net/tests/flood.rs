//! The quinn server path the master serves on (`rpc::serve_counted`), flooded on loopback with
//! handshakes from peers whose certificate another CA issued, while a client of the cluster
//! keeps calling: every call succeeds, new peers are sent a QUIC Retry once handshakes pile up,
//! and none of the strangers is served (`cargo test -p cv-net --test flood -- --nocapture`
//! prints the calls' p50/p99 before and during).

mod common;

use common::{PingService, identity};
use cv_net::conn_stats::ConnStats;
use cv_net::identity::CertRole;
use cv_net::rpc::{self, Conn};
use cv_net::tls::{ClusterCa, Identity};
use cv_wire::Limits;
use cv_wire::msg::{Ping, Pong, Role};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handshake_flood_gets_retries_and_the_cluster_client_is_served() {
    let ca = ClusterCa::generate("test").unwrap();
    let ep = rpc::server_endpoint("127.0.0.1:0".parse().unwrap(), &identity(&ca, CertRole::Node), &Default::default())
        .unwrap();
    let addr = ep.local_addr().unwrap();
    let stats = Arc::new(ConnStats::default());
    // A low threshold, so that what a 2-core machine can drive surely passes it.
    let served = rpc::serve_admitting(
        ep,
        Arc::new(PingService),
        (Role::Master, "m".into()),
        Limits::DEFAULT,
        (stats.clone(), Arc::default()),
        8,
    );
    tokio::spawn(served);

    let client_ep = rpc::client_endpoint(&identity(&ca, CertRole::Client), &Default::default()).unwrap();
    let client = Conn::connect(&client_ep, addr, Role::Client, "c", Limits::DEFAULT).await.unwrap();
    let before = pings(&client, 300, None).await;

    let evil = ClusterCa::generate("not this cluster").unwrap();
    let issued = evil.issue("flood", &CertRole::Client, &[]).unwrap();
    let stranger = Identity::from_pem(&ca.cert_pem(), &issued.cert_pem, &issued.key_pem).unwrap();
    let flooding = Arc::new(AtomicBool::new(true));
    let mut flood = tokio::task::JoinSet::new();
    for lane in 0..100usize {
        let stranger = stranger.clone();
        flood.spawn(async move {
            let ep = rpc::client_endpoint(&stranger, &Default::default()).unwrap();
            for _ in (lane..1000).step_by(100) {
                let dial = Conn::connect(&ep, addr, Role::Client, "flood", Limits::DEFAULT);
                if let Ok(Ok(_)) = tokio::time::timeout(Duration::from_secs(2), dial).await {
                    panic!("a peer without a certificate of the cluster was served");
                }
            }
            ep.close(0u32.into(), b"done");
        });
    }
    let reader = pings(&client, usize::MAX, Some(flooding.clone()));
    tokio::pin!(reader);
    tokio::select! {
        _ = async { while flood.join_next().await.is_some() {} } => {}
        _ = &mut reader => unreachable!("pings stop only when told"),
    }
    flooding.store(false, Ordering::Relaxed);
    let during = reader.await;

    let retries = stats.totals().retries_total;
    let (b, d) = (summary(&before), summary(&during));
    println!("master path flood: 1000 handshakes, {retries} QUIC Retry sent");
    println!("calls before: n={} p50={:?} p99={:?}", before.len(), b.0, b.1);
    println!("calls during: n={} p50={:?} p99={:?}", during.len(), d.0, d.1);
    assert!(!during.is_empty(), "no call completed during the flood");
    assert!(retries > 0, "no new peer was asked to prove its address");
    pings(&client, 10, None).await;
    client_ep.close(0u32.into(), b"done");
}

/// `n` pings (or while `go` holds), each answered; their latencies.
async fn pings(conn: &Conn, n: usize, go: Option<Arc<AtomicBool>>) -> Vec<Duration> {
    let mut took = Vec::new();
    while took.len() < n && go.as_ref().is_none_or(|g| g.load(Ordering::Relaxed)) {
        let t = Instant::now();
        let pong: Pong = conn.call(&Ping { nonce: 9 }, &[]).await.expect("a call failed").decode_body().unwrap();
        took.push(t.elapsed());
        assert_eq!(pong.nonce, 9);
    }
    took
}

fn summary(v: &[Duration]) -> (Duration, Duration) {
    let mut s = v.to_vec();
    s.sort();
    let at = |q: f64| s[((s.len() as f64 * q) as usize).min(s.len() - 1)];
    (at(0.5), at(0.99))
}
