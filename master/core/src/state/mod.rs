//! The master's state machine: no I/O, no clock. `apply` is the only way to change it, and it
//! either changes nothing (returning an error) or applies the whole mutation.

mod blocks;
mod compose;
mod mounts;
mod mutation;
mod namespace;
mod policy;
mod replacing;
mod shared;
mod types;
mod ufs;
pub mod v1;
pub mod v2;
pub mod v3;
pub mod v4;
mod view;
mod workers;

pub use blocks::{BlockSummary, WorkerBlocks};
pub use mounts::key_of;
pub use mutation::{Applied, Mutation};
pub use policy::{CachePolicy, parse_duration};
pub use types::{
    BlockId, BlockInfo, Expect, FileBody, FileState, Inode, InodeBody, InodeId, MountEntry, MountMode, MountOptions,
    ROOT_ID, Revocation, StateData, UfsObject, Worker, WorkerId,
};
pub use ufs::{ObjectCopy, PendingExport};
pub use view::{DirEntry, EntryKind, EntryStat, ListPage, OpenFile, PlacedBlock, Tail};

use crate::error::{Error, ErrorKind, Result};
use crate::path::CvPath;

/// The master's in-memory state: the durable [`StateData`] plus derived, rebuildable values.
#[derive(Debug, Clone, Default)]
pub struct State {
    data: StateData,
    /// Bumped whenever the set of live worker shards changes, so placement knows to rebuild.
    live_epoch: u64,
    /// Bumped by every mutation that can change which files await export (not kept: a
    /// reader only compares it with the value it saw before).
    exports_epoch: u64,
    /// Which files share blocks, and a copy of each object (`shared.rs`).
    shared: shared::Shared,
    /// Files being written to replace another, by the directory they will be published in
    /// (`replacing.rs`).
    replacing: replacing::Replacing,
    /// Each mount's cache-mode options, parsed when the mount was applied or the state loaded.
    policies: std::collections::BTreeMap<String, Result<CachePolicy>>,
}

impl State {
    pub fn new() -> Self {
        Self::default()
    }

    /// Rebuilds a state from snapshot data.
    pub fn from_data(data: StateData) -> Self {
        let policies = data.mounts.iter().map(|(p, m)| (p.clone(), CachePolicy::of(m))).collect();
        let mut st = Self {
            data,
            live_epoch: 1,
            exports_epoch: 0,
            shared: Default::default(),
            replacing: Default::default(),
            policies,
        };
        st.rebuild_shared();
        st.rebuild_replacing();
        st
    }

    pub fn data(&self) -> &StateData {
        &self.data
    }

    pub fn live_epoch(&self) -> u64 {
        self.live_epoch
    }

    /// The id the next created file should take.
    pub fn next_inode_id(&self) -> InodeId {
        self.data.next_inode
    }

    pub fn next_block_id(&self) -> BlockId {
        self.data.next_block
    }

    pub fn next_worker_id(&self) -> WorkerId {
        self.data.next_worker
    }

    pub fn next_version(&self) -> u64 {
        self.data.next_version
    }

    /// Applies one mutation atomically: on error the state is unchanged.
    pub fn apply(&mut self, m: &Mutation) -> Result<Applied> {
        let applied = self.apply_inner(m)?;
        if m.may_change_exports() {
            self.exports_epoch += 1;
        }
        Ok(applied)
    }

    /// Changes whenever the result of [`State::pending_exports`] may have changed, so a
    /// caller that scanned before can tell whether scanning again could find anything new.
    pub fn exports_epoch(&self) -> u64 {
        self.exports_epoch
    }

