//! The mount table: cv path → object-storage URL, mode and options. Stored only; the UFS
//! behaviour behind a mount comes later.

use super::types::{InodeBody, Mount, MountMode};
use super::{Applied, State, err};
use crate::error::{ErrorKind, Result};
use crate::path::CvPath;

/// `path` relative to the mount point `mount`: its object key.
pub fn key_of(mount: &str, path: &str) -> String {
    path.strip_prefix(mount).unwrap_or(path).trim_start_matches('/').to_owned()
}

impl State {
    pub(super) fn mount(
        &mut self,
        path: &CvPath,
        ufs_url: &str,
        mode: MountMode,
        options: &[(String, String)],
    ) -> Result<Applied> {
        if ufs_url.is_empty() || !ufs_url.contains("://") {
            return err(ErrorKind::InvalidArgument, format!("ufs url {ufs_url:?}"));
        }
        if self.data.mounts.contains_key(path.as_str()) {
            return err(ErrorKind::AlreadyExists, format!("mount at {path}"));
        }
        let mount =
            Mount { path: path.as_str().to_owned(), ufs_url: ufs_url.to_owned(), mode, options: options.to_vec() };
        self.data.mounts.insert(mount.path.clone(), mount);
        Ok(Applied::Done)
    }

    /// Removes the mount, and with it what cv held of the store there: every copy of one of
    /// its objects (their blocks are queued for deletion), then the directories under the
    /// mount point left empty. Files with no copy in the store (written through cv and not
    /// exported, with `force`) stay, as do the mount point and the directories above them.
    pub(super) fn unmount(&mut self, path: &CvPath) -> Result<Applied> {
        if self.data.mounts.remove(path.as_str()).is_none() {
            return err(ErrorKind::NotFound, format!("mount at {path}"));
        }
        // The store is no longer cv's to change.
        self.data.pending_object_deletes.remove(path.as_str());
        let copies = self.object_copies_under(path);
        let mut blocks = 0;
        for c in copies.iter().filter(|c| c.object.mount == path.as_str()) {
            let (Some(parent), Some(name)) = (c.path.parent(), c.path.name()) else { continue };
            let Ok(dir) = self.lookup(&parent) else { continue };
            self.children_mut(dir).remove(name);
            blocks += self.remove_subtree(c.file_id);
        }
        self.prune_empty_dirs_under(path);
        Ok(if blocks > 0 { Applied::Deleted { blocks } } else { Applied::Done })
    }

    /// Removes the directories below `top` (not `top`) that hold nothing, deepest first.
    fn prune_empty_dirs_under(&mut self, top: &CvPath) {
        let Ok(root) = self.lookup(top) else { return };
        // Directories in an order where each comes after its parent; walked backwards, every
        // child is pruned before its parent is looked at.
        let mut order = Vec::new();
        let mut stack = vec![root];
        while let Some(id) = stack.pop() {
            if let Ok(InodeBody::Dir { children }) = self.inode(id).map(|i| &i.body) {
                let dirs: Vec<_> = children.values().copied().collect();
                order.push(id);
                stack.extend(dirs);
            }
        }
        for id in order.into_iter().rev().filter(|id| *id != root) {
            let Ok(inode) = self.inode(id) else { continue };
            let empty = matches!(&inode.body, InodeBody::Dir { children } if children.is_empty());
            let parent = inode.parent;
            if !empty {
                continue;
            }
            let name = self.inode(parent).ok().and_then(|p| match &p.body {
                InodeBody::Dir { children } => children.iter().find(|(_, c)| **c == id).map(|(n, _)| n.clone()),
                InodeBody::File(_) => None,
            });
            if let Some(name) = name {
                self.children_mut(parent).remove(&name);
                self.remove_subtree(id);
            }
        }
    }

    /// All mounts, sorted by path.
    pub fn mounts(&self) -> Vec<Mount> {
        self.data.mounts.values().cloned().collect()
    }

    /// The mount whose path is the longest prefix of `path`, if any.
    pub fn mount_for(&self, path: &CvPath) -> Option<&Mount> {
        self.data
            .mounts
            .values()
            .filter(|m| CvPath::parse(&m.path).is_ok_and(|mp| path.is_under(&mp)))
            .max_by_key(|m| m.path.len())
    }
}
