//! `MasterCore`: the state machine, the journal, placement and the tail cache behind one
//! thread-safe facade for the server. Every mutation is applied under the state lock, appended
//! to the journal in sequence order, and acknowledged only when its ticket says it is durable.

use std::sync::{Arc, Mutex, MutexGuard};

use crate::config::{Clock, MasterConfig};
use crate::error::{Error, ErrorKind, Result};
use crate::journal::{FileStorage, Journal, Storage, Ticket, WriterStats, encode_record, encode_snapshot};
use crate::path::CvPath;
use crate::placement::Ring;
use crate::state::{
    Applied, BlockId, BlockLoc, EntryKind, InodeId, ListPage, Mount, MountMode, Mutation, Stat, State, StateData,
    WorkerId,
};
use crate::tail_cache::{TailCache, TailStats};
use cv_wire::footer;

/// The file's trailing bytes as `open` returns them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tail {
    /// `bytes` are the file's bytes from `offset` to its end.
    Cached { offset: u64, bytes: Arc<[u8]> },
    /// Not cached (evicted, or lost in a restart): read the footer from the workers.
    Evicted,
}

/// The one-round-trip answer to `open`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenInfo {
    pub file_id: InodeId,
    pub length: u64,
    pub version: u64,
    pub mtime: u64,
    pub blocks: Vec<BlockLoc>,
    pub tail: Tail,
    /// The object the file is a copy of (cache mode).
    pub ufs: Option<crate::state::UfsObject>,
}

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
    pub host: String,
    pub port: u16,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeartbeatReply {
    /// Blocks the worker must drop.
    pub delete_blocks: Vec<BlockId>,
    /// Blocks the worker may evict again (their files were exported).
    pub unpin_blocks: Vec<BlockId>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TickReport {
    pub lost_workers: Vec<WorkerId>,
    pub missing_blocks: Vec<BlockId>,
}

/// The journal's two byte stores.
#[derive(Debug)]
pub struct Storages {
    pub journal: Box<dyn Storage>,
    pub snapshot: Box<dyn Storage>,
}

/// What recovery found when the core opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecoveryInfo {
    pub last_seq: u64,
    pub snapshot_seq: u64,
    pub replayed: u64,
    pub cut_bytes: u64,
}

/// A result that is valid once its ticket resolves (the mutation, or what a read observed,
/// is durable). Wait blocking or async.
#[derive(Debug)]
#[must_use = "nothing is acknowledged until the ticket is waited on"]
pub struct Pending<T> {
    value: T,
    ticket: Ticket,
}

impl<T> Pending<T> {
    pub fn wait(self) -> Result<T> {
        self.ticket.wait()?;
        Ok(self.value)
    }

    pub async fn wait_async(self) -> Result<T> {
        self.ticket.wait_async().await?;
        Ok(self.value)
    }
}

#[derive(Debug)]
struct Inner {
    state: State,
    last_seq: u64,
    since_snapshot: u64,
    ring: Ring,
    ring_epoch: u64,
}

#[derive(Debug)]
pub struct MasterCore {
    inner: Mutex<Inner>,
    tails: Mutex<TailCache>,
    journal: Journal,
    config: MasterConfig,
    clock: Arc<dyn Clock>,
    recovery: RecoveryInfo,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Nothing panics while holding these locks by design; if a bug did, the data is still the
    // last consistent value (apply changes nothing on error).
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn cv(raw: &str) -> Result<CvPath> {
    Ok(CvPath::parse(raw)?)
}

impl MasterCore {
    /// Opens with real files `journal` and `snapshot` in `config.journal_dir`.
    pub fn start_dir(config: MasterConfig, clock: Arc<dyn Clock>) -> Result<Self> {
        std::fs::create_dir_all(&config.journal_dir).map_err(|e| Error::io("create journal dir", &e))?;
        let storages = Storages {
            journal: Box::new(FileStorage::new(config.journal_dir.join("journal"))),
            snapshot: Box::new(FileStorage::new(config.journal_dir.join("snapshot"))),
        };
        Self::start(config, storages, clock)
    }

