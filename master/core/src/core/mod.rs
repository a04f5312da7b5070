//! `MasterCore`: the state machine, the journal, placement and the tail cache behind one
//! thread-safe facade for the server. Every mutation is applied under the state lock, appended
//! to the journal in sequence order, and acknowledged only when its ticket says it is durable.
//!
//! This file holds the machinery every domain shares (recovery, `submit`, `read`, snapshots);
//! the requests live by domain beside it, as `state/` and the server's handlers are split.
//! The `begin_*` forms, the server's, take paths their caller parsed once ([`CvPath`]) and
//! return a [`Pending`]; the blocking forms, for tests and embedded use, parse a string.

mod cache;
mod fresh;
mod full;
mod mounts;
mod namespace;
mod objects;
mod replicas;
mod revoked;
mod store_work;
mod tails;
mod workers;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::config::{Clock, MasterConfig};
use crate::error::{Error, ErrorKind, Result};
use crate::journal::{FileStorage, Journal, Log, Storage, Ticket, WriterStats, encode_record, encode_snapshot};
use crate::path::CvPath;
use crate::placement::PlacementRing;
use crate::state::{Applied, InodeId, Mutation, State, StateData};
use crate::tail_cache::{TailCache, TailStats};

pub use crate::state::{OpenFile, Tail};
pub use cache::{
    ListCheck, Listed, MAX_TAIL, ObjectHead, OpenStep, Refresh, SameVersion, Stated, StoreCheck, TailRead,
};
pub use namespace::{Created, NewBlock};
pub use replicas::{CopyOrder, ReplicationReport};
pub use store_work::{Completed, DeleteBatch, ExportJob, ExportStep, ObjectMove};
pub use workers::{HeartbeatReply, TickReport};

/// The journal's two byte stores.
#[derive(Debug)]
pub struct Storages {
    pub journal: Box<dyn Storage>,
    pub snapshot: Box<dyn Storage>,
}

/// What recovery found when the core opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecoveryInfo {
    pub last_seq: u64,
    pub snapshot_seq: u64,
    pub replayed: u64,
    pub cut_bytes: u64,
}

/// A result that is valid once its ticket resolves (the mutation, or what a read observed,
/// is durable). Wait blocking or async.
#[derive(Debug)]
#[must_use = "nothing is acknowledged until the ticket is waited on"]
pub struct Pending<T> {
    value: T,
    ticket: Ticket,
}

impl<T> Pending<T> {
    pub fn wait(self) -> Result<T> {
        self.ticket.wait()?;
        Ok(self.value)
    }

    pub async fn wait_async(self) -> Result<T> {
        self.ticket.wait_async().await?;
        Ok(self.value)
    }
}

#[derive(Debug)]
struct Inner {
    state: State,
    last_seq: u64,
    since_snapshot: u64,
    ring: PlacementRing,
    ring_epoch: u64,
    /// When paths under cache-mode mounts were last checked at their stores (`cache.rs`).
    fresh: fresh::Freshness,
}

impl Inner {
    /// The placement ring over the live shards, rebuilt only when the live set changed.
    fn ring(&mut self, vnodes: u32) -> &PlacementRing {
        if self.ring_epoch != self.state.live_epoch() {
            self.ring = PlacementRing::build(&self.state.live_shards(), vnodes);
            self.ring_epoch = self.state.live_epoch();
        }
        &self.ring
    }
}

