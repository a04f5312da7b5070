//! Re-replication: every cv-only block keeps `replicas` copies on workers that count (live,
//! not draining). [`MasterCore::replicate`] scans the block map and orders a copy for each
//! block that is short (a worker dead past the grace period, a copy dropped as corrupt, a
//! drain), and drops copies that no longer count once the block has enough without them.
//! Orders ride on the target worker's heartbeat reply; the copy counts when that worker
//! reports holding the block ([`Mutation::CopiesAdded`], journaled before the heartbeat).
//! What is ordered and not yet done is in memory only: after a restart the scan orders again.

use std::collections::HashMap;
use std::net::SocketAddr;

use super::{Inner, MasterCore, lock};
use crate::error::{Error, ErrorKind, Result};
use crate::state::{BlockId, Mutation, State, WorkerId};

/// A copy that was ordered and has not been reported is ordered again after this long (the
/// target died, or its copy failed).
const ORDER_EXPIRES_MS: u64 = 30_000;
/// Most copies one worker is ordered to make per heartbeat.
const ORDERS_PER_HEARTBEAT: usize = 64;

/// One block a worker is to copy from another (see `cv_wire::msg::CopyOrder`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopyOrder {
    pub block_id: BlockId,
    pub len: u64,
    pub from_worker: WorkerId,
    pub from: SocketAddr,
}

/// A copy ordered: to which worker, when, and whether its heartbeat has carried it yet.
#[derive(Debug, Clone)]
pub(super) struct Ordered {
    target: WorkerId,
    at_ms: u64,
    order: CopyOrder,
    handed: bool,
}

/// The copies in flight, by block.
#[derive(Debug, Default)]
pub(super) struct Copies {
    ordered: HashMap<BlockId, Ordered>,
    /// The state's live epoch at the last scan that found nothing to do: nothing changes
    /// until it moves (or a copy is dropped or lost, which `dirty` marks).
    quiet_epoch: Option<u64>,
    dirty: bool,
}

/// What one [`MasterCore::replicate`] pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReplicationReport {
    /// Copies newly ordered.
    pub ordered: usize,
    /// Copies dropped (on workers that no longer count, from blocks with enough without them).
    pub dropped: usize,
    /// Blocks short of copies with none to copy from: lost.
    pub lost: usize,
    /// Blocks short of copies (ordered now, ordered before, or waiting for the grace period).
    pub short: usize,
}

impl MasterCore {
    /// How many copies a cv-only block should have now: the `replicas` setting, or fewer when
    /// fewer workers count.
    pub fn replica_target(&self) -> usize {
        let st = &self.settled().state;
        target(st, self.config.replicas)
    }

    /// One re-replication pass (the server's tick calls it): orders missing copies and drops
    /// the ones that no longer count. A pass over the whole block map, skipped while nothing
    /// changed since one that found nothing to do. The drops are chosen and journaled under
    /// one hold of the state lock, so no copy they count on can go in between.
    pub fn replicate(&self) -> Result<ReplicationReport> {
        let mut report = ReplicationReport::default();
        let result = self.submit(|g, now| {
            let drops = self.plan(g, now, &mut report);
            if drops.is_empty() {
                // Nothing to journal: signal "no mutation" through a typed error caught below.
                return Err(Error::new(ErrorKind::NotFound, "no copies to drop"));
            }
            report.dropped = drops.len();
            Ok(Mutation::CopiesDropped { copies: drops })
        });
        match result {
            Ok((_, t)) => t.wait().map(|_| report),
            Err(e) if e.kind() == ErrorKind::NotFound && report.dropped == 0 => Ok(report),
            Err(e) => Err(e),
        }
    }

