//! Namespace operations: lookup, mkdir, create, rename, delete, stat, list.

use std::collections::BTreeMap;

use super::types::{FileBody, FileState, Inode, InodeBody, InodeId, ROOT_ID};
use super::view::{DirEntry, EntryKind, EntryStat, ListPage};
use super::{Applied, State, err};
use crate::error::{ErrorKind, Result};
use crate::path::CvPath;

impl State {
    /// Resolves a path to its inode id.
    pub fn lookup(&self, path: &CvPath) -> Result<InodeId> {
        let mut cur = ROOT_ID;
        for name in path.components() {
            match &self.inode(cur)?.body {
                InodeBody::Dir { children } => match children.get(name) {
                    Some(&id) => cur = id,
                    None => return err(ErrorKind::NotFound, path.as_str()),
                },
                InodeBody::File(_) => return err(ErrorKind::NotADirectory, path.as_str()),
            }
        }
        Ok(cur)
    }

    pub(super) fn inode(&self, id: InodeId) -> Result<&Inode> {
        match self.data.inodes.get(&id) {
            Some(i) => Ok(i),
            None => err(ErrorKind::NotFound, format!("inode {id}")),
        }
    }

    /// The version and length of file `id` if it is complete.
    pub fn complete_file(&self, id: InodeId) -> Option<(u64, u64)> {
        match &self.data.inodes.get(&id)?.body {
            InodeBody::File(f) if f.state == FileState::Complete => Some((f.version, f.length)),
            _ => None,
        }
    }

    /// The directory that would hold `path`; errors if it is missing or a file.
    fn parent_dir(&self, path: &CvPath) -> Result<InodeId> {
        let Some(parent) = path.parent() else {
            return err(ErrorKind::InvalidArgument, "the root has no parent");
        };
        let id = self.lookup(&parent)?;
        match self.inode(id)?.body {
            InodeBody::Dir { .. } => Ok(id),
            InodeBody::File(_) => err(ErrorKind::NotADirectory, parent.as_str()),
        }
    }

    pub(super) fn children_mut(&mut self, dir: InodeId) -> &mut BTreeMap<String, InodeId> {
        match self.data.inodes.get_mut(&dir).map(|i| &mut i.body) {
            Some(InodeBody::Dir { children }) => children,
            // Callers resolved `dir` as a directory in this same apply; reaching this is a bug.
            _ => unreachable!("inode {dir} is not a directory"),
        }
    }

    pub(super) fn touch(&mut self, id: InodeId, mtime: u64) {
        if let Some(i) = self.data.inodes.get_mut(&id) {
            i.mtime = i.mtime.max(mtime);
        }
    }

    fn link(&mut self, parent: InodeId, name: &str, inode: Inode, mtime: u64) {
        let id = inode.id;
        self.data.inodes.insert(id, inode);
        self.children_mut(parent).insert(name.to_owned(), id);
        self.touch(parent, mtime);
    }

    pub(super) fn mkdir(&mut self, path: &CvPath, parents: bool, mode: u32, mtime: u64) -> Result<Applied> {
        // Walk the existing prefix first so nothing changes if a later step would fail.
        let names: Vec<&str> = path.components().collect();
        let mut cur = ROOT_ID;
        let mut depth = 0;
        while depth < names.len() {
            let InodeBody::Dir { children } = &self.inode(cur)?.body else {
                return err(ErrorKind::NotADirectory, path.as_str());
            };
            match children.get(names[depth]) {
                Some(&id) => cur = id,
                None => break,
            }
            depth += 1;
        }
        if depth == names.len() {
            return match (&self.inode(cur)?.body, parents) {
                (InodeBody::Dir { .. }, true) => Ok(Applied::Done),
                _ => err(ErrorKind::AlreadyExists, path.as_str()),
            };
        }
        if let InodeBody::File(_) = self.inode(cur)?.body {
            return err(ErrorKind::NotADirectory, path.as_str());
        }
        if !parents && depth + 1 < names.len() {
            return err(ErrorKind::NotFound, path.as_str());
        }
        for name in &names[depth..] {
            let id = self.data.next_inode;
            self.data.next_inode += 1;
            let dir = Inode {
                id,
                parent: cur,
                name: (*name).to_owned(),
                mtime,
                mode,
                body: InodeBody::Dir { children: BTreeMap::new() },
            };
            self.link(cur, name, dir, mtime);
            cur = id;
        }
        Ok(Applied::Done)
    }

