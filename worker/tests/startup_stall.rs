//! Two 2-shard workers started and stopped at the same moment in one process, many rounds:
//! every round must come up and go down. (On glommio, shards sometimes stayed asleep in
//! io_uring while opening or closing their stores; see worker/ARCHITECTURE.md, "Shard runtime".)

#[path = "server_common.rs"]
mod common;

use common::*;
use std::time::{Duration, Instant};

#[test]
fn concurrent_worker_starts_and_stops_never_stall() {
    let pki = pki();
    let rounds: usize = std::env::var("CV_STALL_ROUNDS").ok().and_then(|s| s.parse().ok()).unwrap_or(10);
    for round in 0..rounds {
        let dirs = [scratch(), scratch()];
        let started = Instant::now();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::scope(|s| {
            for d in &dirs {
                let (pki, tx) = (&pki, tx.clone());
                s.spawn(move || {
                    let w = start(pki, &settings(d.path()));
                    tx.send(()).unwrap();
                    w.shutdown().unwrap();
                    tx.send(()).unwrap();
                });
            }
            for _ in 0..4 {
                let left = Duration::from_secs(30).saturating_sub(started.elapsed());
                if rx.recv_timeout(left).is_err() {
                    eprintln!("round {round}: a worker did not start and stop within 30 s");
                    std::process::exit(1);
                }
            }
        });
        eprintln!("round {round}: {:?}", started.elapsed());
    }
}
