//! The block store of one shard: index, space, tiers and eviction over the data files.
//!
//! Single-threaded by design (one per shard runtime): state is in a `RefCell` that is
//! never borrowed across an `.await`; the index log is behind an async lock so that its
//! record order matches the order in which changes become visible.

use std::cell::{RefCell, RefMut};
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::rc::Rc;
use std::time::{Duration, Instant};

use super::config::StoreConfig;
use super::dma::{ALIGN, DirectFile, align_down};
use super::error::{ErrorKind, Result, StoreError};
use super::extent::ExtentAllocator;
use super::format::{
    ADD_FIXED_LEN, BlockRecord, DATA_HEADER_LEN, DataHeader, FRAME_LEN, INDEX_HEADER_LEN, IndexRecord,
    decode_data_header, encode_data_header,
};
use super::journal::{IndexLog, sync_parent};
use super::lease::Leases;
use super::memtier::MemTier;
use super::policy::S3Fifo;
use super::report::{BlockReport, ReportDeltas};
use super::stats::{StoreStats, TierStats, Usage};
use super::writer::BlockWriter;
use cv_rt::{AsyncMutex, AsyncMutexGuard};

/// Size and placement of a committed block (from [`BlockRef::stat`](super::BlockRef::stat), or a commit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockStat {
    /// Block id.
    pub block_id: u64,
    /// Bytes of data.
    pub len: u64,
    /// Never evicted while set.
    pub pinned: bool,
    /// Bytes per checksummed chunk.
    pub chunk_size: u32,
    /// Index of the data directory holding it.
    pub dir: u16,
    /// Byte offset of its data in that directory's data file.
    pub disk_offset: u64,
}

/// A committed block in memory.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    pub(crate) dir: u16,
    pub(crate) offset: u64,
    pub(crate) len: u64,
    pub(crate) alloc_len: u64,
    pub(crate) pinned: bool,
    pub(crate) chunk_size: u32,
    pub(crate) crcs: Rc<[u32]>,
    /// Unique per incarnation: tells a rewritten block from the one a reader started on.
    pub(crate) seq: u64,
}

impl Entry {
    fn record(&self, block_id: u64) -> BlockRecord {
        BlockRecord {
            block_id,
            dir: self.dir,
            offset: self.offset,
            len: self.len,
            alloc_len: self.alloc_len,
            pinned: self.pinned,
            chunk_size: self.chunk_size,
            crcs: self.crcs.to_vec(),
        }
    }

    pub(crate) fn stat(&self, block_id: u64) -> BlockStat {
        BlockStat {
            block_id,
            len: self.len,
            pinned: self.pinned,
            chunk_size: self.chunk_size,
            dir: self.dir,
            disk_offset: self.offset,
        }
    }

    fn log_bytes(&self) -> u64 {
        (FRAME_LEN + ADD_FIXED_LEN + 4 * self.crcs.len()) as u64
    }
}

#[derive(Debug)]
pub(crate) struct State {
    pub(crate) blocks: HashMap<u64, Entry>,
    pub(crate) writing: HashSet<u64>,
    pub(crate) allocs: Vec<ExtentAllocator>,
    pub(crate) disk_policy: S3Fifo<u64>,
    pub(crate) mem: MemTier,
    deltas: ReportDeltas,
    pub(crate) disk_stats: TierStats,
    pub(crate) corrupt_blocks: u64,
    /// Extents leased to short-circuit readers, and those held for them.
    pub(crate) leases: Leases,
    /// Leased blocks that went since their readers were last told ([`BlockStore::on_revoke`]).
    revoked: Vec<u64>,
    /// Incarnations whose readers were told when they were detached, before their extent was
    /// released (so the release does not tell them again).
    revoked_early: HashSet<u64>,
    next_seq: u64,
    pinned_bytes: u64,
    live_log_bytes: u64,
    next_dir: usize,
}

impl State {
    pub(crate) fn used(&self) -> u64 {
        self.allocs.iter().map(ExtentAllocator::used).sum()
    }

    fn capacity(&self) -> u64 {
        self.allocs.iter().map(ExtentAllocator::capacity).sum()
    }

    pub(crate) fn next_seq(&mut self) -> u64 {
        self.next_seq += 1;
        self.next_seq
    }