#[derive(Debug)]
pub struct MasterCore {
    inner: Mutex<Inner>,
    tails: Mutex<TailCache>,
    journal: Box<dyn Log>,
    /// Whether this core takes mutations and answers reads: always for one master; under
    /// Raft only while this master leads and has applied everything committed before it.
    leading: AtomicBool,
    config: MasterConfig,
    clock: Arc<dyn Clock>,
    recovery: RecoveryInfo,
    /// When this core started, or under Raft last began to lead, or its journal took writes
    /// again after a full disk (the injected clock): the journal's last heartbeats are from
    /// before, so every worker gets a heartbeat timeout from here to reach this master.
    started_ms: std::sync::atomic::AtomicU64,
    /// When each file being written was last touched by its writer (create, add-block,
    /// complete), for the write lease. Not journaled: after a restart every such file's lease
    /// starts at the restart.
    writing: Mutex<HashMap<InodeId, u64>>,
    /// Copies ordered by re-replication and not yet made (`replicas.rs`). Taken inside the
    /// state lock by a pass, alone by heartbeats: never the other way round.
    copies: Mutex<replicas::Copies>,
    /// When a probe last found the journal's disk still full (the injected clock; 0: never):
    /// writes within [`full::PROBE_EVERY_MS`] of it are refused without asking the disk.
    probed_ms: std::sync::atomic::AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Nothing panics while holding these locks by design; if a bug did, the data is still the
    // last consistent value (apply changes nothing on error).
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn cv(raw: &str) -> Result<CvPath> {
    Ok(CvPath::parse(raw)?)
}

impl MasterCore {
    /// Opens with real files `journal` and `snapshot` in `config.journal_dir`.
    pub fn start_dir(config: MasterConfig, clock: Arc<dyn Clock>) -> Result<Self> {
        // The journal and snapshot hold every mount's credentials: the master's user only.
        crate::journal::private_dir(&config.journal_dir).map_err(|e| Error::io("create journal dir", &e))?;
        let storages = Storages {
            journal: Box::new(FileStorage::new(config.journal_dir.join("journal"))),
            snapshot: Box::new(FileStorage::new(config.journal_dir.join("snapshot"))),
        };
        Self::start(config, storages, clock)
    }

    /// Recovers from the given storages and starts the journal writer.
    pub fn start(config: MasterConfig, storages: Storages, clock: Arc<dyn Clock>) -> Result<Self> {
        if config.block_size == 0 || config.group_commit_max_bytes == 0 {
            return Err(Error::new(ErrorKind::InvalidArgument, "block size and batch size must be > 0"));
        }
        let (journal, rec) = Journal::open(storages.journal, storages.snapshot, config.group_commit_max_bytes)?;
        let recovery = RecoveryInfo {
            last_seq: rec.last_seq,
            snapshot_seq: rec.snapshot_seq,
            replayed: rec.replayed,
            cut_bytes: rec.cut_bytes,
        };
        let core = Self::build(config, rec.state, rec.last_seq, Box::new(journal), clock, recovery, true);
        lock(&core.inner).since_snapshot = rec.replayed;
        Ok(core)
    }

    /// A core over a replicated log: `state` at `last_seq` is what the log's snapshot holds,
    /// the log applies what is committed after it ([`Self::apply_committed`]), and the core
    /// takes mutations only once told it leads ([`Self::set_leading`]). It never snapshots
    /// itself (the log does), and every read waits on the log (`Log::wait_for`), which is
    /// where a replicated log proves this master still leads.
    pub fn replicated(
        mut config: MasterConfig,
        state: State,
        last_seq: u64,
        log: Box<dyn Log>,
        clock: Arc<dyn Clock>,
    ) -> Result<Self> {
        if config.block_size == 0 {
            return Err(Error::new(ErrorKind::InvalidArgument, "block size must be > 0"));
        }
        config.snapshot_every = 0;
        config.read_waits_for_durability = true;
        let recovery = RecoveryInfo { last_seq, snapshot_seq: last_seq, replayed: 0, cut_bytes: 0 };
        Ok(Self::build(config, state, last_seq, log, clock, recovery, false))
    }

