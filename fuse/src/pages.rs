//! Which version of a file the kernel's pages of its inode hold. The kernel keeps one page
//! cache per inode, whichever descriptor filled it: an open that gets another version than
//! the pages are of makes the kernel drop them, and from then on a descriptor of the old
//! version must not fill them again (its bytes would be read through the new descriptor).
//! Each inode's version is shared with its read handles, so a READ checks it with one load.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// No version recorded: the content changed on this mount, or no read open recorded one.
const ANY: u64 = u64::MAX;

/// The version one inode's pages are of, shared by the map and the inode's read handles.
#[derive(Debug)]
pub(crate) struct PagesOf(AtomicU64);

impl PagesOf {
    /// Whether a read of `version` may fill the pages.
    pub(crate) fn allow(&self, version: u64) -> bool {
        let v = self.0.load(Ordering::Acquire);
        v == ANY || v == version
    }
}

/// Every inode's [`PagesOf`].
#[derive(Debug, Default)]
pub(crate) struct Pages(Mutex<HashMap<u64, Arc<PagesOf>>>);

impl Pages {
    fn of(map: &mut HashMap<u64, Arc<PagesOf>>, ino: u64) -> Arc<PagesOf> {
        map.entry(ino).or_insert_with(|| Arc::new(PagesOf(AtomicU64::new(ANY)))).clone()
    }

    /// An open for reading got `version`: whether the kernel may keep the pages it holds,
    /// and the inode's record for the new handle. Versions only grow (the master numbers
    /// them across all files), so an open that raced with a newer one and got an older
    /// version does not take the pages back from it: its own reads are refused.
    pub(crate) fn opened(&self, ino: u64, version: u64) -> (bool, Arc<PagesOf>) {
        let mut map = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let p = Self::of(&mut map, ino);
        let v = p.0.load(Ordering::Acquire);
        if v == version {
            return (true, p);
        }
        if v == ANY || v < version {
            p.0.store(version, Ordering::Release);
        }
        (false, p)
    }

    /// The inode's record, for a handle that reads what it opened for writing.
    pub(crate) fn record(&self, ino: u64) -> Arc<PagesOf> {
        Self::of(&mut self.0.lock().unwrap_or_else(|p| p.into_inner()), ino)
    }

    /// The content changed on this mount: the next open drops the pages, whatever its version.
    pub(crate) fn changed(&self, ino: u64) {
        if let Some(p) = self.0.lock().unwrap_or_else(|p| p.into_inner()).get(&ino) {
            p.0.store(ANY, Ordering::Release);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_newer_open_takes_the_pages_and_an_older_one_does_not() {
        let pages = Pages::default();
        let (keep, v3) = pages.opened(1, 3);
        assert!(!keep && v3.allow(3), "a first open keeps nothing and records its version");
        assert!(pages.opened(1, 3).0, "the same version keeps the pages");
        let (keep, v5) = pages.opened(1, 5);
        assert!(!keep && v5.allow(5) && !v3.allow(3), "the old handle may no longer fill them");
        let (keep, late) = pages.opened(1, 4);
        assert!(!keep && !late.allow(4) && v5.allow(5), "an older open raced: the newer keeps them");
    }

    #[test]
    fn a_change_here_lets_every_handle_read_until_the_next_open() {
        let pages = Pages::default();
        let (_, v3) = pages.opened(1, 3);
        pages.changed(1);
        assert!(v3.allow(3) && pages.record(1).allow(7));
        assert!(!pages.opened(1, 3).0, "the next open drops the pages even for the same version");
        let (_, v8) = pages.opened(1, 8);
        assert!(!v3.allow(3) && v8.allow(8));
    }
}
