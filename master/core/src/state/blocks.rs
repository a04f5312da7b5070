//! File contents: adding blocks, completing a file, dropping blocks, the block map for `open`.

use super::types::{BlockId, BlockInfo, Expect, FileBody, FileState, InodeBody, InodeId, WorkerId};
use super::view::{OpenFile, PlacedBlock, Tail};
use super::{Applied, State, err};
use crate::error::{ErrorKind, Result};
use crate::path::CvPath;

impl State {
    pub(super) fn file(&self, id: InodeId) -> Result<&FileBody> {
        match &self.inode(id)?.body {
            InodeBody::File(f) => Ok(f),
            InodeBody::Dir { .. } => err(ErrorKind::IsADirectory, format!("inode {id}")),
        }
    }

    pub(super) fn file_mut(&mut self, id: InodeId) -> Result<&mut FileBody> {
        match self.data.inodes.get_mut(&id).map(|i| &mut i.body) {
            Some(InodeBody::File(f)) => Ok(f),
            Some(InodeBody::Dir { .. }) => err(ErrorKind::IsADirectory, format!("inode {id}")),
            None => err(ErrorKind::NotFound, format!("file {id}")),
        }
    }

    fn writable(&self, id: InodeId) -> Result<&FileBody> {
        let f = self.file(id)?;
        if f.state != FileState::Writing {
            return err(ErrorKind::FileNotWritable, format!("file {id} is complete"));
        }
        Ok(f)
    }

    /// For a file being written: the block already at `index` (a retried
    /// add-block whose reply was lost), or `None` if `index` is the next one.
    pub fn written_block(&self, file_id: InodeId, index: u32) -> Result<Option<(BlockId, &BlockInfo)>> {
        let blocks = &self.writable(file_id)?.blocks;
        match blocks.get(index as usize) {
            Some(id) => {
                let info = self.data.blocks.get(id).ok_or_else(|| {
                    crate::Error::new(ErrorKind::CorruptData, format!("block {id} of file {file_id} has no entry"))
                })?;
                Ok(Some((*id, info)))
            }
            None if index as usize == blocks.len() => Ok(None),
            None => err(
                ErrorKind::InvalidArgument,
                format!("file {file_id} has {} blocks; cannot add block {index}", blocks.len()),
            ),
        }
    }

    pub(super) fn add_block(
        &mut self,
        file_id: InodeId,
        block_id: BlockId,
        worker: u64,
        shard: u16,
        replicas: &[WorkerId],
    ) -> Result<Applied> {
        let index = self.writable(file_id)?.blocks.len();
        let index =
            u32::try_from(index).map_err(|_| crate::Error::new(ErrorKind::InvalidArgument, "too many blocks"))?;
        self.check_new_block(block_id, worker, shard, replicas)?;
        self.data.next_block = block_id + 1;
        self.file_mut(file_id)?.blocks.push(block_id);
        let info =
            BlockInfo { file: file_id, index, len: 0, worker, shard, reported: false, replicas: replicas.to_vec() };
        self.data.blocks.insert(block_id, info);
        Ok(Applied::BlockAdded { block_id, index })
    }

    /// Replaces block `index` of a file being written with a new block; the old one is dropped.
    pub(super) fn replace_block(
        &mut self,
        file_id: InodeId,
        index: u32,
        block_id: BlockId,
        worker: u64,
        shard: u16,
        replicas: &[WorkerId],
    ) -> Result<Applied> {
        let Some(&old) = self.writable(file_id)?.blocks.get(index as usize) else {
            return err(ErrorKind::InvalidArgument, format!("file {file_id} has no block {index} to replace"));
        };
        self.check_new_block(block_id, worker, shard, replicas)?;
        self.data.next_block = block_id + 1;
        self.file_mut(file_id)?.blocks[index as usize] = block_id;
        self.drop_blocks(&[old]);
        let info =
            BlockInfo { file: file_id, index, len: 0, worker, shard, reported: false, replicas: replicas.to_vec() };
        self.data.blocks.insert(block_id, info);
        Ok(Applied::BlockAdded { block_id, index })
    }

