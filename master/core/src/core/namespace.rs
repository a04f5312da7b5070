//! The namespace: directories, files being written (blocks placed by consistent hashing),
//! completion with the file's tail, rename, delete, and the reads (open, stat, list).

use std::sync::Arc;

use super::{Inner, MasterCore, Pending, cv, lock};
use crate::error::{Error, ErrorKind, Result};
use crate::path::CvPath;
use crate::placement::PlacementRing;
use crate::state::{
    Applied, BlockId, EntryKind, EntryStat, Expect, InodeBody, InodeId, ListPage, Mutation, OpenFile, PlacedBlock,
    State, Tail, WorkerId,
};

/// A file `create` (or a record of an object) made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Created {
    pub file_id: InodeId,
    pub version: u64,
}

/// Where the client writes a new block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewBlock {
    pub block_id: BlockId,
    pub index: u32,
    pub worker_id: WorkerId,
    pub shard: u16,
    /// The shard's endpoint (see [`crate::state::PlacedBlock::addr`]).
    pub addr: Option<std::net::SocketAddr>,
    /// The other workers the block is written to before it is acknowledged, with their
    /// shard's endpoint (blocks whose only copy is in cv).
    pub replicas: Vec<(WorkerId, Option<std::net::SocketAddr>)>,
}

impl NewBlock {
    /// Block `block_id`, the file's `index`th, on `shard` of `worker` and of each of
    /// `replicas`, at those shards' addresses.
    fn new(st: &State, block_id: BlockId, index: u32, worker: WorkerId, shard: u16, replicas: &[WorkerId]) -> Self {
        let addr = |w: WorkerId| st.worker(w).and_then(|w| w.shard_addr(shard));
        let replicas = replicas.iter().map(|&r| (r, addr(r))).collect();
        Self { block_id, index, worker_id: worker, shard, addr: addr(worker), replicas }
    }
}

impl MasterCore {
    pub fn begin_mkdir(&self, path: &CvPath, parents: bool) -> Result<Pending<()>> {
        let (_, t) = self.submit(|_, now| {
            Ok(Mutation::Mkdir { path: path.as_str().to_owned(), parents, mode: 0o755, mtime: now })
        })?;
        Ok(Self::done((), t))
    }

    pub fn mkdir(&self, path: &str, parents: bool) -> Result<()> {
        self.begin_mkdir(&cv(path)?, parents)?.wait()
    }

    /// Creates a file for writing. `request_id` is the client's id of the call (0: none): a
    /// retry of a create that was applied, also after a master restart (which forgets the
    /// server's replies), is answered with the file it made while that is still being written.
    pub fn begin_create(&self, path: &CvPath, overwrite: bool, mode: u32, request_id: u64) -> Result<Pending<Created>> {
        let again = self.read(|st| Ok(st.created_by(path, request_id)))?;
        if let Some((file_id, version)) = again.value {
            self.touch(file_id);
            return Ok(Pending { value: Created { file_id, version }, ticket: again.ticket });
        }
        let (applied, t) = self.submit(|g, now| {
            let (path, file_id, version) = (path.as_str().to_owned(), g.state.next_inode_id(), g.state.next_version());
            Ok(if overwrite {
                // The file it replaces stays until this one is complete (atomic replace).
                Mutation::Replace { path, file_id, version, mode, mtime: now, request_id }
            } else {
                Mutation::Create { path, overwrite, file_id, version, mode, mtime: now, request_id }
            })
        })?;
        let Applied::Created { file_id, version } = applied else {
            return Err(Error::new(ErrorKind::InvalidArgument, "create did not create"));
        };
        self.touch(file_id);
        Ok(Self::done(Created { file_id, version }, t))
    }

    /// The writer of `file_id` is alive: its write lease starts again.
    fn touch(&self, file_id: InodeId) {
        lock(&self.writing).insert(file_id, self.clock.now_ms());
    }

