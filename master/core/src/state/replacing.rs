//! Atomic replace. A file created over an existing one is kept out of the namespace while it
//! is written: it is in `inodes` with the parent and name it will take, but its parent does
//! not list it, so every reader still gets the version the path shows. Its completion
//! publishes it at that path in the same step, and a writer that gives up (or whose write
//! lease runs out) leaves the previous version as it was.
//!
//! Which files are held back follows from the inodes (a file being written that its parent
//! does not list), so a snapshot needs nothing new; the index here is rebuilt on load and kept
//! by directory, so that removing a directory removes the replacements aimed into it.

use std::collections::{BTreeMap, BTreeSet};

use super::types::{Expect, FileState, InodeBody, InodeId};
use super::{Applied, State, err};
use crate::error::{ErrorKind, Result};

/// Held-back files by the directory they will be published in.
#[derive(Debug, Clone, Default)]
pub(super) struct Replacing {
    by_dir: BTreeMap<InodeId, BTreeSet<InodeId>>,
}

impl Replacing {
    fn insert(&mut self, dir: InodeId, file: InodeId) {
        self.by_dir.entry(dir).or_default().insert(file);
    }

    fn remove(&mut self, dir: InodeId, file: InodeId) -> bool {
        let Some(files) = self.by_dir.get_mut(&dir) else { return false };
        let removed = files.remove(&file);
        if files.is_empty() {
            self.by_dir.remove(&dir);
        }
        removed
    }
}

impl State {
    /// Finds the held-back files again (after loading a snapshot).
    pub(super) fn rebuild_replacing(&mut self) {
        let mut r = Replacing::default();
        for inode in self.data.inodes.values() {
            if matches!(&inode.body, InodeBody::File(f) if f.state == FileState::Writing) && !self.listed(inode.id) {
                r.insert(inode.parent, inode.id);
            }
        }
        self.replacing = r;
    }

    /// Whether inode `id`'s parent lists it under its name.
    fn listed(&self, id: InodeId) -> bool {
        let Some(inode) = self.data.inodes.get(&id) else { return false };
        match self.data.inodes.get(&inode.parent).map(|p| &p.body) {
            Some(InodeBody::Dir { children }) => children.get(&inode.name) == Some(&id),
            _ => false,
        }
    }

    /// Whether file `id` is being written to replace what its path shows (not yet published).
    pub fn is_held_back(&self, id: InodeId) -> bool {
        self.data.inodes.get(&id).is_some_and(|i| self.replacing.by_dir.get(&i.parent).is_some_and(|s| s.contains(&id)))
    }

    /// The files held back to be published in directory `dir`.
    pub(super) fn held_back_in(&self, dir: InodeId) -> impl Iterator<Item = InodeId> + '_ {
        self.replacing.by_dir.get(&dir).into_iter().flatten().copied()
    }

    /// Keeps file `id`, already in `inodes` with its parent and name, out of its parent's
    /// listing until it is published.
    pub(super) fn hold_back(&mut self, id: InodeId) {
        if let Some(parent) = self.data.inodes.get(&id).map(|i| i.parent) {
            self.replacing.insert(parent, id);
        }
    }

    /// Takes file `id` out of the index (it is being removed); a directory's held-back files
    /// are returned, to be removed with it.
    pub(super) fn forget_held_back(&mut self, id: InodeId, parent: InodeId) -> Vec<InodeId> {
        self.replacing.remove(parent, id);
        self.replacing.by_dir.remove(&id).map(|s| s.into_iter().collect()).unwrap_or_default()
    }

    /// What publishing file `id` would replace: the id of the complete file its path shows now,
    /// if another. Errors if it cannot be published there (a directory took the name), or if
    /// `expect` does not hold. Changes nothing.
    pub(super) fn check_publish(&self, id: InodeId, expect: Option<Expect>) -> Result<Option<InodeId>> {
        let inode = self.inode(id)?;
        let (parent, name) = (inode.parent, inode.name.as_str());
        let current = match &self.inode(parent)?.body {
            InodeBody::Dir { children } => children.get(name).copied(),
            InodeBody::File(_) => return err(ErrorKind::NotADirectory, format!("inode {parent}")),
        };
        let shown = match current {
            Some(c) if c != id => match &self.inode(c)?.body {
                InodeBody::Dir { .. } => {
                    let path = self.path_of(id).unwrap_or_default();
                    return err(ErrorKind::IsADirectory, format!("{path}: a directory took the name"));
                }
                InodeBody::File(f) => Some((c, f.state, f.version)),
            },
            _ => None,
        };
        let complete = shown.filter(|(_, state, _)| *state == FileState::Complete);
        match expect {
            None => {}
            Some(Expect::Absent) if complete.is_none() => {}
            Some(Expect::Absent) => {
                let path = self.path_of(id).unwrap_or_default();
                return err(ErrorKind::AlreadyExists, format!("{path}: exists (expected to be absent)"));
            }
            Some(Expect::Version { file_id, version })
                if complete.map(|(c, _, v)| (c, v)) == Some((file_id, version)) => {}
            Some(Expect::Version { file_id, version }) => {
                let path = self.path_of(id).unwrap_or_default();
                let now = complete.map_or("no file".to_owned(), |(c, _, v)| format!("file {c} version {v}"));
                let want = format!("file {file_id} version {version}");
                return err(ErrorKind::ConditionFailed, format!("{path}: holds {now}, expected {want}"));
            }
        }
        Ok(complete.map(|(c, _, _)| c))
    }

    /// Publishes held-back file `id` at its path (checked by [`State::check_publish`]): a
    /// complete file there is removed with its blocks; a file being written there is held back
    /// in turn (its own completion takes the path back, last completion wins).
    pub(super) fn publish(&mut self, id: InodeId, mtime: u64) {
        if !self.is_held_back(id) {
            return;
        }
        let Some((parent, name)) = self.data.inodes.get(&id).map(|i| (i.parent, i.name.clone())) else { return };
        self.replacing.remove(parent, id);
        if let Some(old) = self.children_mut(parent).insert(name, id) {
            match self.data.inodes.get(&old).map(|i| &i.body) {
                Some(InodeBody::File(f)) if f.state == FileState::Writing => self.replacing.insert(parent, old),
                _ => {
                    self.remove_subtree(old);
                }
            }
        }
        self.touch(parent, mtime);
    }

    /// Removes file `id` if it is being written, by id: a held-back file only leaves the index;
    /// a listed one leaves its directory too.
    pub(super) fn abandon(&mut self, id: InodeId, mtime: u64) -> Result<Applied> {
        let Some(inode) = self.data.inodes.get(&id) else { return Ok(Applied::Deleted { blocks: 0 }) };
        let (parent, name) = (inode.parent, inode.name.clone());
        match &inode.body {
            InodeBody::Dir { .. } => return err(ErrorKind::IsADirectory, format!("inode {id}")),
            InodeBody::File(f) if f.state == FileState::Complete => return Ok(Applied::Deleted { blocks: 0 }),
            InodeBody::File(_) => {}
        }
        if self.listed(id) {
            self.children_mut(parent).remove(&name);
            self.touch(parent, mtime);
        }
        let blocks = self.remove_subtree(id);
        Ok(Applied::Deleted { blocks })
    }
}
