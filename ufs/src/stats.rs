//! Object-store requests counted per kind, with latency buckets: plain atomics a [`crate::Ufs`]
//! shares with whoever serves metrics (the master and the worker hand theirs to every `Ufs`
//! they make, [`crate::Ufs::with_stats`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// What a request asked of the store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UfsOp {
    /// HEAD.
    Stat,
    /// GET of a range (timed to the first bytes: the rest streams while the caller works).
    Read,
    /// LIST.
    List,
    /// An upload, from its start to its close.
    Write,
    /// A copy inside the store.
    Copy,
    /// DELETE.
    Delete,
}

impl UfsOp {
    /// Every kind, in the order of [`UfsStats::snapshot`].
    pub const ALL: [UfsOp; 6] = [UfsOp::Stat, UfsOp::Read, UfsOp::List, UfsOp::Write, UfsOp::Copy, UfsOp::Delete];

    /// Its name as a metric label.
    pub fn name(self) -> &'static str {
        match self {
            UfsOp::Stat => "stat",
            UfsOp::Read => "read",
            UfsOp::List => "list",
            UfsOp::Write => "write",
            UfsOp::Copy => "copy",
            UfsOp::Delete => "delete",
        }
    }
}

/// Upper bounds of the latency buckets, in milliseconds: an object store answers in
/// milliseconds to seconds (a call gives up after about 15 s by default).
pub const BOUNDS_MS: [u64; 12] = [1, 5, 10, 25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 15_000];

#[derive(Debug, Default)]
struct OpStats {
    errors: AtomicU64,
    counts: [AtomicU64; BOUNDS_MS.len() + 1],
    sum_us: AtomicU64,
}

/// Requests per [`UfsOp`].
#[derive(Debug, Default)]
pub struct UfsStats {
    ops: [OpStats; UfsOp::ALL.len()],
}

/// One kind's counts: non-cumulative per bucket of [`BOUNDS_MS`] and one above the last.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UfsOpSnapshot {
    pub op: &'static str,
    pub counts: Vec<u64>,
    pub errors: u64,
    pub sum_us: u64,
}

impl UfsOpSnapshot {
    /// Requests made (answered or failed).
    pub fn requests(&self) -> u64 {
        self.counts.iter().sum()
    }
}

impl UfsStats {
    /// Counts one request of `op` that began at `started`.
    pub fn record(&self, op: UfsOp, started: Instant, ok: bool) {
        let s = &self.ops[op as usize];
        let d: Duration = started.elapsed();
        let us = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        let i = BOUNDS_MS.iter().position(|&b| us <= b * 1000).unwrap_or(BOUNDS_MS.len());
        s.counts[i].fetch_add(1, Ordering::Relaxed);
        s.sum_us.fetch_add(us, Ordering::Relaxed);
        if !ok {
            s.errors.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Every kind's counts now.
    pub fn snapshot(&self) -> Vec<UfsOpSnapshot> {
        UfsOp::ALL
            .iter()
            .map(|&op| {
                let s = &self.ops[op as usize];
                UfsOpSnapshot {
                    op: op.name(),
                    counts: s.counts.iter().map(|c| c.load(Ordering::Relaxed)).collect(),
                    errors: s.errors.load(Ordering::Relaxed),
                    sum_us: s.sum_us.load(Ordering::Relaxed),
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_counted_per_kind() {
        let s = UfsStats::default();
        s.record(UfsOp::Read, Instant::now(), true);
        s.record(UfsOp::Read, Instant::now(), false);
        s.record(UfsOp::Delete, Instant::now(), true);
        let snap = s.snapshot();
        assert_eq!(snap[1].op, "read");
        assert_eq!(snap[1].requests(), 2);
        assert_eq!(snap[1].errors, 1);
        assert_eq!(snap[5].requests(), 1);
        assert_eq!(snap[0].requests(), 0);
    }
}
