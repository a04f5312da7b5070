//! Files that are copies of object-store objects (cache mode): recording one,
//! and dropping their cached blocks while keeping their metadata.

use super::types::{InodeBody, UfsObject, WorkerId};
use super::{Applied, State, err};
use crate::error::{ErrorKind, Result};
use crate::path::CvPath;
use std::collections::BTreeMap;

/// A file that is a copy of an object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectCopy {
    pub file_id: super::InodeId,
    /// The file's version in cv.
    pub version: u64,
    pub length: u64,
    pub path: CvPath,
    pub object: UfsObject,
}

/// A complete file not yet in its store: (file id, version, path, length, completed at).
pub type PendingExport = (super::InodeId, u64, String, u64, u64);

impl State {
    pub(super) fn ufs_file(
        &mut self,
        path: &CvPath,
        object: &UfsObject,
        length: u64,
        block_size: u64,
        placement: &[(WorkerId, u16)],
        mtime: u64,
    ) -> Result<Applied> {
        // Everything that can fail is checked before anything changes.
        let Some(parent) = path.parent() else {
            return err(ErrorKind::IsADirectory, "/");
        };
        if block_size == 0 {
            return err(ErrorKind::InvalidArgument, "block size 0");
        }
        if length.div_ceil(block_size) != placement.len() as u64 {
            return err(
                ErrorKind::InvalidArgument,
                format!("{} placements for {length} bytes in {block_size}-byte blocks", placement.len()),
            );
        }
        for &(w, shard) in placement {
            match self.data.workers.get(&w) {
                Some(wk) if wk.live && usize::from(shard) < wk.shard_ports.len() => {}
                _ => return err(ErrorKind::NoWorkers, format!("worker {w} shard {shard}")),
            }
        }
        match self.lookup(path) {
            Ok(id) if matches!(self.inode(id)?.body, InodeBody::Dir { .. }) => {
                return err(ErrorKind::IsADirectory, path.as_str());
            }
            Ok(_) | Err(_) => {}
        }
        // Every existing ancestor must be a directory.
        let mut cur = CvPath::root();
        for name in parent.components() {
            cur = cur.child(name)?;
            match self.lookup(&cur) {
                Ok(id) if !matches!(self.inode(id)?.body, InodeBody::Dir { .. }) => {
                    return err(ErrorKind::NotADirectory, cur.as_str());
                }
                Ok(_) => {}
                Err(_) => break,
            }
        }
        if self.lookup(&parent).is_err() {
            self.mkdir(&parent, true, 0o755, mtime)?;
        }
        let file_id = self.data.next_inode;
        let version = self.data.next_version;
        self.create(path, true, false, file_id, version, 0o644, mtime)?;
        let mut lens = Vec::with_capacity(placement.len());
        for (i, &(worker, shard)) in placement.iter().enumerate() {
            let seq = cv_wire::first_free_seq(self.data.next_block);
            self.add_block(file_id, cv_wire::block_id(seq, shard), worker, shard, &[])?;
            lens.push(block_size.min(length - i as u64 * block_size));
        }
        self.complete(file_id, length, &lens, mtime, None)?;
        self.unqueue_object_delete(object);
        self.data.ufs_files.insert(file_id, object.clone());
        self.note_copy(file_id, object);
        Ok(Applied::Created { file_id, version })
    }

    pub(super) fn free(&mut self, path: &CvPath) -> Result<Applied> {
        let root = self.lookup(path)?;
        let (mut files, mut blocks, mut skipped) = (0, 0, 0);
        let mut stack = vec![root];
        while let Some(id) = stack.pop() {
            let block_ids = match &self.inode(id)?.body {
                InodeBody::Dir { children } => {
                    stack.extend(children.values().copied());
                    continue;
                }
                InodeBody::File(f) => f.blocks.clone(),
            };
            // Only copies of an object can be fetched again; anything else is the only copy.
            if !self.data.ufs_files.contains_key(&id) {
                skipped += 1;
                continue;
            }
            files += 1;
            for b in block_ids {
                if let Some(info) = self.data.blocks.get_mut(&b) {
                    info.reported = false;
                    self.data.pending_deletes.entry(info.worker).or_default().insert(b);
                    blocks += 1;
                }
            }
        }
        Ok(Applied::Freed { files, blocks, skipped })
    }