    /// Makes a committed entry visible, retiring any older incarnation of the id.
    fn insert(&mut self, id: u64, e: Entry) {
        self.detach(id);
        if e.pinned {
            self.pinned_bytes += e.alloc_len;
        } else {
            self.disk_policy.insert(id, e.alloc_len);
        }
        self.live_log_bytes += e.log_bytes();
        self.deltas.added(id);
        self.blocks.insert(id, e);
    }

    /// Takes an entry out of the index and tiers; its extent is still allocated.
    pub(crate) fn detach(&mut self, id: u64) -> Option<Entry> {
        let e = self.blocks.remove(&id)?;
        // Gone for readers from now on: a short-circuit reader holding a lease is told at the
        // next `tell_revoked`, not only once the removal is logged and the extent released
        // (meanwhile QUIC readers already get NotFound).
        if self.leases.is_live(e.seq, Instant::now()) {
            self.revoked.push(id);
            self.revoked_early.insert(e.seq);
        }
        if e.pinned {
            self.pinned_bytes -= e.alloc_len;
        } else {
            self.disk_policy.remove(&id);
        }
        self.live_log_bytes -= e.log_bytes();
        self.mem.remove_block(e.seq, e.crcs.len() as u32);
        self.deltas.removed(id);
        Some(e)
    }

    pub(crate) fn free(&mut self, dir: u16, offset: u64, len: u64) {
        if let Some(a) = self.allocs.get_mut(usize::from(dir))
            && !a.free(offset, len)
        {
            tracing::error!(dir, offset, len, "double free of a data extent refused");
        }
    }

    /// An incarnation taken out by [`State::detach`] is gone for good: its extent is free,
    /// or held while a short-circuit reader's lease on it lasts.
    pub(crate) fn release(&mut self, block_id: u64, e: &Entry) {
        let told = self.revoked_early.remove(&e.seq);
        match self.leases.retire(e.seq, (e.dir, e.offset, e.alloc_len), Instant::now()) {
            Some((dir, offset, len)) => self.free(dir, offset, len),
            None if !told => self.revoked.push(block_id),
            None => {}
        }
    }

    /// Frees the held extents whose leases have run out.
    fn reclaim(&mut self) {
        for (dir, offset, len) in self.leases.reclaim(Instant::now()) {
            self.free(dir, offset, len);
        }
    }

    /// First data file, round robin, with a free extent of `len` bytes.
    fn allocate(&mut self, len: u64) -> Option<(u16, u64)> {
        let n = self.allocs.len();
        for i in 0..n {
            let d = (self.next_dir + i) % n;
            if let Some(off) = self.allocs[d].allocate(len) {
                self.next_dir = (d + 1) % n;
                return Some((d as u16, off));
            }
        }
        None
    }

    /// Detaches eviction victims until `used - freed <= target` (or nothing is evictable).
    fn pick_victims(&mut self, target_used: u64, at_least_one: bool) -> Vec<(u64, Entry)> {
        let mut used = self.used();
        let mut out = Vec::new();
        while used > target_used || (at_least_one && out.is_empty()) {
            let Some((id, _)) = self.disk_policy.evict() else {
                break;
            };
            let Some(e) = self.detach(id) else {
                continue;
            };
            self.disk_stats.evictions += 1;
            used = used.saturating_sub(e.alloc_len);
            out.push((id, e));
        }
        out
    }
}

/// What the store tells of a leased block that went.
type Revoke = Box<dyn Fn(u64)>;

pub(crate) struct Inner {
    pub(crate) cfg: StoreConfig,
    pub(crate) files: Vec<DirectFile>,
    pub(crate) state: RefCell<State>,
    log: AsyncMutex<IndexLog>,
    /// Told of leased blocks that went ([`BlockStore::on_revoke`]).
    revoke: RefCell<Option<Revoke>>,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inner").field("cfg", &self.cfg).finish_non_exhaustive()
    }
}

/// One shard's block store. Cheap to clone (shared handle); not `Send`.
#[derive(Debug, Clone)]
pub struct BlockStore {
    pub(crate) inner: Rc<Inner>,
}

