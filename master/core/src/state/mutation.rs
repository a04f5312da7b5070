//! Mutations: every change to the master's state is one of these values. Anything that is not a
//! pure function of the prior state (clock readings, placement, new ids) is chosen by the caller
//! and carried in the value, so replaying the journal rebuilds exactly the same state.

use super::types::{BlockId, Expect, InodeId, MountMode, MountOptions, UfsObject, WorkerId};

#[derive(Debug, Clone, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub enum Mutation {
    /// Creates a directory; with `parents`, also missing ancestors (ids from the state counter).
    Mkdir {
        path: String,
        parents: bool,
        mode: u32,
        mtime: u64,
    },
    /// Creates an empty file in state Writing; `overwrite` replaces an existing file.
    /// `request_id` is the client's id of the call (format 4; 0: none), kept while the file is
    /// being written so that a retry of it is answered with this file.
    Create {
        path: String,
        overwrite: bool,
        file_id: InodeId,
        version: u64,
        mode: u32,
        mtime: u64,
        request_id: u64,
    },
    /// Appends a block, already placed on (worker, shard), with copies on `replicas` (the
    /// same shard index on each; format 4).
    AddBlock {
        file_id: InodeId,
        block_id: BlockId,
        worker: WorkerId,
        shard: u16,
        replicas: Vec<WorkerId>,
    },
    /// Fixes the file's length and its blocks' lengths; the file becomes readable.
    Complete {
        file_id: InodeId,
        length: u64,
        block_lens: Vec<u64>,
        mtime: u64,
    },
    Rename {
        src: String,
        dst: String,
        mtime: u64,
    },
    Delete {
        path: String,
        recursive: bool,
        mtime: u64,
    },
    Mount {
        path: String,
        ufs_url: String,
        mode: MountMode,
        options: MountOptions,
    },
    Unmount {
        path: String,
    },
    /// Registers a new worker or re-registers a known one (same id): it becomes live.
    RegisterWorker {
        worker_id: WorkerId,
        host: String,
        shard_ports: Vec<u16>,
        capacity: u64,
        now: u64,
        /// Failure-domain label (format 4).
        zone: String,
    },
    Heartbeat {
        worker_id: WorkerId,
        now: u64,
        capacity: u64,
        used: u64,
        added: Vec<BlockId>,
        removed: Vec<BlockId>,
    },
    /// Marks workers lost (their heartbeats stopped).
    WorkersLost {
        worker_ids: Vec<WorkerId>,
        now: u64,
    },
    /// Records a complete file that is a copy of `object` (cache mode), replacing whatever file
    /// was at `path` and creating missing parent directories. Its blocks of `block_size` bytes
    /// go to `placement` (one (worker, shard) per block); ids and the version come from the
    /// state's counters.
    UfsFile {
        path: String,
        object: UfsObject,
        length: u64,
        block_size: u64,
        placement: Vec<(WorkerId, u16)>,
        mtime: u64,
    },
    /// Drops the cached blocks of the object copies at or under `path`; metadata stays and the
    /// next read fetches them again.
    Free {
        path: String,
    },
    /// File `file_id` at `version` is now stored as `object` (exported in fs mode, written
    /// through in cache mode): it becomes a copy of that object and its blocks may be evicted.
    Exported {
        file_id: InodeId,
        version: u64,
        object: UfsObject,
    },
    /// A delete through cv (format 3): as `Delete`, and the objects behind the removed copies
    /// are queued for deletion from their stores.
    Remove {
        path: String,
        recursive: bool,
        mtime: u64,
    },
    /// A rename under a mount whose objects were copied to their new keys (format 3): as
    /// `Rename`, and in the same step each (file id, version, copy) whose file is unchanged
    /// becomes a copy of its new object, the old one queued for deletion and the new one
    /// taken off the queue. A file that changed since keeps its old object.
    RenameObjects {
        src: String,
        dst: String,
        mtime: u64,
        objects: Vec<(InodeId, u64, UfsObject)>,
    },
    /// These queued object deletes are done (format 3).
    ObjectsDeleted {
        mount: String,
        keys: Vec<String>,
    },
    /// Queues deletes of objects about to be written for a rename (format 3): a crash before
    /// the files are pointed at them (`RenameObjects`, which takes each off the queue) leaves no stray
    /// copy behind.
    ObjectsQueued {
        mount: String,
        keys: Vec<String>,
    },
    /// Worker `worker_id` now holds a copy of each of these blocks, made on the master's order
    /// (format 4): each counts as one more copy. A block gone meanwhile is skipped.
    CopiesAdded {
        worker_id: WorkerId,
        blocks: Vec<BlockId>,
    },
    /// These copies no longer count (format 4): each (block, worker) leaves the block's
    /// copies and its worker is told to delete it. The owner's copy leaving hands the block
    /// to its first replica. The last copy of a block never leaves.
    CopiesDropped {
        copies: Vec<(BlockId, WorkerId)>,
    },
    /// A worker's full block report lacks these blocks of complete files, which the master
    /// counted as copies there (format 4; its disk was wiped or lost them): as if it had
    /// reported each removed.
    CopiesMissing {
        worker_id: WorkerId,
        blocks: Vec<BlockId>,
    },
    /// Block `index` of a file being written is replaced by a new block (format 4): its writer
    /// could not store the old one on one of its workers. The old block is dropped (a delete
    /// queued for each copy); the new one is placed as `AddBlock` places.
    ReplaceBlock {
        file_id: InodeId,
        index: u32,
        block_id: BlockId,
        worker: WorkerId,
        shard: u16,
        replicas: Vec<WorkerId>,
    },
    /// Starts (or ends) draining a worker (format 4).
    Drain {
        worker_id: WorkerId,
        draining: bool,
    },
    /// As `UfsFile`, for an object of which file `shares` is a complete copy at the same
    /// version (another mount of the same store prefix): the new file lists `shares`' blocks
    /// instead of new ones, so the object is cached once (format 4; added last, so records
    /// written before it decode as they did).
    UfsFileShared {
        path: String,
        object: UfsObject,
        length: u64,
        mtime: u64,
        shares: InodeId,
    },
    /// As `Create` with `overwrite`, except that an existing file stays until this one is
    /// complete: its completion publishes it at the path in the same step, and a writer that
    /// gives up (`Abandon`) leaves the old file as it was (atomic replace; added at the end of
    /// format 4, as the two below). `Create` keeps replacing at once, so records written
    /// before replay as they did.
    Replace {
        path: String,
        file_id: InodeId,
        version: u64,
        mode: u32,
        mtime: u64,
        request_id: u64,
    },
    /// As `Complete`, only if the file's path holds what `expect` says at this step, so that of
    /// two writers expecting the same thing exactly one publishes.
    CompleteIf {
        file_id: InodeId,
        length: u64,
        block_lens: Vec<u64>,
        mtime: u64,
        expect: Expect,
    },
    /// Removes file `file_id` if it is still being written (its writer gave up, or its write
    /// lease ran out): by id, so the version its path shows, which it would have replaced, stays.
    /// A file complete or gone is left as it is.
    Abandon {
        file_id: InodeId,
        mtime: u64,
    },
    /// Makes `path` a new complete file (`file_id`, `version`) listing the blocks of the
    /// complete files `sources`, in order, replacing a file at `path` in the same step (added
    /// at the end of format 4). Sources and target outside mounts only. A block more than one
    /// file lists stays while any of them does.
    Compose {
        path: String,
        sources: Vec<InodeId>,
        file_id: InodeId,
        version: u64,
        mode: u32,
        mtime: u64,
    },
    /// As `AddBlock`, and the file's mtime becomes `mtime`: its writer's last progress, from
    /// which every master, a new leader too, counts the write lease (added at the end of format
    /// 4; records written before hold `AddBlock`, which leaves the mtime as it is).
    AddBlockTimed {
        file_id: InodeId,
        block_id: BlockId,
        worker: WorkerId,
        shard: u16,
        replicas: Vec<WorkerId>,
        mtime: u64,
    },
    /// As `ReplaceBlock`, and the file's mtime becomes `mtime`, as `AddBlockTimed`.
    ReplaceBlockTimed {
        file_id: InodeId,
        index: u32,
        block_id: BlockId,
        worker: WorkerId,
        shard: u16,
        replicas: Vec<WorkerId>,
        mtime: u64,
    },
    /// Records a revoked certificate (added at the end of format 4; the list is in snapshots
    /// from format 5): by serial, or every certificate of a common name valid from a moment or
    /// earlier ([`super::Revocation`]).
    Revoke(super::Revocation),
}

