//! Typed master configuration and the injected clock.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

#[derive(Debug, Clone)]
pub struct MasterConfig {
    /// Holds `journal` and `snapshot` (used by [`crate::MasterCore::start_dir`]).
    pub journal_dir: PathBuf,
    /// A worker silent for longer is marked lost by `tick`.
    pub heartbeat_timeout: Duration,
    /// Byte budget of the tail cache.
    pub tail_budget_bytes: u64,
    /// Tail size for files whose format is not recognised.
    pub default_tail_bytes: u64,
    /// Largest block a client may write; `complete` refuses longer blocks.
    pub block_size: u64,
    /// Write a snapshot (and restart the journal) after this many records; 0 = never.
    pub snapshot_every: u64,
    /// Virtual nodes per worker shard on the placement ring.
    pub vnodes_per_shard: u32,
    /// Most bytes the journal writer puts into one write + sync.
    pub group_commit_max_bytes: usize,
    /// Reads wait until every mutation they could observe is durable, so nothing a reader
    /// saw can vanish in a crash. Off trades that for lower read latency under writes.
    pub read_waits_for_durability: bool,
    /// A file being written whose writer has not created it, added a block to it or tried to
    /// complete it for this long is removed by `expire_writers` (the writer died, or lost the
    /// master for good): no half-written entry stays behind for ever.
    pub write_lease: Duration,
    /// The most two masters' clocks may differ (`cvctl doctor` fails beyond 3 s). A new
    /// leader counts a write lease from the writer's last progress recorded in the state, by
    /// the old leader's clock, plus this: a live writer is never cut short by a clock ahead.
    pub clock_skew: Duration,
    /// Copies of every block whose only copy is in cv (files outside mounts, fs-mode files not
    /// yet exported), each on another worker: in zones, then hosts, as far apart as the
    /// cluster allows. Fewer when fewer workers can take them; the re-replication makes up
    /// the difference when they can.
    pub replicas: usize,
    /// A lost worker's copies still count for this long (it may come back with them); after
    /// it, the blocks are copied again elsewhere.
    pub replica_grace: Duration,
}

impl Default for MasterConfig {
    fn default() -> Self {
        Self {
            journal_dir: PathBuf::from("cv-master"),
            heartbeat_timeout: Duration::from_secs(30),
            tail_budget_bytes: 1 << 30,
            default_tail_bytes: 64 << 10,
            block_size: 4 << 20,
            snapshot_every: 100_000,
            vnodes_per_shard: 64,
            group_commit_max_bytes: 4 << 20,
            read_waits_for_durability: true,
            write_lease: Duration::from_secs(300),
            clock_skew: Duration::from_secs(3),
            replicas: 2,
            replica_grace: Duration::from_secs(60),
        }
    }
}

/// Milliseconds since the Unix epoch, injected so tests and the simulation control time.
pub trait Clock: Send + Sync + std::fmt::Debug {
    fn now_ms(&self) -> u64;
}

#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
    }
}

/// A clock that moves only when told to.
#[derive(Debug, Default, Clone)]
pub struct ManualClock(Arc<AtomicU64>);

impl ManualClock {
    pub fn new(start_ms: u64) -> Self {
        Self(Arc::new(AtomicU64::new(start_ms)))
    }

    pub fn set(&self, ms: u64) {
        self.0.store(ms, Ordering::Release);
    }

    pub fn advance(&self, d: Duration) {
        self.0.fetch_add(d.as_millis() as u64, Ordering::AcqRel);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> u64 {
        self.0.load(Ordering::Acquire)
    }
}