impl BlockStore {
    /// Opens (or creates) the store described by `cfg`; must run on a shard runtime (`cv_rt`).
    ///
    /// Replays the index log (cutting a torn tail), checks every data file belongs to this
    /// index, and rebuilds free space from the committed blocks.
    pub async fn open(cfg: StoreConfig) -> Result<BlockStore> {
        cfg.validate()?;
        for d in &cfg.data_dirs {
            std::fs::create_dir_all(&d.path).map_err(|e| StoreError::io(format!("create {}", d.path.display()), e))?;
        }
        let index_path = cfg.data_dirs[0].path.join(format!("{}.index", cfg.name));
        let replayed = IndexLog::open(&index_path, new_store_id()).await?;
        let store_id = replayed.log.store_id();

        let mut files = Vec::with_capacity(cfg.data_dirs.len());
        let mut fresh = Vec::with_capacity(cfg.data_dirs.len());
        for (i, d) in cfg.data_dirs.iter().enumerate() {
            let header = DataHeader { store_id, dir: i as u32, capacity: align_down(d.capacity_bytes) };
            let path = cfg.data_path(d);
            let (file, was_fresh) = open_data_file(path, header, replayed.created).await?;
            files.push(file);
            fresh.push(was_fresh);
        }

        let mut latest: HashMap<u64, BlockRecord> = HashMap::new();
        for r in replayed.records {
            match r {
                IndexRecord::Add(b) => {
                    latest.insert(b.block_id, b);
                }
                IndexRecord::Remove { block_id } => {
                    latest.remove(&block_id);
                }
                IndexRecord::Pin { block_id, pinned } => {
                    if let Some(b) = latest.get_mut(&block_id) {
                        b.pinned = pinned;
                    }
                }
            }
        }
        let mut records: Vec<BlockRecord> = latest.into_values().collect();
        records.sort_unstable_by_key(|b| b.block_id);

        let allocs =
            cfg.data_dirs.iter().map(|d| ExtentAllocator::new(DATA_HEADER_LEN, align_down(d.capacity_bytes))).collect();
        let slots = (cfg.data_dirs.iter().map(|d| d.capacity_bytes).sum::<u64>() / cfg.block_size).max(64) as usize;
        let mut state = State {
            blocks: HashMap::new(),
            writing: HashSet::new(),
            allocs,
            disk_policy: S3Fifo::new(slots),
            mem: MemTier::new(cfg.memory_tier_bytes, cfg.chunk_size),
            deltas: ReportDeltas::default(),
            disk_stats: TierStats::default(),
            corrupt_blocks: 0,
            leases: Leases::default(),
            revoked: Vec::new(),
            revoked_early: HashSet::new(),
            next_seq: 0,
            pinned_bytes: 0,
            live_log_bytes: 0,
            next_dir: 0,
        };
        let mut dropped = 0usize;
        for b in records {
            let d = usize::from(b.dir);
            let fits = d < state.allocs.len() && !fresh[d] && state.allocs[d].reserve(b.offset, b.alloc_len);
            if !fits {
                tracing::warn!(
                    block = b.block_id,
                    dir = b.dir,
                    offset = b.offset,
                    "index entry outside its data file or overlapping; dropped"
                );
                dropped += 1;
                continue;
            }
            let seq = state.next_seq();
            let e = Entry {
                dir: b.dir,
                offset: b.offset,
                len: b.len,
                alloc_len: b.alloc_len,
                pinned: b.pinned,
                chunk_size: b.chunk_size,
                crcs: b.crcs.into(),
                seq,
            };
            state.insert(b.block_id, e);
        }
        state.deltas = ReportDeltas::default();

        let mut log = replayed.log;
        if dropped > 0 || needs_compaction(&cfg, &log, state.live_log_bytes) {
            let snapshot = snapshot(&state);
            log.rewrite(&snapshot).await?;
        }
        Ok(BlockStore {
            inner: Rc::new(Inner {
                cfg,
                files,
                state: RefCell::new(state),
                log: AsyncMutex::new(log),
                revoke: RefCell::new(None),
            }),
        })
    }

    /// The configuration the store was opened with.
    pub fn config(&self) -> &StoreConfig {
        &self.inner.cfg
    }

