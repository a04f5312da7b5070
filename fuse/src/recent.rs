//! What the master said about paths within `open_ttl`, kept by a read-only mount that asks
//! for it (`MountOptions::open_ttl`, off by default): opened files, directory listings, and
//! the status of every path those named. An open, an opendir or a lookup of such a path is
//! answered from memory, on the kernel's thread, without a master round trip.
//!
//! Why: with the page cache cold an engine pays one master round trip per open, listing and
//! lookup, every query: DuckDB's 22 TPC-H queries made about 650 of them per pass (opens 361,
//! listings 188, lookups 100), and each costs QUIC work in the mount and in the master. The
//! kernel's own caches do not help there: dropping the page cache drops its dentries too.
//!
//! The price is close-to-open consistency for writers elsewhere: an open may get a version
//! up to `open_ttl` old, as a lookup within `entry_ttl` may already find a removed name. Bytes
//! are never wrong: a read of a version whose blocks are gone fails (the workers check the
//! version), the path is forgotten here, and the next open asks the master. Only read-only
//! mounts may ask for it: a mount that writes must see its own changes at once.

use cv_client::{File, FileKind, FileStatus};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Entries of each kind kept at most; past it that kind is emptied (it refills from the master).
const MAX_ENTRIES: usize = 16_384;

#[derive(Debug, Default)]
struct Maps {
    files: HashMap<String, (Instant, File)>,
    dirs: HashMap<String, (Instant, std::sync::Arc<Vec<FileStatus>>)>,
    stats: HashMap<String, (Instant, FileStatus)>,
}

/// Answers kept for `ttl` (zero: nothing is kept).
#[derive(Debug)]
pub(crate) struct Recent {
    ttl: Duration,
    maps: Mutex<Maps>,
}

fn fresh<T: Clone>(map: &mut HashMap<String, (Instant, T)>, key: &str, ttl: Duration) -> Option<T> {
    match map.get(key) {
        Some((at, v)) if at.elapsed() < ttl => Some(v.clone()),
        Some(_) => {
            map.remove(key);
            None
        }
        None => None,
    }
}

fn keep<T>(map: &mut HashMap<String, (Instant, T)>, key: &str, at: Instant, v: T) {
    if map.len() >= MAX_ENTRIES {
        map.clear();
    }
    map.insert(key.to_string(), (at, v));
}

impl Recent {
    pub(crate) fn new(ttl: Duration) -> Self {
        Recent { ttl, maps: Mutex::default() }
    }

    pub(crate) fn enabled(&self) -> bool {
        !self.ttl.is_zero()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Maps> {
        self.maps.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The file opened at `path` within the ttl.
    pub(crate) fn file(&self, path: &str) -> Option<File> {
        if !self.enabled() {
            return None;
        }
        fresh(&mut self.lock().files, path, self.ttl)
    }

    /// The listing of the directory `path` taken within the ttl.
    pub(crate) fn listing(&self, path: &str) -> Option<std::sync::Arc<Vec<FileStatus>>> {
        if !self.enabled() {
            return None;
        }
        fresh(&mut self.lock().dirs, path, self.ttl)
    }

    /// The status of `path` the master gave within the ttl (by a lookup, an open, or a
    /// listing of its directory).
    pub(crate) fn status(&self, path: &str) -> Option<FileStatus> {
        if !self.enabled() {
            return None;
        }
        let mut maps = self.lock();
        if let Some(f) = fresh(&mut maps.files, path, self.ttl) {
            return Some(f.status().clone());
        }
        fresh(&mut maps.stats, path, self.ttl)
    }

    /// Keeps a file opened at `asked` (when the open was sent: its answer is at least that old).
    pub(crate) fn put_file(&self, path: &str, file: &File, asked: Instant) {
        if self.enabled() && asked.elapsed() < self.ttl {
            keep(&mut self.lock().files, path, asked, file.clone());
        }
    }

    /// Keeps a listing of `path` asked for at `asked`, and the status of each entry.
    pub(crate) fn put_listing(&self, path: &str, entries: &std::sync::Arc<Vec<FileStatus>>, asked: Instant) {
        if !self.enabled() || asked.elapsed() >= self.ttl {
            return;
        }
        let mut maps = self.lock();
        keep(&mut maps.dirs, path, asked, entries.clone());
        for e in entries.iter() {
            keep(&mut maps.stats, &e.path, asked, e.clone());
        }
    }

    /// Keeps the status of `path` asked for at `asked`.
    pub(crate) fn put_status(&self, path: &str, st: &FileStatus, asked: Instant) {
        if self.enabled() && asked.elapsed() < self.ttl {
            keep(&mut self.lock().stats, path, asked, st.clone());
        }
    }

    /// A read of `path` at `version` failed: whatever is kept of that version goes (a file
    /// replaced or removed elsewhere), so the next open asks the master. Its listing goes
    /// too, as it named that version.
    pub(crate) fn failed(&self, path: &str, version: u64) {
        if !self.enabled() {
            return;
        }
        let mut maps = self.lock();
        if maps.files.get(path).is_some_and(|(_, f)| f.version() == version) {
            maps.files.remove(path);
        }
        if maps.stats.get(path).is_some_and(|(_, st)| st.version == version && st.kind == FileKind::File) {
            maps.stats.remove(path);
        }
        if let Some(parent) = crate::paths::parent_of(path) {
            maps.dirs.remove(parent);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn st(path: &str, kind: FileKind, version: u64) -> FileStatus {
        FileStatus {
            id: 1,
            path: path.into(),
            kind,
            length: 10,
            mtime_ms: 0,
            version,
            mode: 0o644,
            complete: true,
            block_size: 4 << 20,
        }
    }

    #[test]
    fn off_keeps_nothing() {
        let r = Recent::new(Duration::ZERO);
        r.put_status("/a", &st("/a", FileKind::File, 1), Instant::now());
        assert!(r.status("/a").is_none());
    }

    #[test]
    fn a_listing_answers_for_its_entries_for_the_ttl_only() {
        let r = Recent::new(Duration::from_millis(80));
        let entries = Arc::new(vec![st("/d/a", FileKind::File, 3), st("/d/e", FileKind::Dir, 0)]);
        r.put_listing("/d", &entries, Instant::now());
        assert_eq!(r.listing("/d").map(|l| l.len()), Some(2));
        assert_eq!(r.status("/d/a").map(|s| s.version), Some(3));
        assert!(r.status("/d/b").is_none());
        // Asked before the ttl: as old as may be kept, so not kept.
        r.put_status("/x", &st("/x", FileKind::File, 1), Instant::now() - Duration::from_millis(90));
        assert!(r.status("/x").is_none());
        std::thread::sleep(Duration::from_millis(90));
        assert!(r.listing("/d").is_none() && r.status("/d/a").is_none());
    }

    #[test]
    fn a_failed_read_forgets_that_version_and_its_listing() {
        let r = Recent::new(Duration::from_secs(60));
        let entries = Arc::new(vec![st("/d/a", FileKind::File, 3), st("/d/b", FileKind::File, 4)]);
        r.put_listing("/d", &entries, Instant::now());
        // Another version than the one kept: the newer answer stays.
        r.failed("/d/a", 2);
        assert_eq!(r.status("/d/a").map(|s| s.version), Some(3));
        r.failed("/d/a", 3);
        assert!(r.status("/d/a").is_none());
        assert!(r.listing("/d").is_none(), "the listing named the version that failed");
        assert_eq!(r.status("/d/b").map(|s| s.version), Some(4));
    }
}
