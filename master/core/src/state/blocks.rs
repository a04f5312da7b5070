//! File contents: adding blocks, completing a file, dropping blocks, the block map for `open`.

use super::types::{BlockId, BlockInfo, FileBody, FileState, InodeBody, InodeId, WorkerId};
use super::view::{BlockLoc, OpenFile};
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

    fn file_mut(&mut self, id: InodeId) -> Result<&mut FileBody> {
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
    ) -> Result<Applied> {
        let index = self.writable(file_id)?.blocks.len();
        let index =
            u32::try_from(index).map_err(|_| crate::Error::new(ErrorKind::InvalidArgument, "too many blocks"))?;
        if block_id < self.data.next_block || self.data.blocks.contains_key(&block_id) {
            return err(ErrorKind::InvalidArgument, format!("block id {block_id} already used"));
        }
        match self.data.workers.get(&worker) {
            Some(w) if w.live && usize::from(shard) < w.shard_ports.len() => {}
            Some(_) => {
                return err(ErrorKind::NoWorkers, format!("worker {worker} shard {shard}"));
            }
            None => return err(ErrorKind::UnknownWorker, format!("worker {worker}")),
        }
        self.data.next_block = block_id + 1;
        self.file_mut(file_id)?.blocks.push(block_id);
        let info = BlockInfo { file: file_id, index, len: 0, worker, shard, reported: false };
        self.data.blocks.insert(block_id, info);
        Ok(Applied::BlockAdded { block_id, index })
    }

    pub(super) fn complete(
        &mut self,
        file_id: InodeId,
        length: u64,
        block_lens: &[u64],
        mtime: u64,
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
        let blocks = f.blocks.clone();
        for (b, &len) in blocks.iter().zip(block_lens) {
            if let Some(info) = self.data.blocks.get_mut(b) {
                info.len = len;
            }
        }
        let f = self.file_mut(file_id)?;
        f.length = length;
        f.state = FileState::Complete;
        if let Some(i) = self.data.inodes.get_mut(&file_id) {
            i.mtime = mtime;
        }
        Ok(Applied::Done)
    }

    /// Where the blocks are, for the report: per worker its blocks and the only copies among
    /// them, and the files with a block whose only copy is on a lost worker (the first
    /// `max_paths` paths, in path order). One pass over the block map.
    pub fn block_summary(&self, max_paths: usize) -> BlockSummary {
        let mut sum = BlockSummary::default();
        let mut lost_files = std::collections::BTreeSet::new();
        for info in self.data.blocks.values() {
            let w = sum.per_worker.entry(info.worker).or_default();
            w.blocks += 1;
            if self.data.ufs_files.contains_key(&info.file) {
                continue;
            }
            w.only_copies += 1;
            w.only_copy_bytes += info.len;
            if !self.data.workers.get(&info.worker).is_some_and(|w| w.live) {
                sum.lost_blocks += 1;
                lost_files.insert(info.file);
            }
        }
        sum.lost_files = lost_files.len() as u64;
        let mut paths: Vec<String> = lost_files.into_iter().filter_map(|id| self.path_of(id)).collect();
        paths.sort_unstable();
        paths.truncate(max_paths);
        sum.lost_paths = paths;
        sum
    }

    /// Every file being written (its writer has not completed it).
    pub fn writing_files(&self) -> impl Iterator<Item = InodeId> + '_ {
        self.data.inodes.values().filter_map(|i| match &i.body {
            InodeBody::File(f) if f.state == FileState::Writing => Some(i.id),
            _ => None,
        })
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

    /// Forgets blocks and queues a delete for each on its worker. Returns how many were queued.
    pub(super) fn drop_blocks(&mut self, blocks: &[BlockId]) -> usize {
        let mut queued = 0;
        for b in blocks {
            if let Some(info) = self.data.blocks.remove(b) {
                self.data.pending_deletes.entry(info.worker).or_default().insert(*b);
                queued += 1;
            }
        }
        queued
    }

    /// The block map of a complete file, with each block's shard address.
    pub fn open_file(&self, path: &CvPath) -> Result<OpenFile> {
        let id = self.lookup(path)?;
        let inode = self.inode(id)?;
        let f = self.file(id)?;
        if f.state != FileState::Complete {
            return err(ErrorKind::FileIncomplete, path.as_str());
        }
        let ufs = self.data.ufs_files.get(&id).cloned();
        let mut offset = 0;
        let mut blocks = Vec::with_capacity(f.blocks.len());
        for b in &f.blocks {
            let Some(info) = self.data.blocks.get(b) else {
                return err(ErrorKind::NotFound, format!("block {b} of {path}"));
            };
            let worker = self.data.workers.get(&info.worker);
            let worker_live = worker.is_some_and(|w| w.live);
            blocks.push(BlockLoc {
                block_id: *b,
                offset_in_file: offset,
                len: info.len,
                worker_id: info.worker,
                shard: info.shard,
                addr: worker.and_then(|w| w.shard_addr(info.shard)),
                worker_live,
                lost: !worker_live && ufs.is_none(),
            });
            offset += info.len;
        }
        Ok(OpenFile { file_id: id, length: f.length, version: f.version, mtime: inode.mtime, blocks, ufs })
    }
}

/// What [`State::block_summary`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BlockSummary {
    pub per_worker: std::collections::BTreeMap<WorkerId, WorkerBlocks>,
    pub lost_files: u64,
    pub lost_blocks: u64,
    pub lost_paths: Vec<String>,
}

/// One worker's share of the block map.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WorkerBlocks {
    pub blocks: u64,
    /// Blocks whose only copy is there (their file has no object-store copy).
    pub only_copies: u64,
    pub only_copy_bytes: u64,
}