    /// Starts writing block `block_id` of up to `expected_len` bytes; space is reserved now
    /// (evicting if needed). The block is invisible until [`BlockWriter::commit`]; committing
    /// replaces an older block of the same id.
    pub async fn begin_write(&self, block_id: u64, expected_len: u64, pinned: bool) -> Result<BlockWriter> {
        let cfg = &self.inner.cfg;
        if expected_len > cfg.block_size {
            return Err(StoreError::new(
                ErrorKind::InvalidArgument,
                format!("block of {expected_len} bytes exceeds block_size {}", cfg.block_size),
            ));
        }
        if self.state().writing.contains(&block_id) {
            return Err(StoreError::new(ErrorKind::Busy, format!("block {block_id} is being written")));
        }
        // Other bytes of a committed block are refused at once (same length: at the commit,
        // `BlockWriter::commit`): a committed block is never overwritten.
        if let Some(old) = self.state().blocks.get(&block_id)
            && old.len != expected_len
        {
            let msg = format!(
                "block {block_id} is committed with {} bytes, not {expected_len}: a committed block is never overwritten",
                old.len
            );
            return Err(StoreError::new(ErrorKind::Committed, msg));
        }
        let alloc_len = expected_len.div_ceil(ALIGN) * ALIGN;
        let (dir, offset) = self.allocate(alloc_len).await?;
        let seq = {
            let mut st = self.state();
            if !st.writing.insert(block_id) {
                // Another writer won the race while we were evicting.
                st.free(dir, offset, alloc_len);
                return Err(StoreError::new(ErrorKind::Busy, format!("block {block_id} is being written")));
            }
            st.next_seq()
        };
        Ok(BlockWriter::new(self.inner.clone(), block_id, seq, dir, offset, alloc_len, expected_len, pinned))
    }

    /// Reserves `len` bytes of extent, evicting down to the low watermark when the write
    /// would cross the high one, and further until it fits; `NoSpace` when nothing is left.
    async fn allocate(&self, len: u64) -> Result<(u16, u64)> {
        let over = {
            let st = self.state();
            (st.used() + len > self.high_bytes(&st)).then(|| self.low_bytes(&st).saturating_sub(len))
        };
        if let Some(target) = over {
            self.evict_to(target).await?;
        }
        loop {
            let victims = {
                let mut st = self.state();
                st.reclaim();
                if let Some(found) = st.allocate(len) {
                    return Ok(found);
                }
                let target = st.used().saturating_sub(len);
                st.pick_victims(target, true)
            };
            if victims.is_empty() {
                // Space held for short-circuit readers comes back when their leases end.
                let release = self.state().leases.next_release();
                if let Some(at) = release {
                    cv_rt::sleep(at.saturating_duration_since(Instant::now())).await;
                    continue;
                }
                let st = self.state();
                return Err(StoreError::new(
                    ErrorKind::NoSpace,
                    format!(
                        "no extent of {len} bytes: {} of {} bytes used, {} pinned",
                        st.used(),
                        st.capacity(),
                        st.pinned_bytes
                    ),
                ));
            }
            self.retire(victims).await?;
        }
    }

    /// Evicts unpinned blocks until used bytes are at most `target`.
    async fn evict_to(&self, target: u64) -> Result<()> {
        let victims = self.state().pick_victims(target, false);
        self.retire(victims).await
    }

    /// Logs the removal of detached entries, then frees their extents.
    pub(crate) async fn retire(&self, victims: Vec<(u64, Entry)>) -> Result<()> {
        if victims.is_empty() {
            return Ok(());
        }
        // Their readers hear of it before the removal is logged (see `State::detach`).
        self.tell_revoked();
        let mut log = self.log().await?;
        // A newer incarnation committed meanwhile already superseded the old one in the log;
        // a REMOVE now would delete the new one on replay.
        let records: Vec<IndexRecord> = {
            let st = self.state();
            victims
                .iter()
                .filter(|(id, _)| !st.blocks.contains_key(id))
                .map(|(id, _)| IndexRecord::Remove { block_id: *id })
                .collect()
        };
        if let Err(e) = log.append(&records).await {
            tracing::error!(error = %e, "logging block removals failed; their space is held until restart");
            return Err(e);
        }
        {
            let mut st = self.state();
            for (id, e) in &victims {
                st.release(*id, e);
            }
        }
        self.tell_revoked();
        self.maybe_compact(&mut log).await
    }

