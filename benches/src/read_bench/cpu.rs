//! CPU time per request of a series, server side and client side, from this process's
//! threads (`/proc/self/task/*/schedstat`: nanoseconds on a CPU).
//!
//! On shared cores the two sides compete for the same CPUs, so throughput moves with the
//! neighbours; CPU per request moves much less, and it says which side costs what. The
//! server side is the worker's shard threads (`cv-shard-*`) or the bare QUIC servers
//! (`bench-quic-*`), whichever ran; the client side is every other thread of the process
//! (the client's runtime, and the idle master and control threads). fio runs in its own
//! process and is not counted.

use serde::Serialize;
use std::collections::HashMap;

/// CPU per request, in microseconds.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct CpuPerOp {
    /// Server threads (none when the worker is another process: `--master`).
    pub server_us: Option<f64>,
    /// Every other thread of this process.
    pub client_us: f64,
}

/// CPU time of each thread at one moment, by thread id.
#[derive(Debug, Default)]
pub struct Snapshot {
    threads: HashMap<u32, (bool, u64)>,
}

fn is_server(comm: &str) -> bool {
    comm.starts_with("cv-shard") || comm.starts_with("bench-quic")
}

impl Snapshot {
    /// Reads every thread of this process; threads that cannot be read are skipped.
    pub fn take() -> Snapshot {
        let mut threads = HashMap::new();
        let Ok(dir) = std::fs::read_dir("/proc/self/task") else { return Snapshot { threads } };
        for e in dir.flatten() {
            let Some(tid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else { continue };
            let comm = std::fs::read_to_string(e.path().join("comm")).unwrap_or_default();
            let on_cpu = std::fs::read_to_string(e.path().join("schedstat"))
                .ok()
                .and_then(|s| s.split_whitespace().next().and_then(|n| n.parse::<u64>().ok()));
            if let Some(ns) = on_cpu {
                threads.insert(tid, (is_server(comm.trim()), ns));
            }
        }
        Snapshot { threads }
    }

    /// CPU used since this snapshot, divided by `ops`; `None` if nothing was measured.
    pub fn per_op(&self, ops: u64) -> Option<CpuPerOp> {
        self.per_op_until(&Snapshot::take(), ops)
    }

    /// CPU used from this snapshot to `now` (taken while the threads to count were alive),
    /// divided by `ops`; `None` if nothing was measured.
    pub fn per_op_until(&self, now: &Snapshot, ops: u64) -> Option<CpuPerOp> {
        if ops == 0 || now.threads.is_empty() {
            return None;
        }
        let (mut server, mut client, mut servers) = (0u64, 0u64, 0usize);
        for (tid, &(srv, ns)) in &now.threads {
            // A thread started during the series counts from zero.
            let used = ns.saturating_sub(self.threads.get(tid).map_or(0, |&(_, before)| before));
            if srv {
                server += used;
                servers += 1;
            } else {
                client += used;
            }
        }
        let us = |ns: u64| ns as f64 / 1000.0 / ops as f64;
        Some(CpuPerOp { server_us: (servers > 0).then(|| us(server)), client_us: us(client) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_busy_server_thread_is_counted_on_its_side() {
        let before = Snapshot::take();
        std::thread::Builder::new()
            .name("bench-quic-test".into())
            .spawn(|| {
                let t = std::time::Instant::now();
                let mut x = 0u64;
                while t.elapsed() < std::time::Duration::from_millis(50) {
                    x = x.wrapping_add(std::hint::black_box(1));
                }
                // Still alive when measured: joined after.
                std::thread::sleep(std::time::Duration::from_millis(200));
                x
            })
            .map(|h| {
                std::thread::sleep(std::time::Duration::from_millis(120));
                let cpu = before.per_op(10).expect("measured");
                let server = cpu.server_us.expect("a server thread ran");
                // 50 ms of spinning over 10 requests: ~5000 µs each (the thread may be descheduled).
                assert!((1000.0..10_000.0).contains(&server), "{cpu:?}");
                h.join().unwrap();
            })
            .unwrap();
    }
}