    /// Removes files being written whose writer has been silent for the write lease
    /// (`MasterConfig::write_lease`); returns their paths. A file completed or removed
    /// meanwhile is only forgotten.
    pub fn expire_writers(&self) -> Result<Vec<String>> {
        let lease = self.config.write_lease.as_millis() as u64;
        let now = self.clock.now_ms();
        let expired: Vec<InodeId> =
            lock(&self.writing).iter().filter(|(_, at)| now.saturating_sub(**at) > lease).map(|(id, _)| *id).collect();
        let mut removed = Vec::new();
        for id in expired {
            let mut path = None;
            let result = self.submit(|g, now| {
                let p = g.state.writing_path(id).ok_or_else(|| Error::new(ErrorKind::NotFound, "not being written"))?;
                path = Some(p);
                // By id: a replacement held back leaves the version its path shows as it is.
                Ok(Mutation::Abandon { file_id: id, mtime: now })
            });
            lock(&self.writing).remove(&id);
            match result {
                Ok((_, t)) => {
                    t.wait()?;
                    removed.extend(path);
                }
                Err(e) if e.kind() == ErrorKind::NotFound && path.is_none() => {}
                Err(e) => return Err(e),
            }
        }
        Ok(removed)
    }

    /// Removes file `file_id` if it is still being written (its writer gives up): by id, so
    /// the version its path shows stays. A file complete or gone is left as it is.
    pub fn begin_abandon(&self, file_id: InodeId) -> Result<Pending<()>> {
        let (_, t) = self.submit(|_, now| Ok(Mutation::Abandon { file_id, mtime: now }))?;
        lock(&self.writing).remove(&file_id);
        Ok(Self::done((), t))
    }

    pub fn abandon(&self, file_id: InodeId) -> Result<()> {
        self.begin_abandon(file_id)?.wait()
    }

    pub fn create(&self, path: &str, overwrite: bool, mode: u32) -> Result<Created> {
        self.begin_create(&cv(path)?, overwrite, mode, 0)?.wait()
    }

    /// Allocates the next block of a file being written, placed by consistent hashing, with
    /// its other copies when its file's only copy is in cv ([`MasterConfig::replicas`]).
    ///
    /// [`MasterConfig::replicas`]: crate::MasterConfig::replicas
    pub fn begin_add_block(&self, file_id: InodeId) -> Result<Pending<NewBlock>> {
        self.place_block(file_id, None, &[])
    }

    /// Places a new block of file `file_id` (the next one, or a replacement of block `replace`)
    /// on workers not in `exclude`, and journals it.
    fn place_block(&self, file_id: InodeId, replace: Option<u32>, exclude: &[WorkerId]) -> Result<Pending<NewBlock>> {
        let vnodes = self.config.vnodes_per_shard;
        let want = self.config.replicas.max(1);
        let block_size = self.config.block_size;
        let mut placed = None;
        let (applied, t) = self.submit(|g, now| {
            // The id carries its shard (cv_wire::block_shard) so a worker can route
            // and refuse by id alone; placement hashes the sequence part.
            let seq = cv_wire::first_free_seq(g.state.next_block_id());
            let Some((owner, shard)) = g.ring(vnodes).place(seq) else {
                return Err(Error::new(ErrorKind::NoWorkers, "no live worker shard"));
            };
            let want = if g.state.store_backed(file_id) { 1 } else { want };
            // Along the ring from the block's key, passing over full workers and the ones the
            // writer could not reach; if all are full, the ring's owner, which refuses the
            // write with NoSpace.
            let mut copies = Vec::with_capacity(want);
            let Inner { state, ring, .. } = &*g;
            let ok = |w| state.has_room(w, block_size) && !exclude.contains(&w);
            ring.extend_copies(seq, shard, &mut copies, want, |w| state.domain(w), ok);
            if copies.is_empty() {
                if exclude.contains(&owner) {
                    let why = format!("no live worker with room for shard {shard} besides {exclude:?}");
                    return Err(Error::new(ErrorKind::NoWorkers, why));
                }
                copies.push(owner);
            }
            let worker = copies[0];
            let block_id = cv_wire::block_id(seq, shard);
            let replicas = copies.split_off(1);
            // The addresses are read under the same lock as the placement; the index comes
            // with what the mutation applied.
            placed = Some(NewBlock::new(&g.state, block_id, 0, worker, shard, &replicas));
            // Stamped with the time: the writer's progress, which a new leader counts its
            // write lease from.
            let mtime = now;
            Ok(match replace {
                Some(index) => Mutation::ReplaceBlockTimed { file_id, index, block_id, worker, shard, replicas, mtime },
                None => Mutation::AddBlockTimed { file_id, block_id, worker, shard, replicas, mtime },
            })
        })?;
        let (Applied::BlockAdded { block_id, index }, Some(mut block)) = (applied, placed) else {
            return Err(Error::new(ErrorKind::InvalidArgument, "add_block did not add"));
        };
        debug_assert_eq!(block.block_id, block_id);
        block.index = index;
        Ok(Self::done(block, t))
    }

