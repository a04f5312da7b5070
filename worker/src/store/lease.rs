//! Leases of block extents to short-circuit readers (clients on this host reading the data
//! file themselves, `wire/FORMAT.md`): an extent leased until `t` is not reused before `t`.
//!
//! A lease names one incarnation (its `seq`), so it dies with it; what outlives the
//! incarnation is its extent, which is *held* instead of freed when the incarnation goes
//! (evicted, deleted, dropped as corrupt, rewritten) under a live lease, and freed once the
//! lease has run out. Held bytes stay counted as used.

use std::collections::HashMap;
use std::time::Instant;

/// An extent of a data file: `(dir, offset, len)`.
pub(crate) type Extent = (u16, u64, u64);

/// Live leases by incarnation, and the extents held for them.
#[derive(Debug, Default)]
pub(crate) struct Leases {
    until: HashMap<u64, Instant>,
    held: Vec<(Instant, Extent)>,
    /// Leases granted since the last sweep of expired ones.
    since_sweep: usize,
}

impl Leases {
    /// Leases incarnation `seq` until `until` (a later lease extends an earlier one).
    pub(crate) fn grant(&mut self, seq: u64, until: Instant, now: Instant) {
        let t = self.until.entry(seq).or_insert(until);
        *t = (*t).max(until);
        self.since_sweep += 1;
        if self.since_sweep > 1024 && self.since_sweep > self.until.len() / 2 {
            self.until.retain(|_, t| *t > now);
            self.since_sweep = 0;
        }
    }

    /// Whether a lease on incarnation `seq` lasts at `now`.
    pub(crate) fn is_live(&self, seq: u64, now: Instant) -> bool {
        self.until.get(&seq).is_some_and(|t| *t > now)
    }

    /// Incarnation `seq` is gone: its extent is free now (`None`), or held until its lease ends.
    pub(crate) fn retire(&mut self, seq: u64, extent: Extent, now: Instant) -> Option<Extent> {
        match self.until.remove(&seq) {
            Some(t) if t > now => {
                self.held.push((t, extent));
                None
            }
            _ => Some(extent),
        }
    }

    /// Takes the held extents whose leases have run out, to be freed.
    pub(crate) fn reclaim(&mut self, now: Instant) -> Vec<Extent> {
        if self.held.iter().all(|(t, _)| *t > now) {
            return Vec::new();
        }
        let (done, keep): (Vec<_>, Vec<_>) = self.held.drain(..).partition(|(t, _)| *t <= now);
        self.held = keep;
        done.into_iter().map(|(_, e)| e).collect()
    }

    /// When the first held extent becomes free, if any is held.
    pub(crate) fn next_release(&self) -> Option<Instant> {
        self.held.iter().map(|(t, _)| *t).min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn an_extent_under_a_live_lease_is_held_until_it_ends() {
        let t0 = Instant::now();
        let mut l = Leases::default();
        l.grant(7, t0 + Duration::from_secs(5), t0);
        assert_eq!(l.retire(8, (0, 4096, 8192), t0), Some((0, 4096, 8192)), "no lease: free at once");
        assert_eq!(l.retire(7, (0, 16384, 4096), t0), None, "leased: held");
        assert!(l.reclaim(t0 + Duration::from_secs(4)).is_empty());
        assert_eq!(l.next_release(), Some(t0 + Duration::from_secs(5)));
        assert_eq!(l.reclaim(t0 + Duration::from_secs(5)), vec![(0, 16384, 4096)]);
        assert_eq!(l.next_release(), None);
    }

    #[test]
    fn a_lease_that_ran_out_holds_nothing_and_a_later_one_extends() {
        let t0 = Instant::now();
        let mut l = Leases::default();
        l.grant(1, t0 + Duration::from_secs(1), t0);
        l.grant(1, t0 + Duration::from_millis(500), t0);
        assert_eq!(l.retire(1, (0, 0, 4096), t0 + Duration::from_millis(700)), None, "the longer lease stands");
        l.grant(2, t0 + Duration::from_secs(1), t0);
        assert!(l.retire(2, (0, 8192, 4096), t0 + Duration::from_secs(2)).is_some());
    }
}