    pub(super) fn exported(&mut self, file_id: super::InodeId, version: u64, object: &UfsObject) -> Result<Applied> {
        let f = self.file(file_id)?;
        if f.version != version || f.state != super::FileState::Complete {
            return err(ErrorKind::InvalidArgument, format!("file {file_id} changed while it was exported"));
        }
        // The object must be where the file is now: a rename while it was uploaded moved it.
        if !self.path_of(file_id).and_then(|p| CvPath::parse(&p).ok()).is_some_and(|p| self.is_at(&p, object)) {
            return err(ErrorKind::InvalidArgument, format!("file {file_id} moved while it was exported"));
        }
        let blocks = f.blocks.clone();
        for b in blocks {
            if let Some(info) = self.data.blocks.get_mut(&b) {
                self.data.pending_unpins.entry(info.worker).or_default().insert(b);
                // The store holds the bytes now: the extra copies go.
                for r in std::mem::take(&mut info.replicas) {
                    self.data.pending_deletes.entry(r).or_default().insert(b);
                }
            }
        }
        self.unqueue_object_delete(object);
        self.data.ufs_files.insert(file_id, object.clone());
        self.note_copy(file_id, object);
        Ok(Applied::Done)
    }

    pub(super) fn remove(&mut self, path: &CvPath, recursive: bool, mtime: u64) -> Result<Applied> {
        // Only objects at their file's key under a current mount: any other record (a mount gone
        // or replaced since) may name a key another file uses now.
        let objects: Vec<UfsObject> =
            self.object_copies_under(path).into_iter().filter(|c| self.in_place(c)).map(|c| c.object).collect();
        let applied = self.delete(path, recursive, mtime)?;
        for o in objects {
            self.queue_object_delete(o);
        }
        Ok(applied)
    }

    /// Whether a copy's object is the one at its path's key under the mount it is under now.
    fn in_place(&self, c: &ObjectCopy) -> bool {
        self.is_at(&c.path, &c.object)
    }

    /// Whether `object` is the one at `path`'s key under the mount `path` is under now.
    fn is_at(&self, path: &CvPath, object: &UfsObject) -> bool {
        self.mount_for(path)
            .is_some_and(|m| m.path == object.mount && super::key_of(&m.path, path.as_str()) == object.key)
    }

    pub(super) fn rename_objects(
        &mut self,
        src: &CvPath,
        dst: &CvPath,
        mtime: u64,
        objects: &[(super::InodeId, u64, UfsObject)],
    ) -> Result<Applied> {
        // Everything that can refuse is checked before anything changes.
        if !self.check_rename(src, dst)? {
            return Ok(Applied::Done);
        }
        let copies = self.object_copies_under(src);
        if let Some(c) = copies.iter().find(|c| !self.in_place(c)) {
            let msg =
                format!("{} is a copy of {}:{}, which is not mounted there now", c.path, c.object.mount, c.object.key);
            return err(ErrorKind::Unsupported, msg);
        }
        // Every copy that moves must move to its new object: one recorded since the request was
        // prepared (a listing during the copies) would keep its old key at its new path.
        let listed: BTreeMap<super::InodeId, u64> = objects.iter().map(|(id, v, _)| (*id, *v)).collect();
        if let Some(c) = copies.iter().find(|c| listed.get(&c.file_id) != Some(&c.version)) {
            return err(ErrorKind::Changed, format!("{} changed during the rename", c.path));
        }
        let applied = self.rename(src, dst, mtime)?;
        for (file_id, version, object) in objects {
            // Refused (nothing changed) for an entry that is not a copy under src: its copy stays
            // queued for deletion.
            let _ = self.moved(*file_id, *version, object);
        }
        Ok(applied)
    }

    fn moved(&mut self, file_id: super::InodeId, version: u64, object: &UfsObject) -> Result<Applied> {
        let old = self.data.ufs_files.get(&file_id).cloned();
        let applied = self.exported(file_id, version, object)?;
        if let Some(old) = old.filter(|o| (&o.mount, &o.key) != (&object.mount, &object.key)) {
            self.queue_object_delete(old);
        }
        Ok(applied)
    }

    pub(super) fn objects_deleted(&mut self, mount: &str, keys: &[String]) -> Applied {
        if let Some(queued) = self.data.pending_object_deletes.get_mut(mount) {
            for k in keys {
                queued.remove(k);
            }
            if queued.is_empty() {
                self.data.pending_object_deletes.remove(mount);
            }
        }
        Applied::Done
    }

    pub(super) fn objects_queued(&mut self, mount: &str, keys: &[String]) -> Result<Applied> {
        if !self.data.mounts.contains_key(mount) {
            return err(ErrorKind::NotFound, format!("mount at {mount}"));
        }
        self.data.pending_object_deletes.entry(mount.to_owned()).or_default().extend(keys.iter().cloned());
        Ok(Applied::Done)
    }

