//! The worker registry: registration, heartbeats with block-report deltas, loss.

use super::types::{BlockId, Worker, WorkerId};
use super::{Applied, State, err};
use crate::error::{ErrorKind, Result};

/// Most shards one worker may announce.
pub const MAX_SHARDS: usize = 1024;

impl State {
    pub(super) fn register_worker(
        &mut self,
        worker_id: WorkerId,
        host: &str,
        shard_ports: &[u16],
        capacity: u64,
        now: u64,
        zone: &str,
    ) -> Result<Applied> {
        if host.is_empty() || shard_ports.is_empty() || shard_ports.len() > MAX_SHARDS {
            return err(ErrorKind::InvalidArgument, "worker needs a host and 1..=1024 shard ports");
        }
        if !self.data.workers.contains_key(&worker_id) && worker_id < self.data.next_worker {
            return err(ErrorKind::InvalidArgument, format!("worker id {worker_id} not issued"));
        }
        self.data.next_worker = self.data.next_worker.max(worker_id + 1);
        let w = self.data.workers.entry(worker_id).or_insert_with(|| Worker {
            id: worker_id,
            host: String::new(),
            shard_ports: Vec::new(),
            capacity: 0,
            used: 0,
            last_heartbeat: now,
            live: false,
            zone: String::new(),
            draining: false,
        });
        w.host = host.to_owned();
        w.zone = zone.to_owned();
        w.shard_ports = shard_ports.to_vec();
        w.capacity = capacity;
        w.last_heartbeat = now;
        w.live = true;
        self.live_epoch += 1;
        Ok(Applied::WorkerRegistered { worker_id })
    }

    pub(super) fn heartbeat(
        &mut self,
        worker_id: WorkerId,
        now: u64,
        capacity: u64,
        used: u64,
        added: &[BlockId],
        removed: &[BlockId],
    ) -> Result<Applied> {
        let Some(w) = self.data.workers.get_mut(&worker_id) else {
            return err(ErrorKind::UnknownWorker, format!("worker {worker_id}"));
        };
        w.capacity = capacity;
        w.used = used;
        w.last_heartbeat = w.last_heartbeat.max(now);
        if !w.live {
            w.live = true;
            self.live_epoch += 1;
        }
        let host = self.data.workers.get(&worker_id).map(|w| w.host.clone()).unwrap_or_default();
        let shards = self.data.workers.get(&worker_id).map_or(0, |w| w.shard_ports.len());
        for b in added {
            if self.data.pending_deletes.get(&worker_id).is_some_and(|d| d.contains(b)) {
                continue; // a copy it was told to drop
            }
            let Some(info) = self.data.blocks.get(b) else {
                // A block the master does not know (e.g. its file was deleted while a
                // heartbeat reply was lost): tell the worker to drop it.
                self.data.pending_deletes.entry(worker_id).or_default().insert(*b);
                continue;
            };
            if info.worker == worker_id {
                if let Some(info) = self.data.blocks.get_mut(b) {
                    info.reported = true;
                }
                continue;
            }
            if info.replicas.contains(&worker_id) {
                continue;
            }
            // A block is write-once under a unique id, so any worker holding it holds its
            // bytes. One whose copy is on a worker that is gone, or on an earlier incarnation
            // of this one (same host, new id after a restart), is adopted in that copy's
            // place: for a cv-only block those bytes may be the only copy left. A block the
            // store holds is read where the ring puts it now (a worker joined or left), which
            // filled it: the latest holder is its owner.
            let gone = |w: &WorkerId| self.data.workers.get(w).is_none_or(|o| !o.live || o.host == host);
            let slot = if self.cv_only(info) { info.copies().position(|w| gone(&w)) } else { Some(0) };
            match (slot, self.data.blocks.get_mut(b)) {
                (Some(0), Some(info)) if usize::from(info.shard) < shards => {
                    info.worker = worker_id;
                    info.reported = true;
                }
                (Some(i), Some(info)) if i > 0 && usize::from(info.shard) < shards => info.replicas[i - 1] = worker_id,
                _ => {
                    self.data.pending_deletes.entry(worker_id).or_default().insert(*b);
                }
            }
        }
        for b in removed {
            self.copy_gone(worker_id, *b);
        }
        let delete_blocks =
            self.data.pending_deletes.remove(&worker_id).map(|s| s.into_iter().collect()).unwrap_or_default();
        let unpin_blocks =
            self.data.pending_unpins.remove(&worker_id).map(|s| s.into_iter().collect()).unwrap_or_default();
        Ok(Applied::Heartbeat { delete_blocks, unpin_blocks })
    }