    /// A new block's id is unused and its copies are on distinct live workers with that shard.
    fn check_new_block(&self, block_id: BlockId, worker: u64, shard: u16, replicas: &[WorkerId]) -> Result<()> {
        if block_id < self.data.next_block || self.data.blocks.contains_key(&block_id) {
            return err(ErrorKind::InvalidArgument, format!("block id {block_id} already used"));
        }
        for (i, &w) in std::iter::once(&worker).chain(replicas).enumerate() {
            match self.data.workers.get(&w) {
                Some(info) if info.live && usize::from(shard) < info.shard_ports.len() => {}
                Some(_) => return err(ErrorKind::NoWorkers, format!("worker {w} shard {shard}")),
                None => return err(ErrorKind::UnknownWorker, format!("worker {w}")),
            }
            if replicas[..i.saturating_sub(1)].contains(&w) || (i > 0 && w == worker) {
                return err(ErrorKind::InvalidArgument, format!("block {block_id}: worker {w} named twice"));
            }
        }
        Ok(())
    }

    /// Fixes a file's length and its blocks' lengths; it becomes readable. A held-back
    /// replacement is published at its path in the same step, if `expect` holds there.
    pub(super) fn complete(
        &mut self,
        file_id: InodeId,
        length: u64,
        block_lens: &[u64],
        mtime: u64,
        expect: Option<Expect>,
    ) -> Result<Applied> {
        let f = self.writable(file_id)?;
        if block_lens.len() != f.blocks.len() {
            return err(
                ErrorKind::InvalidArgument,
                format!("{} block lengths for {} blocks", block_lens.len(), f.blocks.len()),
            );
        }
        let sum = block_lens.iter().try_fold(0u64, |a, &b| a.checked_add(b));
        if sum != Some(length) {
            return err(ErrorKind::InvalidArgument, "block lengths do not add up to the length");
        }
        self.check_publish(file_id, expect)?;
        let blocks = f.blocks.clone();
        for (b, &len) in blocks.iter().zip(block_lens) {
            if let Some(info) = self.data.blocks.get_mut(b) {
                info.len = len;
            }
        }
        let f = self.file_mut(file_id)?;
        f.length = length;
        f.state = FileState::Complete;
        self.data.creates.remove(&file_id);
        if let Some(i) = self.data.inodes.get_mut(&file_id) {
            i.mtime = mtime;
        }
        self.publish(file_id, mtime);
        Ok(Applied::Done)
    }

    /// Whether worker `w`'s copies count towards a block's replicas: it is live and not
    /// being drained.
    pub fn counts(&self, w: WorkerId) -> bool {
        self.data.workers.get(&w).is_some_and(|w| w.live && !w.draining)
    }

    /// Whether file `id` is, or will be once written, stored in an object store by the time it
    /// is acknowledged: it is under a cache-mode mount (written through before `complete`
    /// answers) or already a copy of an object. Anything else is cv's only copy until exported.
    pub fn store_backed(&self, id: InodeId) -> bool {
        if self.data.ufs_files.contains_key(&id) {
            return true;
        }
        let Some(path) = self.path_of(id).and_then(|p| CvPath::parse(&p).ok()) else { return false };
        self.mount_for(&path).is_some_and(|m| m.mode == super::MountMode::Cache)
    }

    /// Whether worker `w` has room for `bytes` more, as its last heartbeat said (twice that,
    /// for the writes since).
    pub fn has_room(&self, w: WorkerId, bytes: u64) -> bool {
        self.data.workers.get(&w).is_some_and(|w| w.capacity.saturating_sub(w.used) >= bytes.saturating_mul(2))
    }

    /// Worker `w`'s failure domain: (zone, host).
    pub fn domain(&self, w: WorkerId) -> (&str, &str) {
        self.data.workers.get(&w).map_or(("", ""), |w| (w.zone.as_str(), w.host.as_str()))
    }

    /// Whether block `info` is cv's only copy of its bytes: its file is not a copy of an object.
    pub fn cv_only(&self, info: &BlockInfo) -> bool {
        !self.data.ufs_files.contains_key(&info.file)
    }