    /// Logs and publishes a finished block (append, then insert, both under the log lock,
    /// so a compaction never misses it). Once this returns `Ok` the block is committed.
    pub(crate) async fn publish(&self, block_id: u64, entry: Entry) -> Result<BlockStat> {
        let mut log = self.log().await?;
        log.append(&[IndexRecord::Add(entry.record(block_id))]).await?;
        let stat = entry.stat(block_id);
        let mut st = self.state();
        if let Some(old) = st.blocks.get(&block_id).cloned() {
            // The durable ADD supersedes it: its extent is free (or held for a lease).
            st.release(block_id, &old);
        }
        st.insert(block_id, entry);
        st.writing.remove(&block_id);
        drop(st);
        self.tell_revoked();
        Ok(stat)
    }

    /// Work after a commit that must not fail it: compaction and watermark eviction.
    pub(crate) async fn housekeep(&self) {
        let res = match self.log().await {
            Ok(mut log) => self.maybe_compact(&mut log).await,
            Err(e) => Err(e),
        };
        if let Err(e) = res {
            tracing::warn!(error = %e, "index log compaction failed");
        }
        let over = {
            let st = self.state();
            (st.used() > self.high_bytes(&st)).then(|| self.low_bytes(&st))
        };
        if let Some(target) = over
            && let Err(e) = self.evict_to(target).await
        {
            tracing::warn!(error = %e, "watermark eviction failed");
        }
    }

    async fn maybe_compact(&self, log: &mut IndexLog) -> Result<()> {
        let snap = {
            let st = self.state();
            if !needs_compaction(&self.inner.cfg, log, st.live_log_bytes) {
                return Ok(());
            }
            snapshot(&st)
        };
        log.rewrite(&snap).await
    }

    /// Leases block `block_id`'s extent to a short-circuit reader for `lease` (`wire/FORMAT.md`):
    /// until then the extent is not reused, whatever happens to the block. Counts as a
    /// disk-tier hit and refreshes the block's recency, as a read would.
    pub fn lease(&self, block_id: u64, lease: Duration) -> Result<(BlockStat, Rc<[u32]>)> {
        let mut st = self.state();
        let Some(e) = st.blocks.get(&block_id) else {
            st.disk_stats.misses += 1;
            return Err(not_found(block_id));
        };
        let (stat, crcs, seq) = (e.stat(block_id), e.crcs.clone(), e.seq);
        let now = Instant::now();
        st.leases.grant(seq, now + lease, now);
        st.disk_stats.hits += 1;
        st.disk_policy.touch(&block_id);
        Ok((stat, crcs))
    }

    /// Calls `f` with the id of every leased block that goes (evicted, deleted, dropped as
    /// corrupt, rewritten) while a lease on it lasts, so its readers can be told at once.
    pub fn on_revoke(&self, f: impl Fn(u64) + 'static) {
        *self.inner.revoke.borrow_mut() = Some(Box::new(f));
    }

    fn tell_revoked(&self) {
        let ids = std::mem::take(&mut self.state().revoked);
        if let Some(f) = self.inner.revoke.borrow().as_ref() {
            ids.into_iter().for_each(f);
        }
    }

    /// Deletes a block; `Ok(false)` if it was not there.
    pub async fn delete(&self, block_id: u64) -> Result<bool> {
        let Some(e) = self.state().detach(block_id) else {
            return Ok(false);
        };
        self.retire(vec![(block_id, e)]).await?;
        Ok(true)
    }

    /// Pins (never evicted) or unpins a committed block; durable when this returns.
    pub async fn set_pinned(&self, block_id: u64, pinned: bool) -> Result<()> {
        let mut log = self.log().await?;
        let seq = match self.state().blocks.get(&block_id) {
            Some(e) if e.pinned == pinned => return Ok(()),
            Some(e) => e.seq,
            None => return Err(not_found(block_id)),
        };
        log.append(&[IndexRecord::Pin { block_id, pinned }]).await?;
        let mut st = self.state();
        let st = &mut *st;
        // Deletes do not take the log lock before detaching: re-check the incarnation.
        if let Some(e) = st.blocks.get_mut(&block_id).filter(|e| e.seq == seq) {
            e.pinned = pinned;
            if pinned {
                st.pinned_bytes += e.alloc_len;
                st.disk_policy.remove(&block_id);
            } else {
                st.pinned_bytes -= e.alloc_len;
                st.disk_policy.insert(block_id, e.alloc_len);
            }
        }
        Ok(())
    }