    /// Recovers from the given storages and starts the journal writer.
    pub fn start(config: MasterConfig, storages: Storages, clock: Arc<dyn Clock>) -> Result<Self> {
        if config.block_size == 0 || config.group_commit_max_bytes == 0 {
            return Err(Error::new(ErrorKind::InvalidArgument, "block size and batch size must be > 0"));
        }
        let (journal, rec) = Journal::open(storages.journal, storages.snapshot, config.group_commit_max_bytes)?;
        let recovery = RecoveryInfo {
            last_seq: rec.last_seq,
            snapshot_seq: rec.snapshot_seq,
            replayed: rec.replayed,
            cut_bytes: rec.cut_bytes,
        };
        let inner = Inner {
            state: rec.state,
            last_seq: rec.last_seq,
            since_snapshot: rec.replayed,
            ring: Ring::default(),
            ring_epoch: u64::MAX,
        };
        Ok(Self {
            inner: Mutex::new(inner),
            tails: Mutex::new(TailCache::new(config.tail_budget_bytes)),
            journal,
            config,
            clock,
            recovery,
        })
    }

    pub fn config(&self) -> &MasterConfig {
        &self.config
    }

    pub fn recovery(&self) -> RecoveryInfo {
        self.recovery
    }

    pub fn tail_stats(&self) -> TailStats {
        lock(&self.tails).stats()
    }

    pub fn journal_stats(&self) -> &WriterStats {
        self.journal.stats()
    }

    /// A copy of the durable part of the state (tests, debugging).
    pub fn state_data(&self) -> StateData {
        lock(&self.inner).state.data().clone()
    }

    /// The last sequence number applied in memory.
    pub fn last_seq(&self) -> u64 {
        lock(&self.inner).last_seq
    }

    fn healthy(&self) -> Result<()> {
        if self.journal.is_failed() {
            return Err(Error::new(ErrorKind::Poisoned, "journal failed; restart the master"));
        }
        Ok(())
    }

    /// Builds a mutation from the current state (ids, time, placement), applies it, queues
    /// it to the journal in sequence order, and returns what it did plus its durability ticket.
    fn submit(&self, build: impl FnOnce(&mut Inner, u64) -> Result<Mutation>) -> Result<(Applied, Ticket)> {
        let mut g = lock(&self.inner);
        self.healthy()?;
        let m = build(&mut g, self.clock.now_ms())?;
        let seq = g.last_seq + 1;
        let bytes = encode_record(seq, &m)?;
        let applied = g.state.apply(&m)?;
        g.last_seq = seq;
        let ticket = self.journal.append(seq, bytes);
        g.since_snapshot += 1;
        if self.config.snapshot_every > 0 && g.since_snapshot >= self.config.snapshot_every {
            self.start_snapshot(&mut g);
        }
        Ok((applied, ticket))
    }

    fn start_snapshot(&self, g: &mut Inner) {
        match encode_snapshot(g.last_seq, g.state.data()) {
            Ok(bytes) => {
                g.since_snapshot = 0;
                // Failures poison the journal; later requests see that.
                drop(self.journal.snapshot(g.last_seq, bytes));
            }
            Err(e) => tracing::error!(error = %e, "snapshot encoding failed"),
        }
    }

    /// Writes a snapshot now and waits for it (and the journal restart) to be durable.
    pub fn snapshot_now(&self) -> Result<u64> {
        let ticket = {
            let mut g = lock(&self.inner);
            self.healthy()?;
            let bytes = encode_snapshot(g.last_seq, g.state.data())?;
            g.since_snapshot = 0;
            self.journal.snapshot(g.last_seq, bytes)
        };
        ticket.wait()
    }

    /// A read of the state, valid once everything it could have observed is durable.
    fn read<T>(&self, f: impl FnOnce(&State) -> Result<T>) -> Result<Pending<T>> {
        let g = lock(&self.inner);
        self.healthy()?;
        let value = f(&g.state)?;
        let ticket = if self.config.read_waits_for_durability {
            self.journal.wait_for(g.last_seq)
        } else {
            Ticket::Ready(g.last_seq)
        };
        Ok(Pending { value, ticket })
    }

    fn done<T>(value: T, ticket: Ticket) -> Pending<T> {
        Pending { value, ticket }
    }

    // ---- namespace -------------------------------------------------------------------------

    pub fn begin_mkdir(&self, path: &str, parents: bool) -> Result<Pending<()>> {
        let path = cv(path)?;
        let (_, t) = self.submit(|_, now| {
            Ok(Mutation::Mkdir { path: path.as_str().to_owned(), parents, mode: 0o755, mtime: now })
        })?;
        Ok(Self::done((), t))
    }

    pub fn mkdir(&self, path: &str, parents: bool) -> Result<()> {
        self.begin_mkdir(path, parents)?.wait()
    }