impl Mutation {
    /// A short name for logs and metrics.
    pub fn name(&self) -> &'static str {
        match self {
            Mutation::Mkdir { .. } => "mkdir",
            Mutation::Create { .. } => "create",
            Mutation::AddBlock { .. } | Mutation::AddBlockTimed { .. } => "add_block",
            Mutation::Complete { .. } => "complete",
            Mutation::Rename { .. } => "rename",
            Mutation::Delete { .. } => "delete",
            Mutation::Mount { .. } => "mount",
            Mutation::Unmount { .. } => "unmount",
            Mutation::RegisterWorker { .. } => "register_worker",
            Mutation::Heartbeat { .. } => "heartbeat",
            Mutation::WorkersLost { .. } => "workers_lost",
            Mutation::UfsFile { .. } => "ufs_file",
            Mutation::Free { .. } => "free",
            Mutation::Exported { .. } => "exported",
            Mutation::Remove { .. } => "remove",
            Mutation::RenameObjects { .. } => "rename_objects",
            Mutation::ObjectsDeleted { .. } => "objects_deleted",
            Mutation::ObjectsQueued { .. } => "objects_queued",
            Mutation::CopiesAdded { .. } => "copies_added",
            Mutation::CopiesDropped { .. } => "copies_dropped",
            Mutation::CopiesMissing { .. } => "copies_missing",
            Mutation::ReplaceBlock { .. } | Mutation::ReplaceBlockTimed { .. } => "replace_block",
            Mutation::Drain { .. } => "drain",
            Mutation::UfsFileShared { .. } => "ufs_file_shared",
            Mutation::Replace { .. } => "replace",
            Mutation::CompleteIf { .. } => "complete_if",
            Mutation::Abandon { .. } => "abandon",
            Mutation::Compose { .. } => "compose",
            Mutation::Revoke(_) => "revoke",
        }
    }

    /// Whether applying it can change which files await export: a file completed, replaced,
    /// moved, removed or exported, or a mount added or removed. Heartbeats and worker
    /// changes, blocks added to a file being written, frees and the object delete queue
    /// cannot. Exhaustive, so a new mutation has to be decided here.
    pub fn may_change_exports(&self) -> bool {
        match self {
            Mutation::Create { .. }
            | Mutation::Complete { .. }
            | Mutation::Rename { .. }
            | Mutation::Delete { .. }
            | Mutation::Mount { .. }
            | Mutation::Unmount { .. }
            | Mutation::UfsFile { .. }
            | Mutation::UfsFileShared { .. }
            | Mutation::Replace { .. }
            | Mutation::CompleteIf { .. }
            | Mutation::Compose { .. }
            | Mutation::Exported { .. }
            | Mutation::Remove { .. }
            | Mutation::RenameObjects { .. } => true,
            Mutation::Mkdir { .. }
            | Mutation::AddBlock { .. }
            | Mutation::RegisterWorker { .. }
            | Mutation::Heartbeat { .. }
            | Mutation::WorkersLost { .. }
            | Mutation::Free { .. }
            | Mutation::ObjectsDeleted { .. }
            | Mutation::ObjectsQueued { .. }
            | Mutation::CopiesAdded { .. }
            | Mutation::CopiesDropped { .. }
            | Mutation::CopiesMissing { .. }
            | Mutation::ReplaceBlock { .. }
            | Mutation::AddBlockTimed { .. }
            | Mutation::ReplaceBlockTimed { .. }
            | Mutation::Drain { .. }
            | Mutation::Revoke(_)
            | Mutation::Abandon { .. } => false,
        }
    }
}

/// What applying a mutation produced, for the reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Applied {
    Done,
    Created {
        file_id: InodeId,
        version: u64,
    },
    BlockAdded {
        block_id: BlockId,
        index: u32,
    },
    /// Blocks queued for deletion on their workers.
    Deleted {
        blocks: usize,
    },
    WorkerRegistered {
        worker_id: WorkerId,
    },
    /// Block deletes handed to the worker in this heartbeat's reply.
    Heartbeat {
        delete_blocks: Vec<BlockId>,
        unpin_blocks: Vec<BlockId>,
    },
    /// Blocks of object copies queued for dropping.
    Freed {
        files: u64,
        blocks: u64,
        skipped: u64,
    },
    /// Blocks whose owner was just marked lost.
    WorkersLost {
        missing_blocks: Vec<BlockId>,
    },
}
