//! Rough numbers, not a benchmark (`cargo test --release -p cv-worker --test server_perf --
//! --ignored --nocapture`): one shard over QUIC on loopback, client in the same process,
//! blocks on disk (no memory tier, so every read is an O_DIRECT read checked by crc32).
#![allow(
    clippy::disallowed_types,
    clippy::disallowed_methods,
    reason = "the test's peers (client, master, object store) run on tokio; the ban is for shard and store code"
)]

#[path = "server_common.rs"]
mod common;

use std::time::{Duration, Instant};

use common::*;
use cv_net::config::ByteSize;
use cv_wire::block_id;
use rand::{Rng, SeedableRng};

const BLOCK: usize = 4 << 20;
const BLOCKS: u64 = 32;

fn pct(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p) as usize]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
#[ignore = "prints rough numbers; run in release"]
async fn rough_read_numbers_through_one_shard() {
    let pki = pki();
    let dir = scratch();
    let mut s = settings(dir.path());
    s.shards = 1;
    s.block_size = ByteSize::mib(4);
    s.data_dirs[0].capacity = ByteSize::mib(256);
    s.ring_depth = 128;
    let worker = start(&pki, &s);
    let client = connect(&pki.client, worker.shard_addrs()).await;
    let conn = client.shards[0].clone();
    for seq in 0..BLOCKS {
        let id = block_id(seq, 0);
        write(&conn, id, &pattern(id, BLOCK)).await.unwrap();
    }

    // Sequential 1 MiB requests over every block, at queue depth 1 and 8.
    for depth in [1usize, 8] {
        let start = Instant::now();
        let mut set = tokio::task::JoinSet::new();
        let mut total = 0usize;
        for seq in 0..BLOCKS {
            for part in 0..(BLOCK >> 20) as u64 {
                if set.len() >= depth {
                    total += set.join_next().await.unwrap().unwrap();
                }
                let c = conn.clone();
                set.spawn(async move { read(&c, block_id(seq, 0), part << 20, 1 << 20).await.unwrap().1.len() });
            }
        }
        while let Some(n) = set.join_next().await {
            total += n.unwrap();
        }
        let secs = start.elapsed().as_secs_f64();
        println!("sequential 1 MiB reads, QD{depth}: {:.2} GiB/s", total as f64 / secs / f64::from(1 << 30));
    }

    // Random 64 KiB reads, QD1 latency and QD16 throughput.
    let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
    let mut pick = move || (block_id(rng.gen_range(0..BLOCKS), 0), rng.gen_range(0..(BLOCK as u64 >> 16)) << 16);
    let mut lat = Vec::new();
    for _ in 0..3000 {
        let (id, off) = pick();
        let t = Instant::now();
        read(&conn, id, off, 64 << 10).await.unwrap();
        lat.push(t.elapsed());
    }
    lat.sort_unstable();
    println!("random 64 KiB reads, QD1: p50 {:?} p99 {:?}", pct(&lat, 0.5), pct(&lat, 0.99));
    // The transport floor in the same run: a 64 KiB ping echoed by the shard (no disk).
    let pad = vec![0u8; 64 << 10];
    let mut lat = Vec::new();
    for i in 0..3000 {
        let t = Instant::now();
        conn.call(&cv_wire::msg::Ping { nonce: i }, &[&pad]).await.unwrap();
        lat.push(t.elapsed());
    }
    lat.sort_unstable();
    println!("64 KiB ping echo (no disk), QD1: p50 {:?} p99 {:?}", pct(&lat, 0.5), pct(&lat, 0.99));
    let n = 20_000;
    let start = Instant::now();
    let mut set = tokio::task::JoinSet::new();
    let mut lat = Vec::with_capacity(n);
    for _ in 0..n {
        if set.len() >= 16 {
            lat.push(set.join_next().await.unwrap().unwrap());
        }
        let (id, off) = pick();
        let c = conn.clone();
        set.spawn(async move {
            let t = Instant::now();
            read(&c, id, off, 64 << 10).await.unwrap();
            t.elapsed()
        });
    }
    while let Some(d) = set.join_next().await {
        lat.push(d.unwrap());
    }
    let secs = start.elapsed().as_secs_f64();
    lat.sort_unstable();
    println!(
        "random 64 KiB reads, QD16: {:.0} IOPS, p50 {:?} p99 {:?}",
        n as f64 / secs,
        pct(&lat, 0.5),
        pct(&lat, 0.99)
    );
    client.endpoint.close(0u32.into(), b"done");
    worker.shutdown().unwrap();
}