    pub fn begin_create(&self, path: &str, overwrite: bool, mode: u32) -> Result<Pending<Created>> {
        let path = cv(path)?;
        let mut replaced = None;
        let (applied, t) = self.submit(|g, now| {
            replaced = g.state.stat(&path).ok().filter(|s| s.kind == EntryKind::File).map(|s| s.id);
            Ok(Mutation::Create {
                path: path.as_str().to_owned(),
                overwrite,
                file_id: g.state.next_inode_id(),
                version: g.state.next_version(),
                mode,
                mtime: now,
            })
        })?;
        let Applied::Created { file_id, version } = applied else {
            return Err(Error::new(ErrorKind::InvalidArgument, "create did not create"));
        };
        if let Some(old) = replaced {
            lock(&self.tails).remove(old);
        }
        Ok(Self::done(Created { file_id, version }, t))
    }

    pub fn create(&self, path: &str, overwrite: bool, mode: u32) -> Result<Created> {
        self.begin_create(path, overwrite, mode)?.wait()
    }

    /// Allocates the next block of a file being written, placed by consistent hashing.
    pub fn begin_add_block(&self, file_id: InodeId) -> Result<Pending<NewBlock>> {
        let vnodes = self.config.vnodes_per_shard;
        let (applied, t, worker) = {
            let mut placed = None;
            let (applied, t) = self.submit(|g, _| {
                if g.ring_epoch != g.state.live_epoch() {
                    g.ring = Ring::build(&g.state.live_shards(), vnodes);
                    g.ring_epoch = g.state.live_epoch();
                }
                // The id carries its shard (cv_wire::block_shard) so a worker can route
                // and refuse by id alone; placement hashes the sequence part.
                let seq = cv_wire::first_free_seq(g.state.next_block_id());
                let Some((worker, shard)) = g.ring.place(seq) else {
                    return Err(Error::new(ErrorKind::NoWorkers, "no live worker shard"));
                };
                let block_id = cv_wire::block_id(seq, shard);
                let w = g.state.worker(worker);
                let host = w.map(|w| w.host.clone()).unwrap_or_default();
                let port = w.and_then(|w| w.shard_ports.get(usize::from(shard)).copied()).unwrap_or(0);
                placed = Some((worker, shard, host, port));
                Ok(Mutation::AddBlock { file_id, block_id, worker, shard })
            })?;
            (applied, t, placed)
        };
        let (Applied::BlockAdded { block_id, index }, Some((worker_id, shard, host, port))) = (applied, worker) else {
            return Err(Error::new(ErrorKind::InvalidArgument, "add_block did not add"));
        };
        Ok(Self::done(NewBlock { block_id, index, worker_id, shard, host, port }, t))
    }

    pub fn add_block(&self, file_id: InodeId) -> Result<NewBlock> {
        self.begin_add_block(file_id)?.wait()
    }

