//! Block-report deltas not yet acknowledged by the master.
//!
//! Shard reports are merged in the order they were drained (the latest change of a block
//! wins); a heartbeat carries a bounded slice of them and is removed from here only once
//! the master acknowledged it, so a lost heartbeat loses nothing.

use std::collections::{BTreeMap, BTreeSet};

use cv_wire::msg::BlockReport;

use crate::shard::ShardReport;

/// Deltas waiting for the master.
#[derive(Debug, Default)]
pub(crate) struct Pending {
    added: BTreeMap<u64, (u64, u16)>,
    removed: BTreeSet<u64>,
}

/// The deltas one heartbeat carries.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Batch {
    pub(crate) added: Vec<BlockReport>,
    pub(crate) removed: Vec<u64>,
}

impl Pending {
    /// Applies a shard's report, drained after everything merged before it.
    pub(crate) fn merge(&mut self, r: ShardReport) {
        for id in r.removed {
            self.added.remove(&id);
            self.removed.insert(id);
        }
        for (id, len) in r.added {
            self.removed.remove(&id);
            self.added.insert(id, (len, r.shard));
        }
    }

    /// Up to `max` added and `max` removed blocks, lowest ids first.
    pub(crate) fn batch(&self, max: usize) -> Batch {
        Batch {
            added: self
                .added
                .iter()
                .take(max)
                .map(|(&block_id, &(len, shard))| BlockReport { block_id, len, shard })
                .collect(),
            removed: self.removed.iter().take(max).copied().collect(),
        }
    }

    /// Forgets what the master acknowledged.
    pub(crate) fn acknowledge(&mut self, added: &[BlockReport], removed: &[u64]) {
        for r in added {
            self.added.remove(&r.block_id);
        }
        for id in removed {
            self.removed.remove(id);
        }
    }

    /// Blocks waiting to be reported added.
    pub(crate) fn added_len(&self) -> usize {
        self.added.len()
    }

    /// Whether nothing is waiting.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(shard: u16, added: &[(u64, u64)], removed: &[u64]) -> ShardReport {
        ShardReport { shard, added: added.to_vec(), removed: removed.to_vec(), ..Default::default() }
    }

    #[test]
    fn latest_change_wins_and_acks_clear() {
        let mut p = Pending::default();
        p.merge(report(0, &[(1, 10), (2, 20)], &[]));
        p.merge(report(1, &[(3, 30)], &[2, 9]));
        p.merge(report(0, &[(9, 90)], &[]));
        let b = p.batch(100);
        let added: Vec<(u64, u64, u16)> = b.added.iter().map(|r| (r.block_id, r.len, r.shard)).collect();
        assert_eq!(added, vec![(1, 10, 0), (3, 30, 1), (9, 90, 0)]);
        assert_eq!(b.removed, vec![2]);
        p.acknowledge(&b.added, &b.removed);
        assert!(p.is_empty());
    }

    #[test]
    fn batches_are_bounded_and_unacked_deltas_stay() {
        let mut p = Pending::default();
        let many: Vec<(u64, u64)> = (0..10).map(|i| (i, 1)).collect();
        p.merge(report(0, &many, &[100, 101, 102]));
        let b = p.batch(4);
        assert_eq!(b.added.len(), 4);
        assert_eq!(b.removed, vec![100, 101, 102]);
        // Not acknowledged (heartbeat lost): the same batch again.
        assert_eq!(p.batch(4), b);
        p.acknowledge(&b.added, &b.removed);
        let rest = p.batch(100);
        assert_eq!(rest.added.iter().map(|r| r.block_id).collect::<Vec<_>>(), (4..10).collect::<Vec<_>>());
        assert!(rest.removed.is_empty());
    }
}
