//! Files that are copies of object-store objects (cache mode): recording one,
//! and dropping their cached blocks while keeping their metadata.

use super::types::{InodeBody, UfsObject, WorkerId};
use super::{Applied, State, err};
use crate::error::{ErrorKind, Result};
use crate::path::CvPath;

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
        self.create(path, true, file_id, version, 0o644, mtime)?;
        let mut lens = Vec::with_capacity(placement.len());
        for (i, &(worker, shard)) in placement.iter().enumerate() {
            let seq = cv_wire::first_free_seq(self.data.next_block);
            self.add_block(file_id, cv_wire::block_id(seq, shard), worker, shard)?;
            lens.push(block_size.min(length - i as u64 * block_size));
        }
        self.complete(file_id, length, &lens, mtime)?;
        self.data.ufs_files.insert(file_id, object.clone());
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

    /// The object a file is a copy of, if it is one.
    pub fn ufs_object(&self, file_id: super::InodeId) -> Option<&UfsObject> {
        self.data.ufs_files.get(&file_id)
    }
}