    pub(super) fn workers_lost(&mut self, ids: &[WorkerId], _now: u64) -> Result<Applied> {
        if let Some(id) = ids.iter().find(|id| !self.data.workers.contains_key(id)) {
            return err(ErrorKind::UnknownWorker, format!("worker {id}"));
        }
        let mut missing = Vec::new();
        for id in ids {
            if let Some(w) = self.data.workers.get_mut(id)
                && w.live
            {
                w.live = false;
                self.live_epoch += 1;
            }
        }
        // Blocks that had a copy there and now have none on a live worker.
        let live = |w: WorkerId| self.data.workers.get(&w).is_some_and(|w| w.live);
        for (b, info) in &self.data.blocks {
            if info.copies().any(|w| ids.contains(&w)) && !info.copies().any(live) {
                missing.push(*b);
            }
        }
        missing.sort_unstable();
        Ok(Applied::WorkersLost { missing_blocks: missing })
    }

    /// Live workers silent for more than `timeout_ms` at `now`, counting silence from their
    /// last heartbeat or from `not_before` (when the master started), whichever is later.
    pub fn expired_workers(&self, now: u64, timeout_ms: u64, not_before: u64) -> Vec<WorkerId> {
        self.data
            .workers
            .values()
            .filter(|w| w.live && now.saturating_sub(w.last_heartbeat.max(not_before)) > timeout_ms)
            .map(|w| w.id)
            .collect()
    }

    /// Worker `w` no longer holds block `b` (it reported it removed, or missing from a full
    /// report). A cv-only copy gone (dropped as corrupt, its disk lost) no longer counts, but a
    /// block's last copy stays recorded (reads of it say `DataLoss`); a store-backed block is
    /// filled again where it is read.
    pub(super) fn copy_gone(&mut self, w: WorkerId, b: BlockId) {
        let Some(info) = self.data.blocks.get(&b) else { return };
        let cv_only = self.cv_only(info);
        let Some(info) = self.data.blocks.get_mut(&b) else { return };
        if info.worker == w {
            info.reported = false;
        }
        // A store-backed block has one copy, which stays recorded: it is filled again.
        if cv_only {
            info.remove_copy(w);
        }
    }

    /// The blocks of complete files with a copy on `w` that its full report `reported` lacks.
    pub fn missing_from_report(&self, w: WorkerId, reported: &[BlockId]) -> Vec<BlockId> {
        let reported: std::collections::HashSet<&BlockId> = reported.iter().collect();
        self.data
            .blocks
            .iter()
            .filter(|(b, info)| info.copies().any(|c| c == w) && !reported.contains(b) && self.is_complete(info.file))
            .map(|(b, _)| *b)
            .collect()
    }

    /// Starts or ends draining worker `id`: placement skips it, so the live epoch moves.
    pub(super) fn drain(&mut self, id: WorkerId, draining: bool) -> Result<Applied> {
        let Some(w) = self.data.workers.get_mut(&id) else {
            return err(ErrorKind::UnknownWorker, format!("worker {id}"));
        };
        if w.draining != draining {
            w.draining = draining;
            self.live_epoch += 1;
        }
        Ok(Applied::Done)
    }

    /// Every (worker, shard) that can take new blocks: live and not being drained.
    pub fn live_shards(&self) -> Vec<(WorkerId, u16)> {
        let mut out = Vec::new();
        for w in self.data.workers.values().filter(|w| w.live && !w.draining) {
            for shard in 0..w.shard_ports.len() {
                out.push((w.id, shard as u16));
            }
        }
        out
    }

    pub fn worker(&self, id: WorkerId) -> Option<&Worker> {
        self.data.workers.get(&id)
    }

    /// Block deletes queued for a worker (handed out by its next heartbeat).
    pub fn pending_deletes(&self, id: WorkerId) -> Vec<BlockId> {
        self.data.pending_deletes.get(&id).map(|s| s.iter().copied().collect()).unwrap_or_default()
    }
}