    pub fn add_block(&self, file_id: InodeId) -> Result<NewBlock> {
        self.begin_add_block(file_id)?.wait()
    }

    /// Add-block for block `index` of the file, idempotent: a retry whose first reply was
    /// lost gets the block it already has instead of a second one. A block there with a copy
    /// on a worker in `exclude` (the writer could not store it there) is replaced by a new
    /// block placed on other workers.
    pub fn begin_add_block_at(&self, file_id: InodeId, index: u32, exclude: &[WorkerId]) -> Result<Pending<NewBlock>> {
        let existing = self.read(|st| {
            Ok(st.written_block(file_id, index)?.map(|(block_id, b)| {
                let excluded = b.copies().any(|w| exclude.contains(&w));
                (excluded, NewBlock::new(st, block_id, index, b.worker, b.shard, &b.replicas))
            }))
        })?;
        let Pending { value, ticket } = existing;
        self.touch(file_id);
        match value {
            Some((false, block)) => Ok(Pending { value: block, ticket }),
            Some((true, _)) => self.place_block(file_id, Some(index), exclude),
            None => {
                let pending = self.place_block(file_id, None, exclude)?;
                if pending.value.index != index {
                    // Another add-block for this file raced in between; the writer is confused.
                    return Err(Error::new(
                        ErrorKind::InvalidArgument,
                        format!("block {index} of file {file_id} was allocated as {}", pending.value.index),
                    ));
                }
                Ok(pending)
            }
        }
    }

    /// Completes a file. `tail` is `(offset, bytes)`: the file's last bytes, which the tail
    /// cache keeps (trimmed to the footer size of the file's format). A file created over
    /// another is published at its path now, replacing it, if `expect` holds there (`None`:
    /// whatever it holds).
    pub fn begin_complete(
        &self,
        file_id: InodeId,
        length: u64,
        block_lens: Vec<u64>,
        tail: Option<(u64, Vec<u8>)>,
        expect: Option<Expect>,
    ) -> Result<Pending<()>> {
        if let Some(big) = block_lens.iter().find(|&&l| l > self.config.block_size) {
            return Err(Error::new(ErrorKind::InvalidArgument, format!("block of {big} bytes")));
        }
        if let Some((offset, bytes)) = &tail
            && offset.checked_add(bytes.len() as u64) != Some(length)
        {
            return Err(Error::new(ErrorKind::InvalidArgument, "tail does not end at the file's end"));
        }
        // A retry of a completion that was applied (its reply lost, or the master restarted
        // since, which forgets replies): the same answer, once what was read is durable.
        let again = self.read(|st| Ok(st.completed_as(file_id, length, &block_lens)))?;
        if again.value {
            return Ok(Pending { value: (), ticket: again.ticket });
        }

        let (mut version, mut replaced) = (0, None);
        let (_, t) = self.submit(|g, now| {
            version = g.state.data().inodes.get(&file_id).map_or(0, |i| match &i.body {
                InodeBody::File(f) => f.version,
                InodeBody::Dir { .. } => 0,
            });
            replaced = g.state.replaced_by(file_id);
            Ok(match expect {
                None => Mutation::Complete { file_id, length, block_lens, mtime: now },
                Some(expect) => Mutation::CompleteIf { file_id, length, block_lens, mtime: now, expect },
            })
        })?;
        lock(&self.writing).remove(&file_id);
        if let Some(old) = replaced {
            lock(&self.tails).remove(old);
        }
        // Its blocks may have fewer copies than wanted (workers full when they were placed):
        // the next re-replication pass looks.
        self.copies_changed();
        if let Some((_, bytes)) = tail {
            self.put_tail(file_id, version, length, &bytes);
        }
        Ok(Self::done((), t))
    }