    /// Disk space.
    pub fn usage(&self) -> Usage {
        let st = self.state();
        Usage {
            capacity_bytes: st.capacity(),
            used_bytes: st.used(),
            pinned_bytes: st.pinned_bytes,
            blocks: st.blocks.len() as u64,
        }
    }

    /// Counters per tier.
    pub fn stats(&self) -> StoreStats {
        let st = self.state();
        let mut disk = st.disk_stats;
        disk.bytes_used = st.used();
        disk.capacity_bytes = st.capacity();
        disk.corrupt = st.corrupt_blocks;
        StoreStats { memory: st.mem.stats(), disk, corrupt_blocks: st.corrupt_blocks }
    }

    /// Blocks added and removed since the previous call (for heartbeats).
    pub fn drain_report(&self) -> BlockReport {
        self.state().deltas.drain()
    }

    /// Every committed block id, sorted (for a full report at registration).
    pub fn block_ids(&self) -> Vec<u64> {
        let mut ids: Vec<u64> = self.state().blocks.keys().copied().collect();
        ids.sort_unstable();
        ids
    }

    /// Closes the files (every write was synced before it returned, so nothing is left to
    /// flush). Refused while handles or writers still share the store.
    pub async fn close(self) -> Result<()> {
        Rc::try_unwrap(self.inner)
            .map(drop)
            .map_err(|_| StoreError::new(ErrorKind::Busy, "store still shared (open handles or writers)"))
    }

    pub(crate) fn state(&self) -> RefMut<'_, State> {
        self.inner.state.borrow_mut()
    }

    async fn log(&self) -> Result<AsyncMutexGuard<'_, IndexLog>> {
        Ok(self.inner.log.lock().await)
    }

    fn high_bytes(&self, st: &State) -> u64 {
        percent_of(st.capacity(), self.inner.cfg.watermarks.high_pct)
    }

    fn low_bytes(&self, st: &State) -> u64 {
        percent_of(st.capacity(), self.inner.cfg.watermarks.low_pct)
    }
}

fn percent_of(v: u64, pct: u8) -> u64 {
    (u128::from(v) * u128::from(pct) / 100) as u64
}

pub(crate) fn not_found(block_id: u64) -> StoreError {
    StoreError::new(ErrorKind::NotFound, format!("block {block_id} not in store"))
}

fn needs_compaction(cfg: &StoreConfig, log: &IndexLog, live: u64) -> bool {
    log.len() > cfg.index_compact_bytes && log.len() > 2 * (live + INDEX_HEADER_LEN as u64)
}

fn snapshot(st: &State) -> Vec<IndexRecord> {
    let mut ids: Vec<&u64> = st.blocks.keys().collect();
    ids.sort_unstable();
    ids.into_iter().map(|id| IndexRecord::Add(st.blocks[id].record(*id))).collect()
}

/// Opens or creates one data file; returns whether it was (re)initialised empty.
async fn open_data_file(path: PathBuf, want: DataHeader, index_is_new: bool) -> Result<(DirectFile, bool)> {
    let size = DATA_HEADER_LEN + want.capacity;
    if std::fs::metadata(&path).is_ok() {
        let file = DirectFile::open(&path).await?;
        let raw = file.read(0, DATA_HEADER_LEN as usize).await?;
        match decode_data_header(&raw) {
            Ok(h) if h == want => {
                if file.size().await? < size {
                    file.preallocate(size).await?;
                }
                return Ok((file, false));
            }
            Ok(h) if !index_is_new => {
                return Err(StoreError::new(
                    ErrorKind::Incompatible,
                    format!("{} is {h:?}, this store expects {want:?}", path.display()),
                ));
            }
            Err(e) if !index_is_new => return Err(e),
            _ => tracing::warn!(path = %path.display(), "data file without its index; starting empty"),
        }
        drop(file);
    }
    let mut head = vec![0u8; DATA_HEADER_LEN as usize];
    head[..36].copy_from_slice(&encode_data_header(&want));
    let file = DirectFile::create_with_head(&path, &head).await?;
    file.preallocate(size).await?;
    file.sync().await?;
    sync_parent(&path).await?;
    Ok((file, true))
}

/// A store id that differs between stores created on this machine.
fn new_store_id() -> u64 {
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0);
    let local = 0u8;
    nanos ^ (u64::from(std::process::id()) << 32) ^ (&local as *const u8 as u64).rotate_left(17)
}
