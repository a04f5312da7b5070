//! Workers: registration, heartbeats (block reports, delete and unpin commands) and the tick
//! that marks silent workers lost.

use super::{MasterCore, Pending};
use crate::error::{Error, ErrorKind, Result};
use crate::state::{Applied, BlockId, Mutation, WorkerId};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeartbeatReply {
    /// Blocks the worker must drop.
    pub delete_blocks: Vec<BlockId>,
    /// Blocks the worker may evict again (their files were exported).
    pub unpin_blocks: Vec<BlockId>,
    /// Blocks the worker is to copy from another worker.
    pub copy: Vec<super::replicas::CopyOrder>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TickReport {
    pub lost_workers: Vec<WorkerId>,
    pub missing_blocks: Vec<BlockId>,
}

impl MasterCore {
    /// Registers a worker; `previous` is the id it had before a restart (kept if known).
    pub fn begin_register_worker(
        &self,
        previous: Option<WorkerId>,
        host: &str,
        shard_ports: Vec<u16>,
        capacity: u64,
        zone: &str,
    ) -> Result<Pending<WorkerId>> {
        let (applied, t) = self.submit(|g, now| {
            // A worker that lost its id (its process restarted) but comes back at the same
            // address is the same worker: its blocks stay its own.
            let same_addr = || {
                g.state.data().workers.values().find(|w| w.host == host && w.shard_ports == shard_ports).map(|w| w.id)
            };
            let worker_id = match previous {
                Some(id) if g.state.worker(id).is_some() => id,
                _ => same_addr().unwrap_or_else(|| g.state.next_worker_id()),
            };
            let (host, zone) = (host.to_owned(), zone.to_owned());
            Ok(Mutation::RegisterWorker { worker_id, host, shard_ports, capacity, now, zone })
        })?;
        let Applied::WorkerRegistered { worker_id } = applied else {
            return Err(Error::new(ErrorKind::InvalidArgument, "register did not register"));
        };
        Ok(Self::done(worker_id, t))
    }

    pub fn register_worker(
        &self,
        previous: Option<WorkerId>,
        host: &str,
        shard_ports: Vec<u16>,
        capacity: u64,
    ) -> Result<WorkerId> {
        self.begin_register_worker(previous, host, shard_ports, capacity, "")?.wait()
    }

    pub fn begin_heartbeat(
        &self,
        worker_id: WorkerId,
        capacity: u64,
        used: u64,
        added: Vec<BlockId>,
        removed: Vec<BlockId>,
    ) -> Result<Pending<HeartbeatReply>> {
        self.begin_heartbeat_full(worker_id, capacity, used, added, removed, false)
    }

    /// [`Self::begin_heartbeat`]; with `full`, `added` is every block the worker holds (its
    /// first report after registering): copies the master counted there that it lacks (a
    /// wiped disk) no longer count ([`Mutation::CopiesMissing`]), so they are made again.
    pub fn begin_heartbeat_full(
        &self,
        worker_id: WorkerId,
        capacity: u64,
        used: u64,
        added: Vec<BlockId>,
        removed: Vec<BlockId>,
        full: bool,
    ) -> Result<Pending<HeartbeatReply>> {
        if full {
            let mut missing = Vec::new();
            let result = self.submit(|g, _| {
                missing = g.state.missing_from_report(worker_id, &added);
                if missing.is_empty() {
                    return Err(Error::new(ErrorKind::NotFound, "no copies missing"));
                }
                Ok(Mutation::CopiesMissing { worker_id, blocks: missing.clone() })
            });
            match result {
                Ok(_) => {
                    tracing::warn!(
                        worker = worker_id,
                        blocks = missing.len(),
                        "copies missing from a worker's full report"
                    );
                    self.copies_changed();
                }
                Err(e) if e.kind() == ErrorKind::NotFound && missing.is_empty() => {}
                Err(e) => return Err(e),
            }
        }
        // Copies made on our order count before the heartbeat is applied, which would take a
        // block reported by a worker that holds no copy of it for a stray and drop it.
        let copied = self.copies_made(worker_id, &added);
        let any_removed = !removed.is_empty();
        if !copied.is_empty() {
            let blocks = copied.clone();
            drop(self.submit(|_, _| Ok(Mutation::CopiesAdded { worker_id, blocks }))?);
            self.copies_counted(&copied);
        }
        let (applied, t) =
            self.submit(|_, now| Ok(Mutation::Heartbeat { worker_id, now, capacity, used, added, removed }))?;
        let (delete_blocks, unpin_blocks) = match applied {
            Applied::Heartbeat { delete_blocks, unpin_blocks } => (delete_blocks, unpin_blocks),
            _ => (Vec::new(), Vec::new()),
        };
        if any_removed {
            self.copies_changed();
        }
        let copy = self.copy_orders(worker_id);
        Ok(Self::done(HeartbeatReply { delete_blocks, unpin_blocks, copy }, t))
    }

    /// Starts (`draining`) or ends draining worker `id`: it takes no new blocks, and
    /// [`Self::replicate`] copies its cv-only blocks elsewhere, then drops them from it.
    pub fn begin_drain(&self, id: WorkerId, draining: bool) -> Result<Pending<()>> {
        let (_, t) = self.submit(|_, _| Ok(Mutation::Drain { worker_id: id, draining }))?;
        Ok(Self::done((), t))
    }

    pub fn heartbeat(
        &self,
        worker_id: WorkerId,
        capacity: u64,
        used: u64,
        added: Vec<BlockId>,
        removed: Vec<BlockId>,
    ) -> Result<HeartbeatReply> {
        self.begin_heartbeat(worker_id, capacity, used, added, removed)?.wait()
    }

    /// Marks `ids` lost now, those still live: their connection to the master closed (a
    /// worker that stopped, died or was cut off; a live one registers again when it can).
    pub fn workers_gone(&self, ids: &[WorkerId]) -> Result<TickReport> {
        self.lose(|g, _| ids.iter().copied().filter(|id| g.state.worker(*id).is_some_and(|w| w.live)).collect())
    }

    /// Marks workers silent for longer than the heartbeat timeout as lost. A restarted core
    /// counts silence from its start at the earliest: heartbeats could not reach it while it
    /// was down, so each worker gets a whole timeout to reconnect before its blocks are lost.
    pub fn tick(&self) -> Result<TickReport> {
        let timeout = self.config.heartbeat_timeout.as_millis() as u64;
        self.lose(|g, now| {
            g.state.expired_workers(now, timeout, self.started_ms.load(std::sync::atomic::Ordering::Acquire))
        })
    }

    /// Journals the loss of the workers `pick` names (none: nothing is journaled): which they
    /// were, and the blocks they held.
    fn lose(&self, pick: impl FnOnce(&super::Inner, u64) -> Vec<WorkerId>) -> Result<TickReport> {
        let mut lost = Vec::new();
        let result = self.submit(|g, now| {
            lost = pick(g, now);
            if lost.is_empty() {
                // Nothing to journal: signal "no mutation" through a typed error caught below.
                return Err(Error::new(ErrorKind::NotFound, "no workers to mark lost"));
            }
            Ok(Mutation::WorkersLost { worker_ids: lost.clone(), now })
        });
        let missing_blocks = match result {
            Ok((Applied::WorkersLost { missing_blocks }, t)) => {
                t.wait()?;
                missing_blocks
            }
            Ok((_, t)) => t.wait().map(|_| Vec::new())?,
            Err(e) if e.kind() == ErrorKind::NotFound && lost.is_empty() => Vec::new(),
            Err(e) => return Err(e),
        };
        Ok(TickReport { lost_workers: lost, missing_blocks })
    }
}
