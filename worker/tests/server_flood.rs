//! A flood of handshakes from peers without a certificate of the cluster, on loopback, while a
//! client keeps reading: every read succeeds, the shard answers new peers with QUIC Retry once
//! handshakes pile up, and the reads' p50/p99 during the flood are printed beside before it
//! (`cargo test -p cv-worker --test server_flood -- --nocapture`).
#![allow(
    clippy::disallowed_types,
    clippy::disallowed_methods,
    reason = "the test's peers (client, flood) run on tokio; the ban is for shard and store code"
)]

#[path = "server_common.rs"]
mod common;

use common::*;
use cv_net::identity::CertRole;
use cv_net::quic::TransportSettings;
use cv_net::tls::{ClusterCa, Identity};
use cv_wire::msg::Role;
use cv_wire::{Limits, block_id};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Handshakes the flood attempts, and how many at once: bounded in count and time.
const FLOOD: usize = 1500;
const AT_ONCE: usize = 200;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handshake_flood_without_certificates_leaves_reads_served() {
    let pki = pki();
    let dir = scratch();
    // A low threshold, so that the flood a 2-core machine can drive surely passes it.
    let worker = start(&pki, &cv_worker::WorkerSettings { retry_above: 16, ..settings(dir.path()) });
    let shard = worker.shard_addrs()[0];
    let client = connect(&pki.client, &[shard]).await;
    let id = block_id(1, 0);
    let data = pattern(id, 64 << 10);
    write(&client.shards[0], id, &data).await.unwrap();

    let before = reads(&client, id, &data, 300, None).await;

    // Peers whose certificate another CA issued: the shard does the handshake's work, then
    // refuses them. Each attempt gives up after 2 s.
    let evil = ClusterCa::generate("not this cluster").unwrap();
    let issued = evil.issue("flood", &CertRole::Client, &[]).unwrap();
    let stranger = Identity::from_pem(&pki.ca.cert_pem(), &issued.cert_pem, &issued.key_pem).unwrap();
    let flooding = Arc::new(AtomicBool::new(true));
    let (done, refused) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let started = Instant::now();
    let mut flood = tokio::task::JoinSet::new();
    for lane in 0..AT_ONCE {
        let (stranger, done, refused) = (stranger.clone(), done.clone(), refused.clone());
        flood.spawn(async move {
            let ep = cv_net::rpc::client_endpoint(&stranger, &TransportSettings::default()).unwrap();
            for _ in (lane..FLOOD).step_by(AT_ONCE) {
                let dial = cv_net::rpc::Conn::connect(&ep, shard, Role::Client, "flood", Limits::DEFAULT);
                match tokio::time::timeout(Duration::from_secs(2), dial).await {
                    Ok(Ok(_)) => panic!("a peer without a certificate of the cluster was served"),
                    Ok(Err(_)) => refused.fetch_add(1, Ordering::Relaxed),
                    Err(_) => 0,
                };
                done.fetch_add(1, Ordering::Relaxed);
            }
            ep.close(0u32.into(), b"done");
        });
    }
    let during = {
        let reader = reads(&client, id, &data, usize::MAX, Some(flooding.clone()));
        let watch = async { while flood.join_next().await.is_some() {} };
        tokio::pin!(reader);
        tokio::select! {
            _ = watch => {}
            _ = &mut reader => unreachable!("reads stop only when told"),
        }
        flooding.store(false, Ordering::Relaxed);
        reader.await
    };
    let flood_took = started.elapsed();

    let scrape = (worker.metrics())().await.encode().unwrap();
    let retries = counter(&scrape, "cv_quic_retries_total");
    let (b, d) = (summary(&before), summary(&during));
    println!(
        "handshake flood: {} attempts ({} refused by the shard) in {flood_took:?}, {retries} QUIC Retry sent",
        done.load(Ordering::Relaxed),
        refused.load(Ordering::Relaxed)
    );
    println!("reads before: n={} p50={:?} p99={:?}", before.len(), b.0, b.1);
    println!("reads during: n={} p50={:?} p99={:?}", during.len(), d.0, d.1);
    assert!(!during.is_empty(), "no read completed during the flood");
    assert!(retries > 0, "the shard never asked a new peer to prove its address:\n{scrape}");
    // The client, connected before, keeps its connection and is served after the flood.
    assert_eq!(read(&client.shards[0], id, 0, data.len() as u64).await.unwrap().1, data);
    client.endpoint.close(0u32.into(), b"done");
    worker.shutdown().unwrap();
}

/// Reads the block `n` times (or while `go` holds), each checked byte for byte; their latencies.
async fn reads(client: &Client, id: u64, data: &[u8], n: usize, go: Option<Arc<AtomicBool>>) -> Vec<Duration> {
    let mut took = Vec::new();
    while took.len() < n && go.as_ref().is_none_or(|g| g.load(Ordering::Relaxed)) {
        let t = Instant::now();
        let (_, got) = read(&client.shards[0], id, 0, data.len() as u64).await.expect("a read failed");
        took.push(t.elapsed());
        assert_eq!(got, data);
    }
    took
}

fn summary(v: &[Duration]) -> (Duration, Duration) {
    let mut s = v.to_vec();
    s.sort();
    let at = |q: f64| s[((s.len() as f64 * q) as usize).min(s.len() - 1)];
    (at(0.5), at(0.99))
}

fn counter(scrape: &str, name: &str) -> u64 {
    scrape
        .lines()
        .filter(|l| l.starts_with(name))
        .filter_map(|l| l.split_whitespace().last()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}