    pub fn complete(
        &self,
        file_id: InodeId,
        length: u64,
        block_lens: Vec<u64>,
        tail: Option<(u64, Vec<u8>)>,
    ) -> Result<()> {
        self.begin_complete(file_id, length, block_lens, tail, None)?.wait()
    }

    /// Makes `path` a new complete file listing the blocks of the complete files at `sources`,
    /// in order, without copying them; a file at `path` is replaced in the same step.
    pub fn begin_compose(&self, path: &CvPath, sources: &[CvPath]) -> Result<Pending<Created>> {
        let mut replaced = None;
        let (applied, t) = self.submit(|g, now| {
            let ids = sources.iter().map(|p| g.state.lookup(p)).collect::<Result<Vec<_>>>()?;
            replaced = g.state.stat(path).ok().filter(|s| s.kind == EntryKind::File).map(|s| s.id);
            Ok(Mutation::Compose {
                path: path.as_str().to_owned(),
                sources: ids,
                file_id: g.state.next_inode_id(),
                version: g.state.next_version(),
                mode: 0o644,
                mtime: now,
            })
        })?;
        let Applied::Created { file_id, version } = applied else {
            return Err(Error::new(ErrorKind::InvalidArgument, "compose did not create"));
        };
        if let Some(old) = replaced {
            lock(&self.tails).remove(old);
        }
        // Its blocks are the sources' copies: the re-replication pass counts them for it too.
        self.copies_changed();
        Ok(Self::done(Created { file_id, version }, t))
    }

    pub fn begin_rename(&self, src: &CvPath, dst: &CvPath) -> Result<Pending<()>> {
        let (_, t) = self.submit(|_, now| {
            Ok(Mutation::Rename { src: src.as_str().to_owned(), dst: dst.as_str().to_owned(), mtime: now })
        })?;
        Ok(Self::done((), t))
    }

    pub fn rename(&self, src: &str, dst: &str) -> Result<()> {
        self.begin_rename(&cv(src)?, &cv(dst)?)?.wait()
    }

    /// Deletes a file or directory in cv only (under a cache-mode mount: its object is gone from
    /// the store); returns how many blocks were queued for deletion.
    pub fn begin_delete(&self, path: &CvPath, recursive: bool) -> Result<Pending<usize>> {
        self.begin_delete_as(path, recursive, false)
    }

    /// Deletes `path` through cv: the objects behind it are queued for deletion from their
    /// stores in the same journaled step.
    pub fn begin_remove(&self, path: &CvPath, recursive: bool) -> Result<Pending<usize>> {
        self.begin_delete_as(path, recursive, true)
    }

    fn begin_delete_as(&self, path: &CvPath, recursive: bool, objects_too: bool) -> Result<Pending<usize>> {
        let mut file = None;
        let (applied, t) = self.submit(|g, now| {
            file = g.state.stat(path).ok().filter(|s| s.kind == EntryKind::File).map(|s| s.id);
            let (path, mtime) = (path.as_str().to_owned(), now);
            Ok(if objects_too {
                Mutation::Remove { path, recursive, mtime }
            } else {
                Mutation::Delete { path, recursive, mtime }
            })
        })?;
        if let Some(f) = file {
            lock(&self.tails).remove(f);
        }
        let blocks = match applied {
            Applied::Deleted { blocks } => blocks,
            _ => 0,
        };
        Ok(Self::done(blocks, t))
    }

