//! Cluster administration: the report behind `cvctl report`.

use super::{TierCounters, check_count, check_str, no_limits};
use crate::error::WireError;
use crate::kinds::CheckLimits;
use crate::limits::Limits;
use rkyv::{Archive, Deserialize, Serialize};

/// Ask the master for the cluster report.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct Report {}

/// One worker as the master sees it.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct WorkerInfo {
    /// Worker id.
    pub worker_id: u64,
    /// Host.
    pub host: String,
    /// Shard ports.
    pub shard_ports: Vec<u16>,
    /// Capacity in bytes.
    pub capacity: u64,
    /// Bytes in use.
    pub used: u64,
    /// False once heartbeats stopped for longer than the timeout.
    pub live: bool,
    /// Milliseconds since its last heartbeat.
    pub last_heartbeat_age_ms: u64,
    /// Memory tier counters from its last heartbeat.
    pub memory: TierCounters,
    /// Disk tier counters from its last heartbeat.
    pub disk: TierCounters,
    /// Blocks the master places on it.
    pub blocks: u64,
    /// Of those, blocks whose only copy is there (no object-store copy): what a drain or a
    /// re-replication must move before the worker can go.
    pub only_copies: u64,
    /// Bytes in those blocks.
    pub only_copy_bytes: u64,
    /// Its failure-domain label (empty: none).
    pub zone: String,
    /// Being drained: it takes no new blocks, and its copies of cv-only blocks are made
    /// elsewhere, then dropped from it.
    pub draining: bool,
    /// cv-only blocks with a copy here that have fewer counted copies than the cluster's
    /// `replicas`: the copies owed.
    pub replicas_owed: u64,
    /// Bytes of the cv-only blocks that need a copy elsewhere before this worker can go (all
    /// of them are moved by a drain).
    pub bytes_to_move: u64,
}

/// Drain a worker (or stop draining it), answered by `Done`: it takes no new blocks, and the
/// master copies its cv-only blocks to other workers, then drops them from it.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct DrainWorker {
    /// The worker.
    pub worker_id: u64,
    /// Drain (true) or take it back into service (false).
    pub drain: bool,
}

/// Reply to [`Report`].
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct ReportOk {
    /// Registered workers.
    pub workers: Vec<WorkerInfo>,
    /// Files and directories in the namespace.
    pub inodes: u64,
    /// Blocks in the block map.
    pub blocks: u64,
    /// Tail cache bytes in use and budget.
    pub tail_bytes: u64,
    /// Tail cache budget.
    pub tail_budget: u64,
    /// Tail cache hits.
    pub tail_hits: u64,
    /// Tail cache misses.
    pub tail_misses: u64,
    /// Files under fs-mode mounts waiting to be exported to object storage.
    pub export_backlog: u64,
    /// Bytes in those files.
    pub export_backlog_bytes: u64,
    /// How long the oldest of them has waited, in milliseconds (0 if none).
    pub export_lag_ms: u64,
    /// Files exported since the master started.
    pub exported: u64,
    /// Exports that failed since the master started (each is retried).
    pub export_failures: u64,
    /// Files with a block whose only copy was on a lost worker (every one of them counted).
    pub lost_files: u64,
    /// Blocks whose only copy was on a lost worker.
    pub lost_blocks: u64,
    /// Paths of the first of those files (at most 100, in path order).
    pub lost_paths: Vec<String>,
    /// The cluster's `replicas` setting: copies of every cv-only block.
    pub replicas: u32,
    /// Files with a cv-only block that has fewer copies than that (but at least one).
    pub under_replicated_files: u64,
    /// Such blocks.
    pub under_replicated_blocks: u64,
    /// Paths of the first of those files (at most 100, in path order).
    pub under_replicated_paths: Vec<String>,
}

impl CheckLimits for ArchivedReportOk {
    fn check_limits(&self, l: &Limits) -> Result<(), WireError> {
        check_count(self.workers.len(), l, "report.workers")?;
        self.workers.iter().try_for_each(|w| {
            check_str(&w.host, l, "worker.host")?;
            check_str(&w.zone, l, "worker.zone")?;
            check_count(w.shard_ports.len(), l, "worker.shard_ports")
        })?;
        check_count(self.lost_paths.len(), l, "report.lost_paths")?;
        self.lost_paths.iter().try_for_each(|p| super::check_path(p, l, "report.lost_paths"))?;
        check_count(self.under_replicated_paths.len(), l, "report.under_replicated_paths")?;
        self.under_replicated_paths.iter().try_for_each(|p| super::check_path(p, l, "report.under_replicated_paths"))
    }
}

/// Asks a master for its wall-clock time (`cvctl doctor`'s skew check): leases, TTLs and
/// heartbeat ages are judged on the master's clock, so a node far off it misjudges them.
/// Any role may ask. A master older than this kind answers `Malformed` (an unknown kind).
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct MasterTime {}

/// Reply to [`MasterTime`].
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct MasterTimeOk {
    /// The master's clock (the one its leases and TTLs use), in milliseconds since the Unix
    /// epoch, read while it answers.
    pub unix_ms: u64,
}

no_limits!(ArchivedReport, ArchivedDrainWorker, ArchivedMasterTime, ArchivedMasterTimeOk);
