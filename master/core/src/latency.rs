//! A latency histogram of plain atomics (fixed buckets, no locks, no metrics library): the
//! core counts, and the serving process exposes the counts (cv-master's `/metrics`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Upper bounds of the buckets, in microseconds: 50 µs (a page-cache fsync) to 1 s.
pub const BOUNDS_US: [u64; 14] =
    [50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000, 1_000_000];

/// Observations per bucket (the last: above 1 s) and their sum.
#[derive(Debug, Default)]
pub struct Latency {
    counts: [AtomicU64; BOUNDS_US.len() + 1],
    sum_us: AtomicU64,
}

/// What [`Latency::snapshot`] read: non-cumulative counts per bucket of [`BOUNDS_US`] and one
/// more above the last bound.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LatencySnapshot {
    pub counts: Vec<u64>,
    pub sum_us: u64,
}

impl Latency {
    /// Counts one observation.
    pub fn observe(&self, d: Duration) {
        let us = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        let i = BOUNDS_US.iter().position(|&b| us <= b).unwrap_or(BOUNDS_US.len());
        self.counts[i].fetch_add(1, Ordering::Relaxed);
        self.sum_us.fetch_add(us, Ordering::Relaxed);
    }

    /// The counts now (each read on its own: a scrape may see one observation half counted).
    pub fn snapshot(&self) -> LatencySnapshot {
        LatencySnapshot {
            counts: self.counts.iter().map(|c| c.load(Ordering::Relaxed)).collect(),
            sum_us: self.sum_us.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn observations_land_in_their_bucket() {
        let l = Latency::default();
        l.observe(Duration::from_micros(40));
        l.observe(Duration::from_micros(50));
        l.observe(Duration::from_millis(3));
        l.observe(Duration::from_secs(2));
        let s = l.snapshot();
        assert_eq!(s.counts[0], 2);
        assert_eq!(s.counts[6], 1);
        assert_eq!(s.counts[BOUNDS_US.len()], 1);
        assert_eq!(s.sum_us, 40 + 50 + 3_000 + 2_000_000);
    }
}