    pub fn delete(&self, path: &str, recursive: bool) -> Result<usize> {
        self.begin_delete(&cv(path)?, recursive)?.wait()
    }

    pub fn begin_open(&self, path: &CvPath) -> Result<Pending<OpenFile>> {
        let mut g = lock(&self.inner);
        self.healthy(&mut g)?;
        let info = self.open_in(&mut g, path, true)?;
        Ok(Pending { value: info, ticket: self.read_ticket(g.last_seq) })
    }

    /// [`Self::begin_open`] for an open whose first look ([`Self::begin_open_cached`]) asked
    /// for a check at the store: its tail lookup was counted then.
    pub fn begin_open_checked(&self, path: &CvPath) -> Result<Pending<OpenFile>> {
        let mut g = lock(&self.inner);
        self.healthy(&mut g)?;
        let info = self.open_in(&mut g, path, false)?;
        Ok(Pending { value: info, ticket: self.read_ticket(g.last_seq) })
    }

    /// Under the state lock: the open of `path` (resolved once), its blocks (re-homed for a
    /// copy of an object) and its tail (looked up once; `count`: a hit or miss of the tail
    /// cache).
    pub(super) fn open_in(&self, g: &mut Inner, path: &CvPath, count: bool) -> Result<OpenFile> {
        g.ring(self.config.vnodes_per_shard);
        let mut f = g.state.open_file(path)?;
        if f.ufs.is_some() {
            rehome(&g.state, &g.ring, &mut f.blocks);
        }
        f.tail = if f.length == 0 {
            Tail::Cached { offset: 0, bytes: Arc::from(&[][..]) }
        } else {
            let mut tails = lock(&self.tails);
            let cached = if count { tails.get(f.file_id, f.version) } else { tails.peek(f.file_id, f.version) };
            match cached {
                Some(t) => Tail::Cached { offset: t.offset, bytes: t.bytes },
                None => Tail::Evicted,
            }
        };
        Ok(f)
    }

    pub fn open(&self, path: &str) -> Result<OpenFile> {
        self.begin_open(&cv(path)?)?.wait()
    }

    pub async fn open_async(&self, path: &str) -> Result<OpenFile> {
        self.begin_open(&cv(path)?)?.wait_async().await
    }

    pub fn begin_stat(&self, path: &CvPath) -> Result<Pending<EntryStat>> {
        self.read(|st| st.stat(path))
    }

    pub fn stat(&self, path: &str) -> Result<EntryStat> {
        self.begin_stat(&cv(path)?)?.wait()
    }

    pub fn begin_list(&self, path: &CvPath, start_after: Option<&str>, limit: usize) -> Result<Pending<ListPage>> {
        self.read(|st| st.list(path, start_after, limit))
    }

    pub fn list(&self, path: &str, start_after: Option<&str>, limit: usize) -> Result<ListPage> {
        self.begin_list(&cv(path)?, start_after, limit)?.wait()
    }
}

/// Points each block of a file the object store holds at the worker the ring puts it on now
/// ([`PlacementRing::successor`]: the first live shard of its index after its key), which fills it from
/// the store at its first read. While the live set is the one the block was placed in, that is
/// where it was placed; a worker that is lost hands its share to the next ones, and one that
/// joins takes its share (about 1/n of the blocks, all of them to it). Nothing is journaled: the
/// choice is a function of the live set, the same for every reader, and the worker that fills a
/// block becomes its recorded owner when it reports holding it.
fn rehome(st: &State, ring: &PlacementRing, blocks: &mut [PlacedBlock]) {
    for b in blocks.iter_mut() {
        let shard = cv_wire::block_shard(b.block_id);
        let Some(worker) = ring.successor(cv_wire::block_seq(b.block_id), shard) else { continue };
        if worker == b.worker_id && b.worker_live {
            continue;
        }
        b.worker_id = worker;
        b.shard = shard;
        b.addr = st.worker(worker).and_then(|w| w.shard_addr(shard));
        b.worker_live = true;
        b.lost = false;
    }
}