    /// Add-block for block `index` of the file, idempotent: a retry whose first
    /// reply was lost gets the block it already has instead of a second one.
    pub fn begin_add_block_at(&self, file_id: InodeId, index: u32) -> Result<Pending<NewBlock>> {
        let existing = self.read(|st| {
            Ok(st.written_block(file_id, index)?.map(|(block_id, b)| {
                let w = st.worker(b.worker);
                NewBlock {
                    block_id,
                    index,
                    worker_id: b.worker,
                    shard: b.shard,
                    host: w.map(|w| w.host.clone()).unwrap_or_default(),
                    port: w.and_then(|w| w.shard_ports.get(usize::from(b.shard)).copied()).unwrap_or(0),
                }
            }))
        })?;
        let Pending { value, ticket } = existing;
        match value {
            Some(block) => Ok(Pending { value: block, ticket }),
            None => {
                let pending = self.begin_add_block(file_id)?;
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
    /// cache keeps (trimmed to the footer size of the file's format).
    pub fn begin_complete(
        &self,
        file_id: InodeId,
        length: u64,
        block_lens: Vec<u64>,
        tail: Option<(u64, Vec<u8>)>,
    ) -> Result<Pending<()>> {
        if let Some(big) = block_lens.iter().find(|&&l| l > self.config.block_size) {
            return Err(Error::new(ErrorKind::InvalidArgument, format!("block of {big} bytes")));
        }
        if let Some((offset, bytes)) = &tail
            && offset.checked_add(bytes.len() as u64) != Some(length)
        {
            return Err(Error::new(ErrorKind::InvalidArgument, "tail does not end at the file's end"));
        }
        let mut version = 0;
        let (_, t) = self.submit(|g, now| {
            version = g.state.data().inodes.get(&file_id).map_or(0, |i| match &i.body {
                crate::state::InodeBody::File(f) => f.version,
                crate::state::InodeBody::Dir { .. } => 0,
            });
            Ok(Mutation::Complete { file_id, length, block_lens, mtime: now })
        })?;
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
        self.begin_complete(file_id, length, block_lens, tail)?.wait()
    }

    pub fn begin_rename(&self, src: &str, dst: &str) -> Result<Pending<()>> {
        let (src, dst) = (cv(src)?, cv(dst)?);
        let (_, t) = self.submit(|_, now| {
            Ok(Mutation::Rename { src: src.as_str().to_owned(), dst: dst.as_str().to_owned(), mtime: now })
        })?;
        Ok(Self::done((), t))
    }

    pub fn rename(&self, src: &str, dst: &str) -> Result<()> {
        self.begin_rename(src, dst)?.wait()
    }

    /// Deletes a file or directory in cv only (under a cache-mode mount: its object is gone from
    /// the store); returns how many blocks were queued for deletion.
    pub fn begin_delete(&self, path: &str, recursive: bool) -> Result<Pending<usize>> {
        self.begin_delete_as(path, recursive, false)
    }

    /// Deletes `path` through cv: the objects behind it are queued for deletion from their
    /// stores in the same journaled step.
    pub fn begin_remove(&self, path: &str, recursive: bool) -> Result<Pending<usize>> {
        self.begin_delete_as(path, recursive, true)
    }

    fn begin_delete_as(&self, path: &str, recursive: bool, objects_too: bool) -> Result<Pending<usize>> {
        let path = cv(path)?;
        let mut file = None;
        let (applied, t) = self.submit(|g, now| {
            file = g.state.stat(&path).ok().filter(|s| s.kind == EntryKind::File).map(|s| s.id);
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
        self.begin_delete(path, recursive)?.wait()
    }

    pub fn begin_open(&self, path: &str) -> Result<Pending<OpenInfo>> {
        let path = cv(path)?;
        let pending = self.read(|st| st.open_file(&path))?;
        let f = &pending.value;
        let tail = if f.length == 0 {
            Tail::Cached { offset: 0, bytes: Arc::from(&[][..]) }
        } else {
            match lock(&self.tails).get(f.file_id, f.version) {
                Some(t) => Tail::Cached { offset: t.offset, bytes: t.bytes },
                None => Tail::Evicted,
            }
        };
        let Pending { value: f, ticket } = pending;
        let info = OpenInfo {
            file_id: f.file_id,
            length: f.length,
            version: f.version,
            mtime: f.mtime,
            blocks: f.blocks,
            tail,
            ufs: f.ufs,
        };
        Ok(Pending { value: info, ticket })
    }

    pub fn open(&self, path: &str) -> Result<OpenInfo> {
        self.begin_open(path)?.wait()
    }

    pub async fn open_async(&self, path: &str) -> Result<OpenInfo> {
        self.begin_open(path)?.wait_async().await
    }

    pub fn begin_stat(&self, path: &str) -> Result<Pending<Stat>> {
        let path = cv(path)?;
        self.read(|st| st.stat(&path))
    }

    pub fn stat(&self, path: &str) -> Result<Stat> {
        self.begin_stat(path)?.wait()
    }

    pub fn begin_list(&self, path: &str, start_after: Option<&str>, limit: usize) -> Result<Pending<ListPage>> {
        let path = cv(path)?;
        self.read(|st| st.list(&path, start_after, limit))
    }

    pub fn list(&self, path: &str, start_after: Option<&str>, limit: usize) -> Result<ListPage> {
        self.begin_list(path, start_after, limit)?.wait()
    }

    // ---- object storage --------------------------------------------------------------------

    /// Records a complete file that is a copy of `object` (`length` bytes, the store's `mtime`),
    /// its blocks placed by consistent hashing. The caller puts the tail in with [`Self::put_tail`]
    /// (read while the record is made durable).
    pub fn begin_ufs_file(
        &self,
        path: &str,
        object: crate::state::UfsObject,
        length: u64,
        mtime: u64,
    ) -> Result<Pending<Created>> {
        let path = cv(path)?;
        let block_size = self.config.block_size;
        let vnodes = self.config.vnodes_per_shard;
        let mut replaced = None;
        let (applied, t) = self.submit(|g, _| {
            replaced = g.state.stat(&path).ok().filter(|s| s.kind == EntryKind::File).map(|s| s.id);
            if g.ring_epoch != g.state.live_epoch() {
                g.ring = Ring::build(&g.state.live_shards(), vnodes);
                g.ring_epoch = g.state.live_epoch();
            }
            let n = length.div_ceil(block_size);
            let first = cv_wire::first_free_seq(g.state.next_block_id());
            let mut placement = Vec::with_capacity(n as usize);
            for i in 0..n {
                let Some(p) = g.ring.place(first + i) else {
                    return Err(Error::new(ErrorKind::NoWorkers, "no live worker shard"));
                };
                placement.push(p);
            }
            Ok(Mutation::UfsFile { path: path.as_str().to_owned(), object, length, block_size, placement, mtime })
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
    /// cache, trimmed to the footer size of the file's format.
    pub fn put_tail(&self, file_id: InodeId, version: u64, length: u64, bytes: &[u8]) {
        let need = footer::tail_len(length, bytes, self.config.default_tail_bytes);
        let keep = (need as usize).min(bytes.len());
        lock(&self.tails).insert(file_id, version, length - keep as u64, bytes[bytes.len() - keep..].into());
    }

    /// Whether the tail of the complete file at `path` is in the tail cache.
    pub fn has_tail(&self, path: &str) -> bool {
        let Ok(path) = cv(path) else { return false };
        // A stat, not the block map: this runs before every open under a cache-mode mount.
        let Ok(st) = lock(&self.inner).state.stat(&path) else { return false };
        st.kind == EntryKind::File && (st.length == 0 || lock(&self.tails).contains(st.id))
    }

    /// Renames `src` to `dst` and points each unchanged (file id, version) at its copy; the
    /// objects they were copies of are queued for deletion.
    pub fn begin_rename_objects(
        &self,
        src: &str,
        dst: &str,
        objects: Vec<(InodeId, u64, crate::state::UfsObject)>,
    ) -> Result<Pending<()>> {
        let (src, dst) = (cv(src)?, cv(dst)?);
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
    pub fn begin_exported(
        &self,
        file_id: InodeId,
        version: u64,
        object: crate::state::UfsObject,
    ) -> Result<Pending<()>> {
        let (_, t) = self.submit(|_, _| Ok(Mutation::Exported { file_id, version, object }))?;
        Ok(Self::done((), t))
    }

    /// Drops the cached blocks of object copies at or under `path`: (files, blocks, skipped).
    pub fn begin_free(&self, path: &str) -> Result<Pending<(u64, u64, u64)>> {
        let path = cv(path)?;
        let (applied, t) = self.submit(|_, _| Ok(Mutation::Free { path: path.as_str().to_owned() }))?;
        let Applied::Freed { files, blocks, skipped } = applied else {
            return Err(Error::new(ErrorKind::InvalidArgument, "free did not free"));
        };
        Ok(Self::done((files, blocks, skipped), t))
    }

    /// A read of the state for the object-storage layer (which object backs which file...).
    pub fn inspect<T>(&self, f: impl FnOnce(&State) -> T) -> T {
        f(&lock(&self.inner).state)
    }

    // ---- mounts ----------------------------------------------------------------------------

    pub fn begin_mount(
        &self,
        path: &str,
        ufs_url: &str,
        mode: MountMode,
        options: Vec<(String, String)>,
    ) -> Result<Pending<()>> {
        let path = cv(path)?;
        let (_, t) = self.submit(|_, _| {
            Ok(Mutation::Mount { path: path.as_str().to_owned(), ufs_url: ufs_url.to_owned(), mode, options })
        })?;
        Ok(Self::done((), t))
    }

    pub fn mount(&self, path: &str, ufs_url: &str, mode: MountMode, options: Vec<(String, String)>) -> Result<()> {
        self.begin_mount(path, ufs_url, mode, options)?.wait()
    }

    /// Removes the mount at `path`. An fs-mode mount with files not yet exported is refused
    /// (`NotEmpty`, naming how many) unless `force`: they would never reach the store.
    pub fn begin_unmount(&self, path: &str, force: bool) -> Result<Pending<()>> {
        let path = cv(path)?;
        let (_, t) = self.submit(|g, _| {
            let unexported = if force { 0 } else { g.state.unexported_under(&path) };
            if unexported > 0 {
                return Err(Error::new(
                    ErrorKind::NotEmpty,
                    format!(
                        "mount at {path}: {unexported} file(s) not yet exported to the store; wait for the \
                         export (cvctl report shows the backlog) or unmount with force (they stay in cv only)"
                    ),
                ));
            }
            Ok(Mutation::Unmount { path: path.as_str().to_owned() })
        })?;
        Ok(Self::done((), t))
    }

    pub fn unmount(&self, path: &str, force: bool) -> Result<()> {
        self.begin_unmount(path, force)?.wait()
    }

    pub fn list_mounts(&self) -> Result<Vec<Mount>> {
        self.read(|st| Ok(st.mounts()))?.wait()
    }

    // ---- workers ---------------------------------------------------------------------------

    /// Registers a worker; `previous` is the id it had before a restart (kept if known).
    pub fn begin_register_worker(
        &self,
        previous: Option<WorkerId>,
        host: &str,
        shard_ports: Vec<u16>,
        capacity: u64,
    ) -> Result<Pending<WorkerId>> {
        let (applied, t) = self.submit(|g, now| {
            // A worker that lost its id (its process restarted) but comes back at the same
            // address is the same worker: its blocks stay its own.
            let same_addr = || {
                g.state.data().workers.values().find(|w| w.host == host && w.shard_ports == shard_ports).map(|w| w.id)
            };
            let worker_id = match previous {
                Some(id) if g.state.worker(id).is_some() => id,
                _ => same_addr().unwrap_or_else(|| g.state.next_worker_id()),
            };
            Ok(Mutation::RegisterWorker { worker_id, host: host.to_owned(), shard_ports, capacity, now })
        })?;
        let Applied::WorkerRegistered { worker_id } = applied else {
            return Err(Error::new(ErrorKind::InvalidArgument, "register did not register"));
        };
        Ok(Self::done(worker_id, t))
    }

    pub fn register_worker(
        &self,
        previous: Option<WorkerId>,
        host: &str,
        shard_ports: Vec<u16>,
        capacity: u64,
    ) -> Result<WorkerId> {
        self.begin_register_worker(previous, host, shard_ports, capacity)?.wait()
    }

    pub fn begin_heartbeat(
        &self,
        worker_id: WorkerId,
        capacity: u64,
        used: u64,
        added: Vec<BlockId>,
        removed: Vec<BlockId>,
    ) -> Result<Pending<HeartbeatReply>> {
        let (applied, t) =
            self.submit(|_, now| Ok(Mutation::Heartbeat { worker_id, now, capacity, used, added, removed }))?;
        let (delete_blocks, unpin_blocks) = match applied {
            Applied::Heartbeat { delete_blocks, unpin_blocks } => (delete_blocks, unpin_blocks),
            _ => (Vec::new(), Vec::new()),
        };
        Ok(Self::done(HeartbeatReply { delete_blocks, unpin_blocks }, t))
    }

    pub fn heartbeat(
        &self,
        worker_id: WorkerId,
        capacity: u64,
        used: u64,
        added: Vec<BlockId>,
        removed: Vec<BlockId>,
    ) -> Result<HeartbeatReply> {
        self.begin_heartbeat(worker_id, capacity, used, added, removed)?.wait()
    }

    /// Marks workers silent for longer than the heartbeat timeout as lost.
    pub fn tick(&self) -> Result<TickReport> {
        let timeout = self.config.heartbeat_timeout.as_millis() as u64;
        let mut lost = Vec::new();
        let result = self.submit(|g, now| {
            lost = g.state.expired_workers(now, timeout);
            if lost.is_empty() {
                // Nothing to journal: signal "no mutation" through a typed error caught below.
                return Err(Error::new(ErrorKind::NotFound, "no expired workers"));
            }
            Ok(Mutation::WorkersLost { worker_ids: lost.clone(), now })
        });
        match result {
            Ok((Applied::WorkersLost { missing_blocks }, t)) => {
                t.wait()?;
                Ok(TickReport { lost_workers: lost, missing_blocks })
            }
            Ok((_, t)) => {
                t.wait()?;
                Ok(TickReport::default())
            }
            Err(e) if e.kind() == ErrorKind::NotFound && lost.is_empty() => Ok(TickReport::default()),
            Err(e) => Err(e),
        }
    }

    /// Stops the journal writer after flushing what is queued.
    pub fn shutdown(&self) {
        self.journal.shutdown();
    }
}