    fn queue_object_delete(&mut self, o: UfsObject) {
        self.data.pending_object_deletes.entry(o.mount).or_default().insert(o.key);
    }

    /// A file now stands for the object at `key`: a delete queued for it is void.
    pub(super) fn unqueue_object_delete(&mut self, object: &UfsObject) {
        self.objects_deleted(&object.mount, std::slice::from_ref(&object.key));
    }

    /// Whether the object at `key` under mount point `mount` is queued for deletion: cv
    /// deleted its file, so a listing must not bring it back.
    pub fn object_delete_queued(&self, mount: &str, key: &str) -> bool {
        self.data.pending_object_deletes.get(mount).is_some_and(|q| q.contains(key))
    }

    /// Whether any object delete is queued.
    pub fn has_queued_object_deletes(&self) -> bool {
        !self.data.pending_object_deletes.is_empty()
    }

    /// The queued object deletes: (mount point, keys).
    pub fn queued_object_deletes(&self) -> Vec<(String, Vec<String>)> {
        self.data.pending_object_deletes.iter().map(|(m, k)| (m.clone(), k.iter().cloned().collect())).collect()
    }

    /// Complete files under fs-mode mounts (with `cache_too`, under every mount) that are not
    /// yet in their object store, oldest first: (file id, version, path, length, completed at).
    pub fn pending_exports(&self, cache_too: bool) -> Vec<PendingExport> {
        let mounts: Vec<CvPath> = self
            .data
            .mounts
            .values()
            .filter(|m| cache_too || m.mode == super::MountMode::Fs)
            .filter_map(|m| CvPath::parse(&m.path).ok())
            .collect();
        let mut out = Vec::new();
        for m in &mounts {
            let Ok(root) = self.lookup(m) else { continue };
            let mut stack = vec![(root, m.clone())];
            while let Some((id, path)) = stack.pop() {
                let Ok(inode) = self.inode(id) else { continue };
                match &inode.body {
                    InodeBody::Dir { children } => {
                        for (name, c) in children {
                            if let Ok(p) = path.child(name) {
                                stack.push((*c, p));
                            }
                        }
                    }
                    InodeBody::File(f) => {
                        if f.state == super::FileState::Complete
                            && !self.data.ufs_files.contains_key(&id)
                            && self.mount_for(&path).is_some_and(|mm| mm.path == m.as_str())
                        {
                            out.push((id, f.version, path.as_str().to_owned(), f.length, inode.mtime));
                        }
                    }
                }
            }
        }
        out.sort_by_key(|e| e.4);
        out
    }

    /// How many complete files under the fs-mode mount at `mount` are not yet in its store.
    pub fn unexported_under(&self, mount: &CvPath) -> usize {
        self.pending_exports(false).iter().filter(|e| CvPath::parse(&e.2).is_ok_and(|p| p.is_under(mount))).count()
    }

    /// The files at or under `path` that are copies of objects.
    pub fn object_copies_under(&self, path: &CvPath) -> Vec<ObjectCopy> {
        let Ok(root) = self.lookup(path) else { return Vec::new() };
        let mut out = Vec::new();
        let mut stack = vec![(root, path.clone())];
        while let Some((id, at)) = stack.pop() {
            match self.inode(id).map(|i| &i.body) {
                Ok(InodeBody::Dir { children }) => {
                    stack.extend(children.iter().filter_map(|(name, c)| Some((*c, at.child(name).ok()?))));
                }
                Ok(InodeBody::File(f)) => {
                    if let Some(object) = self.data.ufs_files.get(&id) {
                        let (version, length) = (f.version, f.length);
                        out.push(ObjectCopy { file_id: id, version, length, path: at, object: object.clone() });
                    }
                }
                Err(_) => {}
            }
        }
        out
    }

    /// The absolute path of inode `id`.
    pub fn path_of(&self, id: super::InodeId) -> Option<String> {
        let mut names = Vec::new();
        let mut cur = id;
        while cur != super::ROOT_ID {
            let inode = self.data.inodes.get(&cur)?;
            names.push(inode.name.as_str());
            cur = inode.parent;
        }
        names.reverse();
        Some(format!("/{}", names.join("/")))
    }

    /// The object a file is a copy of, if it is one.
    pub fn ufs_object(&self, file_id: super::InodeId) -> Option<&UfsObject> {
        self.data.ufs_files.get(&file_id)
    }
}
