//! Format version 4 of the snapshot, frozen: every later build reads it (master/core/FORMAT.md).
//! Version 5 added the revoked certificates (`StateData.revoked`, `revoked_generation`);
//! nothing inside the state changed, so only its top-level struct is copied here, and version 4
//! journal records are still written (the `Revoke` mutation was added at their end). Versions
//! 1 to 3 convert through this one. Before changing any type it shares, copy its version-4
//! form here.

use super::types::{
    BlockId, BlockInfo, Inode, InodeId, MountEntry, StateData as CurrentData, UfsObject, Worker, WorkerId,
};
use std::collections::{BTreeMap, BTreeSet};

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
    pub creates: BTreeMap<InodeId, u64>,
}

impl From<StateData> for CurrentData {
    fn from(d: StateData) -> CurrentData {
        CurrentData {
            inodes: d.inodes,
            blocks: d.blocks,
            mounts: d.mounts,
            workers: d.workers,
            pending_deletes: d.pending_deletes,
            next_inode: d.next_inode,
            next_block: d.next_block,
            next_worker: d.next_worker,
            next_version: d.next_version,
            ufs_files: d.ufs_files,
            pending_unpins: d.pending_unpins,
            pending_object_deletes: d.pending_object_deletes,
            creates: d.creates,
            revoked: BTreeMap::new(),
            revoked_generation: 0,
        }
    }
}