    /// The scan of [`Self::replicate`]: orders copies for the blocks that are short (counted
    /// in `report`) and returns the copies to drop.
    fn plan(&self, g: &mut Inner, now: u64, report: &mut ReplicationReport) -> Vec<(BlockId, WorkerId)> {
        let mut drops = Vec::new();
        let mut copies = lock(&self.copies);
        let epoch = g.state.live_epoch();
        if copies.quiet_epoch == Some(epoch) && !copies.dirty && copies.ordered.is_empty() {
            return drops;
        }
        copies.dirty = false;
        copies.ordered.retain(|_, o| now.saturating_sub(o.at_ms) < ORDER_EXPIRES_MS);
        g.ring(self.config.vnodes_per_shard);
        let Inner { state, ring, .. } = &*g;
        let want = target(state, self.config.replicas);
        let (grace, started) =
            (self.config.replica_grace.as_millis() as u64, self.started_ms.load(std::sync::atomic::Ordering::Acquire));
        // A lost worker's copy still counts within the grace period (counted from the
        // master's start at the earliest: it could not hear heartbeats while down).
        let waiting = |w: WorkerId| {
            state
                .worker(w)
                .is_some_and(|w| !w.live && !w.draining && now.saturating_sub(w.last_heartbeat.max(started)) <= grace)
        };
        let live = |w: WorkerId| state.worker(w).is_some_and(|w| w.live);
        for (&b, info) in &state.data().blocks {
            if !state.cv_only(info) || !state.is_complete(info.file) {
                continue;
            }
            let counted = info.copies().filter(|&w| state.counts(w)).count();
            if counted >= want {
                copies.ordered.remove(&b);
                // Enough without the ones that do not count: those go (a drained worker's,
                // or a dead one's past the grace period).
                drops.extend(info.copies().filter(|&w| !state.counts(w) && !waiting(w)).map(|w| (b, w)));
                continue;
            }
            report.short += 1;
            if counted + info.copies().filter(|&w| waiting(w)).count() >= want || copies.ordered.contains_key(&b) {
                continue;
            }
            let Some(source) = info.copies().filter(|&w| live(w)).max_by_key(|&w| state.counts(w)) else {
                report.lost += 1;
                continue;
            };
            let Some(from) = state.worker(source).and_then(|w| w.shard_addr(info.shard)) else { continue };
            let mut chosen: Vec<WorkerId> = info.copies().collect();
            let have = chosen.len();
            let room = |w| state.has_room(w, info.len);
            ring.extend_copies(cv_wire::block_seq(b), info.shard, &mut chosen, have + 1, |w| state.domain(w), room);
            let Some(&to) = chosen.get(have) else { continue };
            let order = CopyOrder { block_id: b, len: info.len, from_worker: source, from };
            copies.ordered.insert(b, Ordered { target: to, at_ms: now, order, handed: false });
            report.ordered += 1;
        }
        copies.quiet_epoch = (report.short == 0 && drops.is_empty()).then_some(epoch);
        drops
    }

    /// The copies ordered from `worker` that its heartbeat has not carried yet (at most
    /// [`ORDERS_PER_HEARTBEAT`]); they are marked carried.
    pub(super) fn copy_orders(&self, worker: WorkerId) -> Vec<CopyOrder> {
        let mut copies = lock(&self.copies);
        let mut out = Vec::new();
        for o in copies.ordered.values_mut().filter(|o| o.target == worker && !o.handed) {
            if out.len() == ORDERS_PER_HEARTBEAT {
                break;
            }
            o.handed = true;
            out.push(o.order.clone());
        }
        out
    }

    /// Of the blocks `worker` reports holding, the ones it was ordered to copy.
    pub(super) fn copies_made(&self, worker: WorkerId, added: &[BlockId]) -> Vec<BlockId> {
        let copies = lock(&self.copies);
        if copies.ordered.is_empty() {
            return Vec::new();
        }
        added.iter().copied().filter(|b| copies.ordered.get(b).is_some_and(|o| o.target == worker)).collect()
    }

    /// These ordered copies are made: no longer in flight, and the next pass looks again.
    pub(super) fn copies_counted(&self, blocks: &[BlockId]) {
        let mut copies = lock(&self.copies);
        for b in blocks {
            copies.ordered.remove(b);
        }
        copies.dirty = true;
    }

    /// Something may have left a block short (a copy reported gone): the next pass scans.
    pub(super) fn copies_changed(&self) {
        lock(&self.copies).dirty = true;
    }
}

/// Copies wanted of a cv-only block in `st`: `replicas`, at most the workers that count, at
/// least one.
fn target(st: &State, replicas: usize) -> usize {
    let counting = st.data().workers.values().filter(|w| w.live && !w.draining).count();
    replicas.min(counting).max(1)
}
