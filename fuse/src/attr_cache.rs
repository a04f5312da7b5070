//! Attributes the master gave less than `attr_ttl` ago, by inode, so that a GETATTR is answered
//! from memory when the kernel could have answered it itself.
//!
//! Why: the kernel forgets a file's atime after every READ it sends (`fuse_invalidate_atime`),
//! so every `fstat` after a read is a GETATTR, however long `attr_ttl` is. DuckDB calls `fstat`
//! about once per `pread`; with the page cache cold that made one master round trip per read,
//! ~200 µs of each query's time. Served here, a file's attributes are as old as the kernel's
//! own cache may keep them, and no older.
//!
//! A change made through this mount ([`AttrCache::change`], dropped when the change is done)
//! empties the cache and bumps an epoch; attributes fetched while a change was under way are
//! not kept (`insert` names the epoch it started in), so a late answer never brings back
//! what the change replaced.

use fuser::FileAttr;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Entries kept at most; past it the cache is emptied (it refills from the master).
const MAX_ENTRIES: usize = 65_536;

#[derive(Debug)]
pub(crate) struct AttrCache {
    ttl: Duration,
    /// Bumped when a change through this mount ends, and when one starts.
    epoch: AtomicU64,
    /// Changes under way; nothing is kept while one is.
    changing: AtomicU64,
    map: Mutex<HashMap<u64, (Instant, FileAttr)>>,
}

/// A change under way; dropping it ends it.
#[must_use]
pub(crate) struct Change(Arc<AttrCache>);

impl Drop for Change {
    fn drop(&mut self) {
        self.0.clear();
        self.0.changing.fetch_sub(1, Ordering::AcqRel);
    }
}

impl AttrCache {
    /// A cache that keeps attributes for `ttl` (zero: never).
    pub(crate) fn new(ttl: Duration) -> Self {
        AttrCache { ttl, epoch: AtomicU64::new(0), changing: AtomicU64::new(0), map: Mutex::default() }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, (Instant, FileAttr)>> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn clear(&self) {
        let mut map = self.lock();
        self.epoch.fetch_add(1, Ordering::AcqRel);
        map.clear();
    }

    /// The epoch to name when inserting what a fetch started now returns.
    pub(crate) fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
    }

    /// `ino`'s attributes, if fetched less than the ttl ago and no change has been made since.
    pub(crate) fn get(&self, ino: u64) -> Option<FileAttr> {
        let map = self.lock();
        map.get(&ino).filter(|(at, _)| at.elapsed() < self.ttl).map(|(_, a)| *a)
    }

    /// Keeps `attr`, fetched from the master at `fetched` in epoch `epoch`, unless a change
    /// began or ended since.
    pub(crate) fn insert(&self, attr: &FileAttr, fetched: Instant, epoch: u64) {
        if self.ttl.is_zero() || self.changing.load(Ordering::Acquire) > 0 {
            return;
        }
        let mut map = self.lock();
        if self.epoch.load(Ordering::Acquire) != epoch {
            return;
        }
        if map.len() >= MAX_ENTRIES {
            map.clear();
        }
        map.insert(attr.ino.0, (fetched, *attr));
    }

    /// Starts a change through this mount: the cache is emptied now and when it ends.
    pub(crate) fn change(self: &Arc<Self>) -> Change {
        self.changing.fetch_add(1, Ordering::AcqRel);
        self.clear();
        Change(self.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fuser::{FileType, INodeNo};
    use std::time::SystemTime;

    fn attr(ino: u64, size: u64) -> FileAttr {
        FileAttr {
            ino: INodeNo(ino),
            size,
            blocks: 0,
            atime: SystemTime::UNIX_EPOCH,
            mtime: SystemTime::UNIX_EPOCH,
            ctime: SystemTime::UNIX_EPOCH,
            crtime: SystemTime::UNIX_EPOCH,
            kind: FileType::RegularFile,
            perm: 0o644,
            nlink: 1,
            uid: 0,
            gid: 0,
            rdev: 0,
            blksize: 4096,
            flags: 0,
        }
    }

    #[test]
    fn kept_for_the_ttl_only() {
        let c = AttrCache::new(Duration::from_millis(50));
        c.insert(&attr(2, 10), Instant::now(), c.epoch());
        assert_eq!(c.get(2).map(|a| a.size), Some(10));
        // Fetched before the ttl: as old as the kernel could keep it, so already gone.
        c.insert(&attr(3, 10), Instant::now() - Duration::from_millis(60), c.epoch());
        assert!(c.get(3).is_none());
        std::thread::sleep(Duration::from_millis(60));
        assert!(c.get(2).is_none());
    }

    #[test]
    fn a_zero_ttl_keeps_nothing() {
        let c = AttrCache::new(Duration::ZERO);
        c.insert(&attr(2, 10), Instant::now(), c.epoch());
        assert!(c.get(2).is_none());
    }

    #[test]
    fn a_change_empties_it_and_refuses_what_was_fetched_across_it() {
        let c = Arc::new(AttrCache::new(Duration::from_secs(60)));
        c.insert(&attr(2, 10), Instant::now(), c.epoch());
        let before = c.epoch();
        let change = c.change();
        assert!(c.get(2).is_none());
        // A fetch that ends while the change is under way is not kept.
        c.insert(&attr(2, 10), Instant::now(), c.epoch());
        assert!(c.get(2).is_none());
        drop(change);
        // Nor one that started before the change ended.
        c.insert(&attr(2, 10), Instant::now(), before);
        assert!(c.get(2).is_none());
        // One that starts after it is.
        c.insert(&attr(2, 20), Instant::now(), c.epoch());
        assert_eq!(c.get(2).map(|a| a.size), Some(20));
    }
}
