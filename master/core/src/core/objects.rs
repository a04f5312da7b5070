//! Object storage under mounts: files recorded as copies of objects, their tails, renames
//! that move objects, the durable queue of object deletes, exports and frees.

use super::{Created, MasterCore, Pending, lock};
use crate::error::{Error, ErrorKind, Result};
use crate::path::CvPath;
use crate::state::{Applied, EntryKind, InodeId, Mutation, State, UfsObject};
use cv_wire::footer;

impl MasterCore {
    /// Records a complete file that is a copy of `object` (`length` bytes, the store's `mtime`),
    /// its blocks placed by consistent hashing. The caller puts the tail in with [`Self::put_tail`]
    /// (read while the record is made durable).
    pub fn begin_ufs_file(
        &self,
        path: &CvPath,
        object: UfsObject,
        length: u64,
        mtime: u64,
    ) -> Result<Pending<Created>> {
        let block_size = self.config.block_size;
        let vnodes = self.config.vnodes_per_shard;
        let mut replaced = None;
        let (applied, t) = self.submit(|g, _| {
            replaced = g.state.stat(path).ok().filter(|s| s.kind == EntryKind::File).map(|s| s.id);
            // Another mount's copy of the same object version: cache it once.
            if let Some(shares) = g.state.copy_of_same_object(&object, length).filter(|&s| Some(s) != replaced) {
                let (path, object) = (path.as_str().to_owned(), object.clone());
                return Ok(Mutation::UfsFileShared { path, object, length, mtime, shares });
            }
            let n = length.div_ceil(block_size);
            let first = cv_wire::first_free_seq(g.state.next_block_id());
            let ring = g.ring(vnodes);
            let mut placement = Vec::with_capacity(n as usize);
            for i in 0..n {
                let Some(p) = ring.place(first + i) else {
                    return Err(Error::new(ErrorKind::NoWorkers, "no live worker shard"));
                };
                placement.push(p);
            }
            Ok(Mutation::UfsFile {
                path: path.as_str().to_owned(),
                object: object.clone(),
                length,
                block_size,
                placement,
                mtime,
            })
        })?;
        let Applied::Created { file_id, version } = applied else {
            return Err(Error::new(ErrorKind::InvalidArgument, "ufs_file did not create"));
        };
        if let Some(old) = replaced {
            lock(&self.tails).remove(old);
        }
        Ok(Self::done(Created { file_id, version }, t))
    }

    /// Keeps `bytes`, the last bytes of file `file_id` (`length` long) at `version`, in the tail
    /// cache, trimmed to the footer size of the file's format, if that file is complete at
    /// that version and length. Checked under the state lock: a completion that was undone
    /// (its journal write ran out of space) leaves no tail behind, which the next file given
    /// its (file id, version) by the state's counters would be opened with.
    pub fn put_tail(&self, file_id: InodeId, version: u64, length: u64, bytes: &[u8]) {
        let need = footer::tail_len(length, bytes, self.config.default_tail_bytes);
        let keep = (need as usize).min(bytes.len());
        let g = self.settled();
        if g.state.complete_file(file_id) != Some((version, length)) {
            return;
        }
        lock(&self.tails).insert(file_id, version, length - keep as u64, bytes[bytes.len() - keep..].into());
    }

    /// Whether the tail of the complete file at `path` is in the tail cache.
    pub fn has_tail(&self, path: &CvPath) -> bool {
        // A stat, not the block map: this runs before every open under a cache-mode mount.
        let Ok(st) = self.settled().state.stat(path) else { return false };
        st.kind == EntryKind::File && (st.length == 0 || lock(&self.tails).contains(st.id))
    }

    /// Renames `src` to `dst` and points each unchanged (file id, version) at its copy; the
    /// objects they were copies of are queued for deletion.
    pub fn begin_rename_objects(
        &self,
        src: &CvPath,
        dst: &CvPath,
        objects: Vec<(InodeId, u64, UfsObject)>,
    ) -> Result<Pending<()>> {
        let (_, t) = self.submit(|_, now| {
            let (src, dst) = (src.as_str().to_owned(), dst.as_str().to_owned());
            Ok(Mutation::RenameObjects { src, dst, mtime: now, objects })
        })?;
        Ok(Self::done((), t))
    }

    /// Queues deletes of `keys` under mount point `mount` (copies a rename is about to make).
    pub fn begin_objects_queued(&self, mount: &str, keys: Vec<String>) -> Result<Pending<()>> {
        let mount = mount.to_owned();
        let (_, t) = self.submit(|_, _| Ok(Mutation::ObjectsQueued { mount, keys }))?;
        Ok(Self::done((), t))
    }

    /// Queued object deletes under mount point `mount` are done.
    pub fn begin_objects_deleted(&self, mount: &str, keys: Vec<String>) -> Result<Pending<()>> {
        let mount = mount.to_owned();
        let (_, t) = self.submit(|_, _| Ok(Mutation::ObjectsDeleted { mount, keys }))?;
        Ok(Self::done((), t))
    }

    /// Records that file `file_id` at `version` is stored as `object`; its blocks get unpinned.
    pub fn begin_exported(&self, file_id: InodeId, version: u64, object: UfsObject) -> Result<Pending<()>> {
        let (_, t) = self.submit(|_, _| Ok(Mutation::Exported { file_id, version, object }))?;
        Ok(Self::done((), t))
    }

    /// Drops the cached blocks of object copies at or under `path`: (files, blocks, skipped).
    pub fn begin_free(&self, path: &CvPath) -> Result<Pending<(u64, u64, u64)>> {
        let (applied, t) = self.submit(|_, _| Ok(Mutation::Free { path: path.as_str().to_owned() }))?;
        let Applied::Freed { files, blocks, skipped } = applied else {
            return Err(Error::new(ErrorKind::InvalidArgument, "free did not free"));
        };
        Ok(Self::done((files, blocks, skipped), t))
    }

    /// A read of the state for the object-storage layer (which object backs which file...).
    pub fn inspect<T>(&self, f: impl FnOnce(&State) -> T) -> T {
        f(&self.settled().state)
    }
}