    fn build(
        config: MasterConfig,
        state: State,
        last_seq: u64,
        journal: Box<dyn Log>,
        clock: Arc<dyn Clock>,
        recovery: RecoveryInfo,
        leading: bool,
    ) -> Self {
        let inner = Inner {
            state,
            last_seq,
            since_snapshot: 0,
            ring: PlacementRing::default(),
            ring_epoch: u64::MAX,
            fresh: Default::default(),
        };
        let started_ms = clock.now_ms();
        // A restarted master gives every file being written a whole lease (no master could be
        // reached meanwhile); under Raft the leases are counted once it leads (`set_leading`),
        // from the writers' progress, not from this master's start.
        let writing = match leading {
            true => inner.state.writing_files().map(|id| (id, started_ms)).collect(),
            false => HashMap::new(),
        };
        let writing = Mutex::new(writing);
        Self {
            inner: Mutex::new(inner),
            tails: Mutex::new(TailCache::new(config.tail_budget_bytes)),
            journal,
            leading: AtomicBool::new(leading),
            config,
            clock,
            recovery,
            started_ms: std::sync::atomic::AtomicU64::new(started_ms),
            writing,
            copies: Mutex::new(replicas::Copies::default()),
            probed_ms: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// Whether this core takes mutations and reads now.
    pub fn is_leading(&self) -> bool {
        self.leading.load(Ordering::Acquire)
    }

    /// Under Raft: this master now leads, and everything committed before its term is
    /// applied (or it stopped leading). A new leader counts every write lease from the
    /// writer's last progress the state records (create, a block), so a writer that is gone
    /// is removed within a lease however often leadership moves; that time is by the clock of
    /// the master then, so [`MasterConfig::clock_skew`] is added, and never past now: a live
    /// writer is not cut short by a clock ahead, and gets at most a whole lease from now. It
    /// gives every worker a heartbeat timeout from now to reach it, and forgets copy orders
    /// another leader gave.
    pub fn set_leading(&self, leading: bool) {
        let g = lock(&self.inner);
        if leading && !self.leading.load(Ordering::Acquire) {
            let now = self.clock.now_ms();
            self.started_ms.store(now, Ordering::Release);
            let skew = self.config.clock_skew.as_millis() as u64;
            let mut writing = lock(&self.writing);
            // Progress this master saw itself (as leader before, or blocks of an earlier
            // release's leader applied as a follower) counts too.
            let seen = std::mem::take(&mut *writing);
            *writing = g
                .state
                .writing_since()
                .map(|(id, at)| {
                    let from = at.saturating_add(skew).max(seen.get(&id).copied().unwrap_or(0));
                    (id, now.min(from))
                })
                .collect();
            *lock(&self.copies) = replicas::Copies::default();
        }
        self.leading.store(leading, Ordering::Release);
    }

    /// Under Raft, on a master that did not build it: a committed record, applied in order.
    pub fn apply_committed(&self, seq: u64, m: &Mutation) -> Result<()> {
        let mut g = lock(&self.inner);
        if seq != g.last_seq + 1 {
            return Err(Error::corrupt(format!("committed record seq {seq} follows seq {}", g.last_seq)));
        }
        g.state.apply(m).map_err(|e| {
            Error::new(ErrorKind::CorruptData, format!("committed seq {seq} ({}) does not apply: {e}", m.name()))
        })?;
        g.last_seq = seq;
        // A block journaled without its time (by a leader of an earlier release, during a
        // rolling upgrade) is progress seen now: counted from the create alone, a lease could
        // cut that writer short when this master leads.
        if let Mutation::AddBlock { file_id, .. } | Mutation::ReplaceBlock { file_id, .. } = m {
            lock(&self.writing).insert(*file_id, self.clock.now_ms());
        }
        Ok(())
    }

    /// Under Raft: replaces the whole state (a snapshot installed, or a deposed leader going
    /// back to what is committed, dropping what it applied that never was).
    pub fn reset(&self, state: State, last_seq: u64) {
        let mut g = lock(&self.inner);
        g.state = state;
        g.last_seq = last_seq;
        g.ring_epoch = u64::MAX;
    }

    pub fn config(&self) -> &MasterConfig {
        &self.config
    }

    pub fn recovery(&self) -> RecoveryInfo {
        self.recovery
    }

    pub fn tail_stats(&self) -> TailStats {
        lock(&self.tails).stats()
    }

    pub fn journal_stats(&self) -> &WriterStats {
        self.journal.stats()
    }

    /// A copy of the durable part of the state (tests, debugging).
    pub fn state_data(&self) -> StateData {
        self.settled().state.data().clone()
    }

    /// Since when a worker's silence counts (the injected clock): this core's start, under
    /// Raft its leadership, or its journal taking writes again after a full disk.
    pub fn heartbeats_count_from(&self) -> u64 {
        self.started_ms.load(Ordering::Acquire)
    }

    /// The last sequence number applied in memory.
    pub fn last_seq(&self) -> u64 {
        self.settled().last_seq
    }

    /// Whether it serves at all (under the state lock): it leads, its journal is not poisoned,
    /// and its state holds nothing the journal failed to make durable.
    fn healthy(&self, g: &mut Inner) -> Result<()> {
        if !self.leading.load(Ordering::Acquire) {
            return Err(Error::new(ErrorKind::NotLeader, "this master does not lead"));
        }
        if self.journal.is_failed() {
            return Err(self.journal.failure());
        }
        if self.journal.needs_rollback() {
            self.roll_back(g)?;
        }
        Ok(())
    }

    /// Builds a mutation from the current state (ids, time, placement), applies it, queues
    /// it to the journal in sequence order, and returns what it did plus its durability ticket.
    fn submit(&self, build: impl FnOnce(&mut Inner, u64) -> Result<Mutation>) -> Result<(Applied, Ticket)> {
        self.room()?;
        let mut g = lock(&self.inner);
        self.healthy(&mut g)?;
        if let Some(full) = self.journal.no_space() {
            // Found full by a write that failed since: nothing is applied until there is room.
            return Err(full);
        }
        let m = build(&mut g, self.clock.now_ms())?;
        let seq = g.last_seq + 1;
        let bytes = encode_record(seq, &m)?;
        let applied = g.state.apply(&m)?;
        g.last_seq = seq;
        let ticket = self.journal.append(seq, bytes);
        g.since_snapshot += 1;
        if self.config.snapshot_every > 0 && g.since_snapshot >= self.config.snapshot_every {
            self.start_snapshot(&mut g);
        }
        Ok((applied, ticket))
    }

    fn start_snapshot(&self, g: &mut Inner) {
        match encode_snapshot(g.last_seq, g.state.data()) {
            Ok(bytes) => {
                g.since_snapshot = 0;
                // Failures poison the journal; later requests see that.
                drop(self.journal.snapshot(g.last_seq, bytes));
            }
            Err(e) => tracing::error!(error = %e, "snapshot encoding failed"),
        }
    }

    /// Writes a snapshot now and waits for it (and the journal restart) to be durable.
    pub fn snapshot_now(&self) -> Result<u64> {
        let ticket = {
            let mut g = lock(&self.inner);
            self.healthy(&mut g)?;
            let bytes = encode_snapshot(g.last_seq, g.state.data())?;
            g.since_snapshot = 0;
            self.journal.snapshot(g.last_seq, bytes)
        };
        ticket.wait()
    }

    /// A read of the state, valid once everything it could have observed is durable.
    fn read<T>(&self, f: impl FnOnce(&State) -> Result<T>) -> Result<Pending<T>> {
        let mut g = lock(&self.inner);
        self.healthy(&mut g)?;
        let value = f(&g.state)?;
        Ok(Pending { value, ticket: self.read_ticket(g.last_seq) })
    }

    /// What a read that saw the state up to `last_seq` waits on before it answers.
    fn read_ticket(&self, last_seq: u64) -> Ticket {
        if self.config.read_waits_for_durability { self.journal.wait_for(last_seq) } else { Ticket::Ready(last_seq) }
    }

    fn done<T>(value: T, ticket: Ticket) -> Pending<T> {
        Pending { value, ticket }
    }

    /// Stops the journal writer after flushing what is queued.
    pub fn shutdown(&self) {
        self.journal.shutdown();
    }
}