    fn apply_inner(&mut self, m: &Mutation) -> Result<Applied> {
        match m {
            Mutation::Mkdir { path, parents, mode, mtime } => self.mkdir(&parse(path)?, *parents, *mode, *mtime),
            Mutation::Create { path, overwrite, file_id, version, mode, mtime, request_id } => {
                let applied = self.create(&parse(path)?, *overwrite, false, *file_id, *version, *mode, *mtime)?;
                if *request_id != 0 {
                    self.data.creates.insert(*file_id, *request_id);
                }
                Ok(applied)
            }
            Mutation::Replace { path, file_id, version, mode, mtime, request_id } => {
                let applied = self.create(&parse(path)?, true, true, *file_id, *version, *mode, *mtime)?;
                if *request_id != 0 {
                    self.data.creates.insert(*file_id, *request_id);
                }
                Ok(applied)
            }
            Mutation::AddBlock { file_id, block_id, worker, shard, replicas } => {
                self.add_block(*file_id, *block_id, *worker, *shard, replicas)
            }
            Mutation::Complete { file_id, length, block_lens, mtime } => {
                self.complete(*file_id, *length, block_lens, *mtime, None)
            }
            Mutation::CompleteIf { file_id, length, block_lens, mtime, expect } => {
                self.complete(*file_id, *length, block_lens, *mtime, Some(*expect))
            }
            Mutation::Abandon { file_id, mtime } => self.abandon(*file_id, *mtime),
            Mutation::Compose { path, sources, file_id, version, mode, mtime } => {
                self.compose(&parse(path)?, sources, *file_id, *version, *mode, *mtime)
            }
            Mutation::Rename { src, dst, mtime } => self.rename(&parse(src)?, &parse(dst)?, *mtime),
            Mutation::Delete { path, recursive, mtime } => self.delete(&parse(path)?, *recursive, *mtime),
            Mutation::Mount { path, ufs_url, mode, options } => self.mount(&parse(path)?, ufs_url, *mode, options),
            Mutation::Unmount { path } => self.unmount(&parse(path)?),
            Mutation::RegisterWorker { worker_id, host, shard_ports, capacity, now, zone } => {
                self.register_worker(*worker_id, host, shard_ports, *capacity, *now, zone)
            }
            Mutation::Heartbeat { worker_id, now, capacity, used, added, removed } => {
                self.heartbeat(*worker_id, *now, *capacity, *used, added, removed)
            }
            Mutation::WorkersLost { worker_ids, now } => self.workers_lost(worker_ids, *now),
            Mutation::UfsFile { path, object, length, block_size, placement, mtime } => {
                self.ufs_file(&parse(path)?, object, *length, *block_size, placement, *mtime)
            }
            Mutation::Free { path } => self.free(&parse(path)?),
            Mutation::Exported { file_id, version, object } => self.exported(*file_id, *version, object),
            Mutation::Remove { path, recursive, mtime } => self.remove(&parse(path)?, *recursive, *mtime),
            Mutation::RenameObjects { src, dst, mtime, objects } => {
                self.rename_objects(&parse(src)?, &parse(dst)?, *mtime, objects)
            }
            Mutation::ObjectsDeleted { mount, keys } => Ok(self.objects_deleted(mount, keys)),
            Mutation::ObjectsQueued { mount, keys } => self.objects_queued(mount, keys),
            Mutation::CopiesAdded { worker_id, blocks } => self.copies_added(*worker_id, blocks),
            Mutation::CopiesDropped { copies } => Ok(self.copies_dropped(copies)),
            Mutation::CopiesMissing { worker_id, blocks } => {
                blocks.iter().for_each(|b| self.copy_gone(*worker_id, *b));
                Ok(Applied::Done)
            }
            Mutation::Drain { worker_id, draining } => self.drain(*worker_id, *draining),
            Mutation::ReplaceBlock { file_id, index, block_id, worker, shard, replicas } => {
                self.replace_block(*file_id, *index, *block_id, *worker, *shard, replicas)
            }
            Mutation::AddBlockTimed { file_id, block_id, worker, shard, replicas, mtime } => {
                let applied = self.add_block(*file_id, *block_id, *worker, *shard, replicas)?;
                self.progressed(*file_id, *mtime);
                Ok(applied)
            }
            Mutation::ReplaceBlockTimed { file_id, index, block_id, worker, shard, replicas, mtime } => {
                let applied = self.replace_block(*file_id, *index, *block_id, *worker, *shard, replicas)?;
                self.progressed(*file_id, *mtime);
                Ok(applied)
            }
            Mutation::UfsFileShared { path, object, length, mtime, shares } => {
                self.ufs_file_shared(&parse(path)?, object, *length, *mtime, *shares)
            }
            Mutation::Revoke(r) => Ok(self.revoke(r)),
        }
    }
}

impl State {
    /// Records a revocation; the list's generation moves only if it changed. A second
    /// revocation of a name moves its moment later (covering certificates issued since).
    fn revoke(&mut self, r: &Revocation) -> Applied {
        let key = r.key();
        let changed = match self.data.revoked.get(&key) {
            None => true,
            Some(old) => r.serial.is_empty() && r.issued_before > old.issued_before,
        };
        if changed {
            self.data.revoked.insert(key, r.clone());
            self.data.revoked_generation += 1;
        }
        Applied::Done
    }
}

fn parse(raw: &str) -> Result<CvPath> {
    Ok(CvPath::parse(raw)?)
}

fn err<T>(kind: ErrorKind, context: impl Into<String>) -> Result<T> {
    Err(Error::new(kind, context))
}

#[cfg(test)]
mod tests;
