//! Block-report deltas for heartbeats: what was added and removed since the last drain.

use std::collections::HashSet;

/// Blocks added and removed since the previous report; the two sets are disjoint.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BlockReport {
    /// Blocks committed since the last report (sorted).
    pub added: Vec<u64>,
    /// Blocks deleted, evicted or dropped as corrupt since the last report (sorted).
    pub removed: Vec<u64>,
}

/// Accumulates changes until drained; the latest change of a block wins.
#[derive(Debug, Default)]
pub(crate) struct ReportDeltas {
    added: HashSet<u64>,
    removed: HashSet<u64>,
}

impl ReportDeltas {
    pub(crate) fn added(&mut self, id: u64) {
        self.removed.remove(&id);
        self.added.insert(id);
    }

    pub(crate) fn removed(&mut self, id: u64) {
        self.added.remove(&id);
        self.removed.insert(id);
    }

    pub(crate) fn drain(&mut self) -> BlockReport {
        let mut added: Vec<u64> = self.added.drain().collect();
        let mut removed: Vec<u64> = self.removed.drain().collect();
        added.sort_unstable();
        removed.sort_unstable();
        BlockReport { added, removed }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latest_change_wins() {
        let mut d = ReportDeltas::default();
        d.added(1);
        d.added(2);
        d.removed(2);
        d.removed(3);
        d.added(3);
        let r = d.drain();
        assert_eq!(r.added, vec![1, 3]);
        assert_eq!(r.removed, vec![2]);
        assert_eq!(d.drain(), BlockReport::default());
    }
}