    /// Where the blocks are, for the report, with `replicas` copies wanted of every cv-only
    /// block: per worker its blocks, its only copies, the copies it is owed and the bytes that
    /// need a copy elsewhere before it can go; the files with a block no live worker holds
    /// (lost) and with a cv-only block short of copies (under-replicated), the first
    /// `max_paths` paths of each, in path order. One pass over the block map.
    pub fn block_summary(&self, replicas: usize, max_paths: usize) -> BlockSummary {
        let mut sum = BlockSummary::default();
        let (mut lost_files, mut under_files) = (std::collections::BTreeSet::new(), std::collections::BTreeSet::new());
        for info in self.data.blocks.values() {
            for w in info.copies() {
                sum.per_worker.entry(w).or_default().blocks += 1;
            }
            if !self.cv_only(info) {
                continue;
            }
            let live = info.copies().filter(|w| self.data.workers.get(w).is_some_and(|w| w.live)).count();
            let counted = info.copies().filter(|&w| self.counts(w)).count();
            if live == 0 {
                sum.lost_blocks += 1;
                lost_files.insert(info.file);
            } else if counted < replicas {
                sum.under_replicated_blocks += 1;
                under_files.insert(info.file);
            }
            for w in info.copies() {
                let e = sum.per_worker.entry(w).or_default();
                if info.replicas.is_empty() {
                    e.only_copies += 1;
                    e.only_copy_bytes += info.len;
                }
                if counted < replicas {
                    e.replicas_owed += 1;
                }
                // Without this copy, would the block be short?
                let others = info.copies().filter(|&o| o != w && self.counts(o)).count();
                if others < replicas {
                    e.bytes_to_move += info.len;
                }
            }
        }
        sum.lost_files = lost_files.len() as u64;
        sum.lost_paths = self.paths(lost_files, max_paths);
        sum.under_replicated_files = under_files.len() as u64;
        sum.under_replicated_paths = self.paths(under_files, max_paths);
        sum
    }

    fn paths(&self, files: std::collections::BTreeSet<InodeId>, max: usize) -> Vec<String> {
        let mut paths: Vec<String> = files.into_iter().filter_map(|id| self.path_of(id)).collect();
        paths.sort_unstable();
        paths.truncate(max);
        paths
    }

    /// The file at `path` if it is being written and the create with `request_id` made it:
    /// (its id, its version).
    pub fn created_by(&self, path: &CvPath, request_id: u64) -> Option<(InodeId, u64)> {
        if request_id == 0 {
            return None;
        }
        let name = path.name()?;
        let dir = self.lookup(&path.parent()?).ok()?;
        // The file its path lists, or one held back to replace it.
        let held = self.held_back_in(dir).filter(|id| self.data.inodes.get(id).is_some_and(|i| i.name == name));
        self.lookup(path).ok().into_iter().chain(held).find_map(|id| {
            let f = self.file(id).ok()?;
            (f.state == FileState::Writing && self.data.creates.get(&id) == Some(&request_id))
                .then_some((id, f.version))
        })
    }

    /// The complete file that publishing file `id` would replace, if any (none if it could
    /// not be published).
    pub fn replaced_by(&self, id: InodeId) -> Option<InodeId> {
        self.check_publish(id, None).ok().flatten()
    }

    /// Whether file `id` exists and is complete.
    pub fn is_complete(&self, id: InodeId) -> bool {
        self.file(id).is_ok_and(|f| f.state == FileState::Complete)
    }

