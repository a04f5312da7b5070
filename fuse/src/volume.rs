//! State shared by every request of one mount: the client, inode numbers,
//! open handles, and what the kernel may still cache.

use crate::attr::{Owner, attr_of};
use crate::attr_cache::AttrCache;
use crate::config::MountOptions;
use crate::errno::errno_of;
use crate::inodes::Inodes;
use crate::pages::Pages;
use crate::read::ReadHandle;
use crate::recent::Recent;
use crate::stage::Stage;
use crate::stats::FuseStats;
use crate::write::WriteHandle;
use cv_client::{Client, FileStatus};
use fuser::{Errno, FileAttr};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

/// An open file or directory.
#[derive(Clone, Debug)]
pub(crate) enum Handle {
    /// A file open for reading; `r` is `None` when it was opened while
    /// staged (its stage serves it).
    Read { ino: u64, r: Option<Arc<ReadHandle>> },
    /// A file open for writing; `read` serves reads of what it held before.
    Write { ino: u64, writer: Arc<WriteHandle>, read: Option<Arc<ReadHandle>> },
    /// A directory listing taken at opendir, served page by page.
    Dir(Arc<Vec<FileStatus>>),
}

/// One mount's shared state.
#[derive(Debug)]
pub(crate) struct Volume {
    pub(crate) client: Client,
    pub(crate) opts: MountOptions,
    pub(crate) owner: Owner,
    inodes: Mutex<Inodes>,
    pub(crate) handles: Mutex<HashMap<u64, Handle>>,
    next_fh: AtomicU64,
    /// Version of each file whose pages the kernel may hold from an earlier open.
    pub(crate) pages: Pages,
    /// Files this mount is writing, by inode: their length is ahead of the master's.
    writers: Mutex<HashMap<u64, Arc<WriteHandle>>>,
    /// Staged files, by inode (see [`crate::staging`]).
    pub(crate) stages: Mutex<HashMap<u64, Arc<Stage>>>,
    /// Serializes the start of stages.
    pub(crate) stage_start: tokio::sync::Mutex<()>,
    /// Where staging files go (this mount's own directory).
    pub(crate) staging_dir: PathBuf,
    /// Attributes fetched less than `attr_ttl` ago (see [`crate::attr_cache`]).
    pub(crate) attrs: Arc<AttrCache>,
    /// Opens, listings and statuses kept within `open_ttl` (see [`crate::recent`]).
    pub(crate) recent: Arc<Recent>,
    /// The kernel's requests, counted.
    pub(crate) stats: Arc<FuseStats>,
}

/// Locks a mutex; a poisoned one (a panic elsewhere) still holds valid data
/// for these tables, so carry on.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Volume {
    pub(crate) fn new(
        client: Client,
        opts: MountOptions,
        owner: Owner,
        staging_dir: PathBuf,
        stats: Arc<FuseStats>,
    ) -> Self {
        let inodes = Inodes::new(&opts.normalized_root());
        let attrs = Arc::new(AttrCache::new(opts.attr_ttl));
        let recent = Arc::new(Recent::new(opts.open_ttl));
        Volume {
            client,
            opts,
            owner,
            inodes: Mutex::new(inodes),
            handles: Mutex::new(HashMap::new()),
            next_fh: AtomicU64::new(1),
            pages: Pages::default(),
            writers: Mutex::new(HashMap::new()),
            stages: Mutex::new(HashMap::new()),
            stage_start: tokio::sync::Mutex::new(()),
            staging_dir,
            attrs,
            recent,
            stats,
        }
    }

    pub(crate) fn inodes(&self) -> MutexGuard<'_, Inodes> {
        lock(&self.inodes)
    }

    /// The path of an inode the kernel knows.
    pub(crate) fn path_of(&self, ino: u64) -> Result<String, Errno> {
        self.inodes().path(ino).map(str::to_string).ok_or(Errno::ENOENT)
    }

    pub(crate) fn add_handle(&self, h: Handle) -> u64 {
        let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
        lock(&self.handles).insert(fh, h);
        fh
    }

    pub(crate) fn handle(&self, fh: u64) -> Result<Handle, Errno> {
        lock(&self.handles).get(&fh).cloned().ok_or(Errno::EBADF)
    }

    /// A place in the request queue of `fh` if it is being written.
    pub(crate) fn ticket(&self, fh: u64) -> Option<crate::order::Turn> {
        match lock(&self.handles).get(&fh) {
            Some(Handle::Write { writer, .. }) => Some(writer.ticket()),
            _ => None,
        }
    }

    pub(crate) fn take_handle(&self, fh: u64) -> Option<Handle> {
        lock(&self.handles).remove(&fh)
    }

    /// The content of `ino` changed here: the kernel must drop its pages at the next open.
    pub(crate) fn content_changed(&self, ino: u64) {
        self.pages.changed(ino);
    }

    pub(crate) fn set_writer(&self, ino: u64, w: Arc<WriteHandle>) {
        lock(&self.writers).insert(ino, w);
    }

    pub(crate) fn writer(&self, ino: u64) -> Option<Arc<WriteHandle>> {
        lock(&self.writers).get(&ino).cloned()
    }

    /// Drops the writer registration of `ino` if it is `w`.
    pub(crate) fn clear_writer(&self, ino: u64, w: &Arc<WriteHandle>) {
        let mut map = lock(&self.writers);
        if map.get(&ino).is_some_and(|cur| Arc::ptr_eq(cur, w)) {
            map.remove(&ino);
        }
    }

    /// Attributes of `ino` at `path` from the master, with the length of a
    /// write in progress here, or from its stage.
    /// `ino`'s attributes from memory, if fetched within `attr_ttl` and the file is neither
    /// being written nor staged here (then its length is ahead of anything kept).
    pub(crate) fn cached_attr(&self, ino: u64) -> Option<FileAttr> {
        if self.writer(ino).is_some() || self.stage(ino).is_some() {
            return None;
        }
        if let Some(a) = self.attrs.get(ino) {
            return Some(a);
        }
        // A read-only mount keeping what the master said within `open_ttl` (crate::recent).
        if !self.recent.enabled() {
            return None;
        }
        let st = self.recent.status(&self.path_of(ino).ok()?)?;
        Some(attr_of(ino, &st, self.owner, None))
    }

    /// Keeps attributes fetched from the master at `fetched`, in the cache's `epoch` then.
    pub(crate) fn keep_attr(&self, attr: &FileAttr, fetched: Instant, epoch: u64) {
        let ino = attr.ino.0;
        if self.writer(ino).is_none() && self.stage(ino).is_none() {
            self.attrs.insert(attr, fetched, epoch);
        }
    }

    pub(crate) async fn attr(&self, ino: u64, path: &str) -> Result<FileAttr, Errno> {
        // A staged file's attributes are its stage's; the master's are behind.
        if let Some(stage) = self.stage(ino) {
            return Ok(attr_of(ino, &stage.status().await, self.owner, None));
        }
        let st = self.client.stat(path).await.map_err(|e| errno_of(&e))?;
        Ok(self.attr_from(ino, &st).await)
    }

    pub(crate) async fn attr_from(&self, ino: u64, st: &FileStatus) -> FileAttr {
        if let Some(stage) = self.stage(ino) {
            return attr_of(ino, &stage.status().await, self.owner, None);
        }
        let size = match self.writer(ino) {
            Some(w) => Some(w.len().await),
            None => None,
        };
        attr_of(ino, st, self.owner, size)
    }
}
