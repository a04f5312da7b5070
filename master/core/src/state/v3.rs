//! Format version 3 of the journal records and the snapshot, frozen: every later build reads
//! them (master/core/FORMAT.md). Version 4 added replicas (`BlockInfo.replicas`,
//! `AddBlock.replicas`), worker zones and drains (`Worker.zone`, `Worker.draining`,
//! `RegisterWorker.zone`) and the `CopiesAdded`, `CopiesDropped` and `Drain` mutations; inodes,
//! mounts and objects did not change, so those types are shared. Versions 1 and 2 convert
//! through this one. Before changing any shared type, copy its version-3 form here.

use super::mutation::Mutation as Current;
use super::types::{
    BlockId, BlockInfo as CurrentBlock, Inode, InodeId, MountEntry, MountMode, UfsObject, Worker as CurrentWorker,
    WorkerId,
};
use std::collections::{BTreeMap, BTreeSet};

#[derive(Debug, Clone, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub enum Mutation {
    Mkdir {
        path: String,
        parents: bool,
        mode: u32,
        mtime: u64,
    },
    Create {
        path: String,
        overwrite: bool,
        file_id: InodeId,
        version: u64,
        mode: u32,
        mtime: u64,
    },
    AddBlock {
        file_id: InodeId,
        block_id: BlockId,
        worker: WorkerId,
        shard: u16,
    },
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
        options: Vec<(String, String)>,
    },
    Unmount {
        path: String,
    },
    RegisterWorker {
        worker_id: WorkerId,
        host: String,
        shard_ports: Vec<u16>,
        capacity: u64,
        now: u64,
    },
    Heartbeat {
        worker_id: WorkerId,
        now: u64,
        capacity: u64,
        used: u64,
        added: Vec<BlockId>,
        removed: Vec<BlockId>,
    },
    WorkersLost {
        worker_ids: Vec<WorkerId>,
        now: u64,
    },
    UfsFile {
        path: String,
        object: UfsObject,
        length: u64,
        block_size: u64,
        placement: Vec<(WorkerId, u16)>,
        mtime: u64,
    },
    Free {
        path: String,
    },
    Exported {
        file_id: InodeId,
        version: u64,
        object: UfsObject,
    },
    Remove {
        path: String,
        recursive: bool,
        mtime: u64,
    },
    RenameObjects {
        src: String,
        dst: String,
        mtime: u64,
        objects: Vec<(InodeId, u64, UfsObject)>,
    },
    ObjectsDeleted {
        mount: String,
        keys: Vec<String>,
    },
    ObjectsQueued {
        mount: String,
        keys: Vec<String>,
    },
}

impl From<Mutation> for Current {
    fn from(m: Mutation) -> Current {
        match m {
            Mutation::Mkdir { path, parents, mode, mtime } => Current::Mkdir { path, parents, mode, mtime },
            Mutation::Create { path, overwrite, file_id, version, mode, mtime } => {
                Current::Create { path, overwrite, file_id, version, mode, mtime, request_id: 0 }
            }
            Mutation::AddBlock { file_id, block_id, worker, shard } => {
                Current::AddBlock { file_id, block_id, worker, shard, replicas: Vec::new() }
            }
            Mutation::Complete { file_id, length, block_lens, mtime } => {
                Current::Complete { file_id, length, block_lens, mtime }
            }
            Mutation::Rename { src, dst, mtime } => Current::Rename { src, dst, mtime },
            Mutation::Delete { path, recursive, mtime } => Current::Delete { path, recursive, mtime },
            Mutation::Mount { path, ufs_url, mode, options } => {
                Current::Mount { path, ufs_url, mode, options: options.into() }
            }
            Mutation::Unmount { path } => Current::Unmount { path },
            Mutation::RegisterWorker { worker_id, host, shard_ports, capacity, now } => {
                Current::RegisterWorker { worker_id, host, shard_ports, capacity, now, zone: String::new() }
            }
            Mutation::Heartbeat { worker_id, now, capacity, used, added, removed } => {
                Current::Heartbeat { worker_id, now, capacity, used, added, removed }
            }
            Mutation::WorkersLost { worker_ids, now } => Current::WorkersLost { worker_ids, now },
            Mutation::UfsFile { path, object, length, block_size, placement, mtime } => {
                Current::UfsFile { path, object, length, block_size, placement, mtime }
            }
            Mutation::Free { path } => Current::Free { path },
            Mutation::Exported { file_id, version, object } => Current::Exported { file_id, version, object },
            Mutation::Remove { path, recursive, mtime } => Current::Remove { path, recursive, mtime },
            Mutation::RenameObjects { src, dst, mtime, objects } => Current::RenameObjects { src, dst, mtime, objects },
            Mutation::ObjectsDeleted { mount, keys } => Current::ObjectsDeleted { mount, keys },
            Mutation::ObjectsQueued { mount, keys } => Current::ObjectsQueued { mount, keys },
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub struct BlockInfo {
    pub file: InodeId,
    pub index: u32,
    pub len: u64,
    pub worker: WorkerId,
    pub shard: u16,
    pub reported: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub struct Worker {
    pub id: WorkerId,
    pub host: String,
    pub shard_ports: Vec<u16>,
    pub capacity: u64,
    pub used: u64,
    pub last_heartbeat: u64,
    pub live: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub struct StateData {
    pub inodes: BTreeMap<InodeId, Inode>,
    pub blocks: BTreeMap<BlockId, BlockInfo>,
    pub mounts: BTreeMap<String, MountEntry>,
    pub workers: BTreeMap<WorkerId, Worker>,
    pub pending_deletes: BTreeMap<WorkerId, BTreeSet<BlockId>>,
    pub next_inode: InodeId,
    pub next_block: BlockId,
    pub next_worker: WorkerId,
    pub next_version: u64,
    pub ufs_files: BTreeMap<InodeId, UfsObject>,
    pub pending_unpins: BTreeMap<WorkerId, BTreeSet<BlockId>>,
    pub pending_object_deletes: BTreeMap<String, BTreeSet<String>>,
}

impl From<BlockInfo> for CurrentBlock {
    fn from(b: BlockInfo) -> CurrentBlock {
        let BlockInfo { file, index, len, worker, shard, reported } = b;
        CurrentBlock { file, index, len, worker, shard, reported, replicas: Vec::new() }
    }
}

impl From<Worker> for CurrentWorker {
    fn from(w: Worker) -> CurrentWorker {
        let Worker { id, host, shard_ports, capacity, used, last_heartbeat, live } = w;
        CurrentWorker {
            id,
            host,
            shard_ports,
            capacity,
            used,
            last_heartbeat,
            live,
            zone: String::new(),
            draining: false,
        }
    }
}

impl From<StateData> for super::v4::StateData {
    fn from(d: StateData) -> super::v4::StateData {
        super::v4::StateData {
            inodes: d.inodes,
            blocks: d.blocks.into_iter().map(|(id, b)| (id, b.into())).collect(),
            mounts: d.mounts,
            workers: d.workers.into_iter().map(|(id, w)| (id, w.into())).collect(),
            pending_deletes: d.pending_deletes,
            next_inode: d.next_inode,
            next_block: d.next_block,
            next_worker: d.next_worker,
            next_version: d.next_version,
            ufs_files: d.ufs_files,
            pending_unpins: d.pending_unpins,
            pending_object_deletes: d.pending_object_deletes,
            creates: BTreeMap::new(),
        }
    }
}