    /// Every file being written (its writer has not completed it).
    pub fn writing_files(&self) -> impl Iterator<Item = InodeId> + '_ {
        self.writing_since().map(|(id, _)| id)
    }

    /// Every file being written with its mtime: when its writer created it or last got a
    /// block for it (`AddBlockTimed`, `ReplaceBlockTimed`), by the clock of the master then.
    pub fn writing_since(&self) -> impl Iterator<Item = (InodeId, u64)> + '_ {
        self.data.inodes.values().filter_map(|i| match &i.body {
            InodeBody::File(f) if f.state == FileState::Writing => Some((i.id, i.mtime)),
            _ => None,
        })
    }

    /// The writer of file `id` (just given a block) made progress at `mtime`.
    pub(super) fn progressed(&mut self, id: InodeId, mtime: u64) {
        if let Some(inode) = self.data.inodes.get_mut(&id) {
            inode.mtime = mtime;
        }
    }

    /// The path of file `id` if it is being written.
    pub fn writing_path(&self, id: InodeId) -> Option<String> {
        match self.file(id) {
            Ok(f) if f.state == FileState::Writing => self.path_of(id),
            _ => None,
        }
    }

    /// Whether file `id` is complete with exactly this length and these block lengths: a
    /// `complete` of that content again is answered as done, not refused as not writable.
    pub fn completed_as(&self, id: InodeId, length: u64, block_lens: &[u64]) -> bool {
        let Ok(f) = self.file(id) else { return false };
        f.state == FileState::Complete
            && f.length == length
            && f.blocks.len() == block_lens.len()
            && f.blocks.iter().zip(block_lens).all(|(b, &len)| self.data.blocks.get(b).is_some_and(|i| i.len == len))
    }

    /// Forgets blocks and queues a delete for each on every worker holding a copy. Returns
    /// how many blocks were queued.
    pub(super) fn drop_blocks(&mut self, blocks: &[BlockId]) -> usize {
        let mut queued = 0;
        for b in blocks {
            if let Some(info) = self.data.blocks.remove(b) {
                for w in info.copies() {
                    self.data.pending_deletes.entry(w).or_default().insert(*b);
                }
                queued += 1;
            }
        }
        queued
    }

    /// Records copies made on the master's order: worker `w` holds each of `blocks`.
    pub(super) fn copies_added(&mut self, w: WorkerId, blocks: &[BlockId]) -> Result<Applied> {
        let Some(worker) = self.data.workers.get(&w) else {
            return err(ErrorKind::UnknownWorker, format!("worker {w}"));
        };
        let shards = worker.shard_ports.len();
        for b in blocks {
            let Some(info) = self.data.blocks.get_mut(b) else { continue };
            if info.copies().any(|c| c == w) || usize::from(info.shard) >= shards {
                continue;
            }
            info.replicas.push(w);
            if let Some(d) = self.data.pending_deletes.get_mut(&w) {
                d.remove(b);
            }
        }
        Ok(Applied::Done)
    }

    /// Takes copies out of their blocks' copies, each with a delete queued on its worker; a
    /// block's last copy stays.
    pub(super) fn copies_dropped(&mut self, copies: &[(BlockId, WorkerId)]) -> Applied {
        for &(b, w) in copies {
            if self.data.blocks.get_mut(&b).is_some_and(|info| info.remove_copy(w)) {
                self.data.pending_deletes.entry(w).or_default().insert(b);
            }
        }
        Applied::Done
    }

    /// The block map of a complete file, with each block's shard address.
    pub fn open_file(&self, path: &CvPath) -> Result<OpenFile> {
        let id = self.lookup(path)?;
        let inode = self.inode(id)?;
        let f = self.file(id)?;
        if f.state != FileState::Complete {
            // The caller sees this text: say why, so it does not read as an outage.
            return err(
                ErrorKind::FileIncomplete,
                format!("{path}: the file is being written and cannot be opened until its writer completes it"),
            );
        }
        let ufs = self.data.ufs_files.get(&id).cloned();
        let mut offset = 0;
        let mut blocks = Vec::with_capacity(f.blocks.len());
        for b in &f.blocks {
            let Some(info) = self.data.blocks.get(b) else {
                return err(ErrorKind::NotFound, format!("block {b} of {path}"));
            };
            // The first live copy is the one read; the other live ones are the replicas.
            let live = |w: &WorkerId| self.data.workers.get(w).is_some_and(|w| w.live);
            let mut copies = info.copies().filter(live);
            let owner = copies.next();
            let worker_id = owner.unwrap_or(info.worker);
            let worker = self.data.workers.get(&worker_id);
            let replicas =
                copies.map(|w| (w, self.data.workers.get(&w).and_then(|w| w.shard_addr(info.shard)))).collect();
            blocks.push(PlacedBlock {
                block_id: *b,
                offset_in_file: offset,
                len: info.len,
                worker_id,
                shard: info.shard,
                addr: worker.and_then(|w| w.shard_addr(info.shard)),
                worker_live: owner.is_some(),
                lost: owner.is_none() && ufs.is_none(),
                replicas,
            });
            offset += info.len;
        }
        let (length, version, mtime) = (f.length, f.version, inode.mtime);
        Ok(OpenFile { file_id: id, length, version, mtime, blocks, tail: Tail::Evicted, ufs })
    }
}

/// What [`State::block_summary`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BlockSummary {
    pub per_worker: std::collections::BTreeMap<WorkerId, WorkerBlocks>,
    pub lost_files: u64,
    pub lost_blocks: u64,
    pub lost_paths: Vec<String>,
    pub under_replicated_files: u64,
    pub under_replicated_blocks: u64,
    pub under_replicated_paths: Vec<String>,
}

/// One worker's share of the block map.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WorkerBlocks {
    pub blocks: u64,
    /// Blocks whose only copy is there (their file has no object-store copy).
    pub only_copies: u64,
    pub only_copy_bytes: u64,
    /// Its cv-only blocks with fewer counted copies than wanted.
    pub replicas_owed: u64,
    /// Bytes of its cv-only blocks that would be short of copies without it.
    pub bytes_to_move: u64,
}
