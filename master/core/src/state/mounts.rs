//! The mount table: cv path → object-storage URL, mode and options (and their cache-mode
//! policy, parsed as the mount is applied).

use super::policy::CachePolicy;
use super::types::{MountEntry, MountMode};
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
        let mount = MountEntry {
            path: path.as_str().to_owned(),
            ufs_url: ufs_url.to_owned(),
            mode,
            options: options.to_vec().into(),
        };
        self.policies.insert(mount.path.clone(), CachePolicy::of(&mount));
        self.data.mounts.insert(mount.path.clone(), mount);
        Ok(Applied::Done)
    }

    /// Removes the mount, and with it what cv held of the store there: every copy of one of
    /// its objects (their blocks are queued for deletion). Directories stay (a snapshot of an
    /// earlier version holds them, and replay must agree with it), as do files with no copy in
    /// the store (written through cv and not exported, unmounted with `force`).
    pub(super) fn unmount(&mut self, path: &CvPath) -> Result<Applied> {
        if self.data.mounts.remove(path.as_str()).is_none() {
            return err(ErrorKind::NotFound, format!("mount at {path}"));
        }
        self.policies.remove(path.as_str());
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
        Ok(if blocks > 0 { Applied::Deleted { blocks } } else { Applied::Done })
    }

    /// All mounts, sorted by path.
    pub fn mounts(&self) -> Vec<MountEntry> {
        self.data.mounts.values().cloned().collect()
    }

    /// The mount whose path is the longest prefix of `path`, if any.
    pub fn mount_for(&self, path: &CvPath) -> Option<&MountEntry> {
        self.data.mounts.values().filter(|m| path.is_under_str(&m.path)).max_by_key(|m| m.path.len())
    }

    /// The cache-mode mount `path` is under, if any, with its policy (an error if its options
    /// do not parse: a mount journaled before they were checked).
    pub fn cache_mount_for(&self, path: &CvPath) -> Option<(&MountEntry, Result<CachePolicy>)> {
        let m = self.mount_for(path).filter(|m| m.mode == MountMode::Cache)?;
        let policy = self.policies.get(&m.path).cloned().unwrap_or_else(|| CachePolicy::of(m));
        Some((m, policy))
    }
}
