//! Blocks shared by copies of the same object: two cache-mode mounts of the same store prefix
//! (or overlapping ones) hold one set of cached blocks per object version, not one per mount.
//!
//! A copy recorded while a complete copy of the same object at the same version exists takes
//! that copy's block ids (`Mutation::UfsFileShared`, chosen by the leader, so replay does not
//! depend on anything but the record). A shared block stays while any file lists it: removing
//! one of its files hands the block to another (`BlockInfo::file`), and only the last one
//! queues its delete. Which files list a block, and which file is a copy of which object, are
//! derived from the durable data and rebuilt from it after a snapshot.

use super::types::{BlockId, FileState, InodeBody, InodeId, UfsObject};
use super::{Applied, State, err};
use crate::error::{ErrorKind, Result};
use crate::path::CvPath;
use std::collections::{BTreeSet, HashMap};

/// Derived from [`super::StateData`]; see the module comment.
#[derive(Debug, Clone, Default)]
pub(super) struct Shared {
    /// Every file listing a block that more than one file lists.
    sharers: HashMap<BlockId, BTreeSet<InodeId>>,
    /// A copy of each object identity (see [`State::object_identity`]); a hint, checked on use.
    by_object: HashMap<String, InodeId>,
}

impl State {
    /// The object a copy stands for, independent of the mount it was reached through: the
    /// store's endpoint, the object's full URL and its version. `None` without a version (no
    /// ETag, mtime or length to tell versions apart) or without its mount.
    pub(super) fn object_identity(&self, o: &UfsObject) -> Option<String> {
        if o.version.is_empty() {
            return None;
        }
        let m = self.data.mounts.get(&o.mount)?;
        let endpoint = m.options.iter().find(|(k, _)| k == "endpoint").map_or("", |(_, v)| v.as_str());
        let url = m.ufs_url.trim_end_matches('/');
        let key = o.key.trim_start_matches('/');
        Some(format!("{endpoint}\n{url}/{key}\n{}", o.version))
    }

    /// A complete copy of the same object, `length` bytes long, whose blocks a new copy of
    /// `object` may share.
    pub fn copy_of_same_object(&self, object: &UfsObject, length: u64) -> Option<InodeId> {
        let identity = self.object_identity(object)?;
        let id = *self.shared.by_object.get(&identity)?;
        self.shareable(id, &identity, length).then_some(id)
    }

    fn shareable(&self, id: InodeId, identity: &str, length: u64) -> bool {
        let same_object =
            self.data.ufs_files.get(&id).and_then(|o| self.object_identity(o)).is_some_and(|i| i == identity);
        let Some(InodeBody::File(f)) = self.data.inodes.get(&id).map(|i| &i.body) else { return false };
        same_object
            && f.state == FileState::Complete
            && f.length == length
            && f.blocks.iter().all(|b| self.data.blocks.contains_key(b))
    }

    /// Records a copy of `object` at `path` that lists the blocks of `shares`, a complete copy
    /// of the same object at the same version.
    pub(super) fn ufs_file_shared(
        &mut self,
        path: &CvPath,
        object: &UfsObject,
        length: u64,
        mtime: u64,
        shares: InodeId,
    ) -> Result<Applied> {
        let Some(identity) = self.object_identity(object) else {
            return err(
                ErrorKind::InvalidArgument,
                format!("{path}: object {} has no version to share by", object.key),
            );
        };
        if !self.shareable(shares, &identity, length) {
            return err(ErrorKind::Changed, format!("{path}: file {shares} is no longer a copy of the same object"));
        }
        if self.lookup(path).ok() == Some(shares) {
            return err(ErrorKind::InvalidArgument, format!("{path} cannot share its own blocks"));
        }
        // The copy is recorded with no blocks (which checks and places it as any copy), then
        // given the shared ones.
        let applied = self.ufs_file(path, object, 0, 1, &[], mtime)?;
        let Applied::Created { file_id, .. } = applied else {
            return err(ErrorKind::InvalidArgument, "ufs_file did not create");
        };
        let blocks = self.file(shares)?.blocks.clone();
        for &b in &blocks {
            let set = self.shared.sharers.entry(b).or_default();
            set.insert(shares);
            set.insert(file_id);
        }
        let f = self.file_mut(file_id)?;
        f.blocks = blocks;
        f.length = length;
        Ok(applied)
    }

    /// File `to` lists `blocks`, which file `from` lists too: each stays while either does.
    pub(super) fn share_blocks(&mut self, from: InodeId, to: InodeId, blocks: &[BlockId]) {
        for &b in blocks {
            let set = self.shared.sharers.entry(b).or_default();
            set.insert(from);
            set.insert(to);
        }
    }

    /// Notes that `id` is a copy of `object`.
    pub(super) fn note_copy(&mut self, id: InodeId, object: &UfsObject) {
        if let Some(identity) = self.object_identity(object) {
            self.shared.by_object.insert(identity, id);
        }
    }

    /// File `id` is going: whether its block `b` goes with it (no other file lists it). If
    /// another does, the block stays, owned by the first of them.
    pub(super) fn release_block(&mut self, id: InodeId, b: BlockId) -> bool {
        let Some(set) = self.shared.sharers.get_mut(&b) else { return true };
        set.remove(&id);
        let next = set.first().copied();
        if set.len() < 2 {
            self.shared.sharers.remove(&b);
        }
        let Some(next) = next else { return true };
        if let Some(info) = self.data.blocks.get_mut(&b)
            && info.file == id
        {
            info.file = next;
        }
        false
    }

    /// Rebuilds the derived maps from the durable data (after a snapshot is loaded).
    pub(super) fn rebuild_shared(&mut self) {
        let mut listed: HashMap<BlockId, BTreeSet<InodeId>> = HashMap::new();
        for (id, inode) in &self.data.inodes {
            if let InodeBody::File(f) = &inode.body {
                for &b in &f.blocks {
                    listed.entry(b).or_default().insert(*id);
                }
            }
        }
        listed.retain(|_, files| files.len() > 1);
        let by_object =
            self.data.ufs_files.iter().filter_map(|(id, o)| Some((self.object_identity(o)?, *id))).collect();
        self.shared = Shared { sharers: listed, by_object };
    }

    /// How many blocks more than one file lists (tests, reports).
    pub fn shared_blocks(&self) -> usize {
        self.shared.sharers.len()
    }
}
