//! Worker registration and heartbeats, worker → master.

use super::{check_count, check_str};
use crate::error::WireError;
use crate::kinds::CheckLimits;
use crate::limits::Limits;
use rkyv::{Archive, Deserialize, Serialize};

/// A worker announces itself and its shards.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct RegisterWorker {
    /// Id from an earlier registration (a restart keeps its id), or `None`.
    pub worker_id: Option<u64>,
    /// Host clients reach the shards at.
    pub host: String,
    /// One UDP port per shard, indexed by shard number.
    pub shard_ports: Vec<u16>,
    /// Storage capacity in bytes.
    pub capacity: u64,
    /// Bytes in use.
    pub used: u64,
    /// Failure-domain label (rack, room); copies of a block go to different zones when workers
    /// carry them. Empty: none.
    pub zone: String,
}

/// Reply to [`RegisterWorker`].
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct RegisterOk {
    /// The worker's id from now on.
    pub worker_id: u64,
    /// How often to send heartbeats, in milliseconds.
    pub heartbeat_ms: u64,
    /// The keys the master signs block capabilities with (since v9).
    pub keys: CapKeys,
}

/// The keys a master signs block capabilities with, as it hands them to its workers (at
/// registration, and in a heartbeat's reply when the set changed: a rotation, another master
/// leading). A worker adds them to the ones it holds and drops each after `not_after_ms`.
/// `Debug` shows ids, never secrets.
#[derive(Archive, Serialize, Deserialize, Clone, Default, PartialEq, Eq)]
pub struct CapKeys {
    /// Names this set; a worker says in each heartbeat which set it holds.
    pub generation: u64,
    /// The keys.
    pub keys: Vec<CapKey>,
}

/// One key of [`CapKeys`].
#[derive(Archive, Serialize, Deserialize, Clone, PartialEq, Eq)]
pub struct CapKey {
    /// The id capabilities name it by.
    pub key_id: u32,
    /// The HMAC-SHA-256 key.
    pub secret: [u8; 32],
    /// No capability signed with it is valid after this, milliseconds since the Unix epoch.
    pub not_after_ms: u64,
}

impl std::fmt::Debug for CapKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CapKey").field("key_id", &self.key_id).field("not_after_ms", &self.not_after_ms).finish()
    }
}

impl std::fmt::Debug for CapKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ids: Vec<u32> = self.keys.iter().map(|k| k.key_id).collect();
        f.debug_struct("CapKeys").field("generation", &self.generation).field("key_ids", &ids).finish()
    }
}

impl std::fmt::Debug for ArchivedCapKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ids: Vec<u32> = self.keys.iter().map(|k| k.key_id.to_native()).collect();
        f.debug_struct("CapKeys").field("generation", &self.generation).field("key_ids", &ids).finish()
    }
}

/// A block a worker holds.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct BlockReport {
    /// Block id.
    pub block_id: u64,
    /// Bytes stored.
    pub len: u64,
    /// Shard holding it.
    pub shard: u16,
}

/// Counters of one cache tier of a worker, summed over its shards.
#[derive(Archive, Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct TierCounters {
    /// Lookups the tier answered.
    pub hits: u64,
    /// Lookups it could not answer.
    pub misses: u64,
    /// Entries it evicted to make room.
    pub evictions: u64,
    /// Bytes held now.
    pub bytes_used: u64,
    /// Bytes it may hold.
    pub capacity: u64,
}

/// Periodic liveness report with block-report deltas since the last one.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct Heartbeat {
    /// Registered id.
    pub worker_id: u64,
    /// Storage capacity in bytes.
    pub capacity: u64,
    /// Bytes in use.
    pub used: u64,
    /// Blocks stored since the previous heartbeat.
    pub added: Vec<BlockReport>,
    /// Blocks dropped (evicted, deleted, corrupt) since the previous heartbeat.
    pub removed: Vec<u64>,
    /// Memory tier counters (cumulative since the worker started).
    pub memory: TierCounters,
    /// Disk tier counters (cumulative since the worker started).
    pub disk: TierCounters,
    /// `added` lists every block the worker holds (its first heartbeat after registering, when
    /// the list fits one heartbeat): the master stops counting copies there that it lacks.
    pub full: bool,
    /// The generation of the capability keys it was handed last (0: none; since v9).
    pub cap_keys: u64,
}

/// Something the master asks a worker to do.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub enum WorkerCommand {
    /// Drop these blocks (their files were deleted).
    DeleteBlocks(Vec<u64>),
    /// The master does not know this worker (it restarted): register again.
    Reregister,
    /// These blocks may be evicted now (their files were exported).
    Unpin(Vec<u64>),
    /// Store a copy of each of these blocks, read from the worker named (re-replication and
    /// drains); the copy shows in a later heartbeat's `added`, which makes it count.
    Copy(Vec<CopyOrder>),
    /// The master's capability keys changed (since v9).
    CapabilityKeys(CapKeys),
}

/// One block to copy from another worker (see [`WorkerCommand::Copy`]).
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct CopyOrder {
    /// Block id (its shard index names the shard to read it from and to store it on).
    pub block_id: u64,
    /// Its length.
    pub len: u64,
    /// The worker holding a copy now.
    pub from_worker: u64,
    /// That copy's shard endpoint.
    pub from: super::ShardAddr,
}

/// Reply to [`Heartbeat`].
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct HeartbeatOk {
    /// Commands to execute, in order.
    pub commands: Vec<WorkerCommand>,
}

impl CheckLimits for ArchivedRegisterWorker {
    fn check_limits(&self, l: &Limits) -> Result<(), WireError> {
        check_str(&self.host, l, "register.host")?;
        check_str(&self.zone, l, "register.zone")?;
        check_count(self.shard_ports.len(), l, "register.shard_ports")
    }
}

impl CheckLimits for ArchivedHeartbeat {
    fn check_limits(&self, l: &Limits) -> Result<(), WireError> {
        check_count(self.added.len(), l, "heartbeat.added")?;
        check_count(self.removed.len(), l, "heartbeat.removed")
    }
}

impl CheckLimits for ArchivedHeartbeatOk {
    fn check_limits(&self, l: &Limits) -> Result<(), WireError> {
        check_count(self.commands.len(), l, "heartbeat_ok.commands")?;
        self.commands.iter().try_for_each(|c| match c {
            ArchivedWorkerCommand::DeleteBlocks(ids) => check_count(ids.len(), l, "delete_blocks"),
            ArchivedWorkerCommand::Unpin(ids) => check_count(ids.len(), l, "unpin"),
            ArchivedWorkerCommand::Copy(orders) => check_count(orders.len(), l, "copy"),
            ArchivedWorkerCommand::Reregister => Ok(()),
            ArchivedWorkerCommand::CapabilityKeys(k) => check_count(k.keys.len(), l, "capability_keys"),
        })
    }
}

impl CheckLimits for ArchivedRegisterOk {
    fn check_limits(&self, l: &Limits) -> Result<(), WireError> {
        check_count(self.keys.keys.len(), l, "register_ok.keys")
    }
}