    /// Creates a file being written; `overwrite` replaces an existing file: at once, or with
    /// `hold_back` when the new one is complete (the path shows the old one until then).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn create(
        &mut self,
        path: &CvPath,
        overwrite: bool,
        hold_back: bool,
        file_id: InodeId,
        version: u64,
        mode: u32,
        mtime: u64,
    ) -> Result<Applied> {
        let Some(name) = path.name() else {
            return err(ErrorKind::IsADirectory, "/");
        };
        let parent = self.parent_dir(path)?;
        if file_id < self.data.next_inode || self.data.inodes.contains_key(&file_id) {
            return err(ErrorKind::InvalidArgument, format!("file id {file_id} already used"));
        }
        let existing = match &self.inode(parent)?.body {
            InodeBody::Dir { children } => children.get(name).copied(),
            InodeBody::File(_) => None,
        };
        if let Some(old) = existing {
            if matches!(self.inode(old)?.body, InodeBody::Dir { .. }) {
                return err(ErrorKind::IsADirectory, path.as_str());
            }
            if !overwrite {
                return err(ErrorKind::AlreadyExists, path.as_str());
            }
        }
        self.data.next_inode = file_id + 1;
        self.data.next_version = self.data.next_version.max(version + 1);
        let body = FileBody { length: 0, version, state: FileState::Writing, blocks: Vec::new() };
        let file = Inode { id: file_id, parent, name: name.to_owned(), mtime, mode, body: InodeBody::File(body) };
        match existing {
            // Published when complete (`replacing.rs`): until then the path shows the old
            // file, and a failed write leaves it as it was.
            Some(_) if hold_back => {
                self.data.inodes.insert(file_id, file);
                self.hold_back(file_id);
            }
            Some(old) => {
                self.children_mut(parent).remove(name);
                self.remove_subtree(old);
                self.link(parent, name, file, mtime);
            }
            None => self.link(parent, name, file, mtime),
        }
        Ok(Applied::Created { file_id, version })
    }

    /// Whether `src` can be renamed to `dst`: `Ok(false)` when there is nothing to do.
    pub fn check_rename(&self, src: &CvPath, dst: &CvPath) -> Result<bool> {
        if src.name().is_none() || dst.name().is_none() {
            return err(ErrorKind::InvalidArgument, "cannot rename the root");
        }
        let id = self.lookup(src)?;
        if src == dst {
            return Ok(false);
        }
        let is_dir = matches!(self.inode(id)?.body, InodeBody::Dir { .. });
        if is_dir && dst.is_under(src) {
            return err(ErrorKind::InvalidArgument, format!("cannot move {src} into itself"));
        }
        // The mount table is keyed by path: a mount point does not move with its parent.
        if let Some(m) = self.data.mounts.keys().find(|m| CvPath::parse(m).is_ok_and(|m| m.is_under(src))) {
            return err(ErrorKind::InvalidArgument, format!("{src} is or holds the mount point {m}; unmount it first"));
        }
        // A file keeps its store: moving it into, out of or between mounts would be a copy.
        let (from, to) = (self.mount_for(src).map(|m| &m.path), self.mount_for(dst).map(|m| &m.path));
        if from != to {
            let name = |m: Option<&String>| m.map_or("no mount".to_owned(), |m| format!("the mount at {m}"));
            let msg = format!("{src} is under {} and {dst} under {}: copy, then delete", name(from), name(to));
            return err(ErrorKind::Unsupported, msg);
        }
        self.parent_dir(dst)?;
        if self.lookup(dst).is_ok() {
            return err(ErrorKind::AlreadyExists, dst.as_str());
        }
        Ok(true)
    }

    pub(super) fn rename(&mut self, src: &CvPath, dst: &CvPath, mtime: u64) -> Result<Applied> {
        if !self.check_rename(src, dst)? {
            return Ok(Applied::Done);
        }
        let (Some(src_name), Some(dst_name)) = (src.name(), dst.name()) else {
            return err(ErrorKind::InvalidArgument, "cannot rename the root");
        };
        let id = self.lookup(src)?;
        let new_parent = self.parent_dir(dst)?;
        let old_parent = self.inode(id)?.parent;
        self.children_mut(old_parent).remove(src_name);
        self.touch(old_parent, mtime);
        if let Some(i) = self.data.inodes.get_mut(&id) {
            i.parent = new_parent;
            i.name = dst_name.to_owned();
        }
        self.children_mut(new_parent).insert(dst_name.to_owned(), id);
        self.touch(new_parent, mtime);
        Ok(Applied::Done)
    }

    pub(super) fn delete(&mut self, path: &CvPath, recursive: bool, mtime: u64) -> Result<Applied> {
        let Some(name) = path.name() else {
            return err(ErrorKind::InvalidArgument, "cannot delete the root");
        };
        let id = self.lookup(path)?;
        if let InodeBody::Dir { children } = &self.inode(id)?.body
            && !children.is_empty()
            && !recursive
        {
            return err(ErrorKind::NotEmpty, path.as_str());
        }
        let parent = self.inode(id)?.parent;
        self.children_mut(parent).remove(name);
        self.touch(parent, mtime);
        let blocks = self.remove_subtree(id);
        Ok(Applied::Deleted { blocks })
    }

    /// Removes an inode and everything below it; queues deletes for their blocks.
    pub(super) fn remove_subtree(&mut self, id: InodeId) -> usize {
        let mut queued = 0;
        let mut stack = vec![id];
        while let Some(cur) = stack.pop() {
            let Some(inode) = self.data.inodes.remove(&cur) else {
                continue;
            };
            // Replacements aimed into a removed directory go with it.
            stack.extend(self.forget_held_back(cur, inode.parent));
            self.data.ufs_files.remove(&cur);
            self.data.creates.remove(&cur);
            match inode.body {
                InodeBody::Dir { children } => stack.extend(children.into_values()),
                InodeBody::File(f) => {
                    // A block another file lists (a copy of the same object) stays for it.
                    let own: Vec<_> = f.blocks.into_iter().filter(|&b| self.release_block(cur, b)).collect();
                    queued += self.drop_blocks(&own);
                }
            }
        }
        queued
    }

    fn stat_of(inode: &Inode) -> EntryStat {
        match &inode.body {
            InodeBody::Dir { children } => EntryStat {
                id: inode.id,
                kind: EntryKind::Dir,
                length: children.len() as u64,
                mtime: inode.mtime,
                version: 0,
                mode: inode.mode,
                state: None,
            },
            InodeBody::File(f) => EntryStat {
                id: inode.id,
                kind: EntryKind::File,
                length: f.length,
                mtime: inode.mtime,
                version: f.version,
                mode: inode.mode,
                state: Some(f.state),
            },
        }
    }

    pub fn stat(&self, path: &CvPath) -> Result<EntryStat> {
        Ok(Self::stat_of(self.inode(self.lookup(path)?)?))
    }

    /// Entries of a directory sorted by name, strictly after `start_after`, at most `limit`.
    pub fn list(&self, path: &CvPath, start_after: Option<&str>, limit: usize) -> Result<ListPage> {
        if limit == 0 {
            return err(ErrorKind::InvalidArgument, "list limit must be at least 1");
        }
        let InodeBody::Dir { children } = &self.inode(self.lookup(path)?)?.body else {
            return err(ErrorKind::NotADirectory, path.as_str());
        };
        let mut iter = match start_after {
            Some(after) => children.range::<str, _>((std::ops::Bound::Excluded(after), std::ops::Bound::Unbounded)),
            None => children.range::<str, _>(..),
        };
        let mut entries = Vec::with_capacity(limit.min(children.len()));
        for (name, id) in iter.by_ref().take(limit) {
            entries.push(DirEntry { name: name.clone(), stat: Self::stat_of(self.inode(*id)?) });
        }
        Ok(ListPage { entries, more: iter.next().is_some() })
    }
}
