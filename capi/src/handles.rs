//! Handles are ids into per-type tables, never pointers: a stale, doubled
//! or forged handle finds nothing and is reported as `BadHandle`, instead of
//! touching freed memory.
//!
//! Layout of a handle (u64): the type tag in the top byte, a sequence number
//! below it. Sequence numbers are never reused, so a handle closed by one
//! thread cannot alias a handle opened later by another. 0 is never valid.

use crate::error::{Error, ErrorKind, Result};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

const SEQ_BITS: u32 = 56;
const SEQ_MASK: u64 = (1 << SEQ_BITS) - 1;

/// A table of live objects of one type.
#[derive(Debug)]
pub struct Table<T> {
    tag: u64,
    what: &'static str,
    next: AtomicU64,
    map: RwLock<HashMap<u64, Arc<T>>>,
}

impl<T> Table<T> {
    /// An empty table whose handles carry `tag` (1..=127, keeping handles
    /// positive as Java `long`s).
    pub fn new(tag: u8, what: &'static str) -> Self {
        debug_assert!((1..=127).contains(&tag));
        Table { tag: u64::from(tag) << SEQ_BITS, what, next: AtomicU64::new(1), map: RwLock::new(HashMap::new()) }
    }

    /// Stores `value` and returns its new handle.
    pub fn insert(&self, value: T) -> u64 {
        let seq = self.next.fetch_add(1, Ordering::Relaxed) & SEQ_MASK;
        let handle = self.tag | seq;
        // A poisoned lock only means another thread panicked while holding
        // it; the map itself is always consistent (single operations).
        self.map.write().unwrap_or_else(|p| p.into_inner()).insert(handle, Arc::new(value));
        handle
    }

    /// The object behind `handle`.
    pub fn get(&self, handle: u64) -> Result<Arc<T>> {
        self.map.read().unwrap_or_else(|p| p.into_inner()).get(&handle).cloned().ok_or_else(|| self.bad(handle))
    }

    /// Removes `handle`; the second removal of the same handle fails.
    /// Calls already running on the object finish (they hold a reference).
    pub fn remove(&self, handle: u64) -> Result<Arc<T>> {
        self.map.write().unwrap_or_else(|p| p.into_inner()).remove(&handle).ok_or_else(|| self.bad(handle))
    }

    /// Live handles.
    pub fn len(&self) -> usize {
        self.map.read().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// Whether no handle is live.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn bad(&self, handle: u64) -> Error {
        let why = if handle == 0 {
            "the null handle".to_string()
        } else if handle & !SEQ_MASK != self.tag {
            format!("handle {handle:#x} is not a {} handle", self.what)
        } else {
            format!("{} handle {handle:#x} is closed or was never opened", self.what)
        };
        Error::new(ErrorKind::BadHandle, why)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_are_freed_exactly_once_and_typed() {
        let files: Table<String> = Table::new(2, "file");
        let clients: Table<String> = Table::new(1, "client");
        let f = files.insert("a".into());
        let c = clients.insert("c".into());
        assert_eq!(*files.get(f).unwrap(), "a");
        let e = files.get(c).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::BadHandle);
        assert!(e.message().contains("not a file handle"), "{e}");
        assert_eq!(files.get(0).unwrap_err().kind(), ErrorKind::BadHandle);

        let held = files.get(f).unwrap();
        files.remove(f).unwrap();
        assert_eq!(*held, "a", "a call in flight keeps its object");
        assert_eq!(files.remove(f).unwrap_err().kind(), ErrorKind::BadHandle);
        assert!(files.get(f).unwrap_err().message().contains("closed"));
        assert!(files.is_empty());
    }

    #[test]
    fn handles_are_never_reused() {
        let t: Table<u32> = Table::new(3, "writer");
        let a = t.insert(1);
        t.remove(a).unwrap();
        let b = t.insert(2);
        assert_ne!(a, b);
        assert_eq!(t.get(a).unwrap_err().kind(), ErrorKind::BadHandle);
        assert!(a > 0 && b > 0 && (b as i64) > 0);
    }

    #[test]
    fn concurrent_inserts_get_distinct_handles() {
        let t: Arc<Table<u32>> = Arc::new(Table::new(2, "file"));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let t = t.clone();
                std::thread::spawn(move || (0..500).map(|i| t.insert(i)).collect::<Vec<_>>())
            })
            .collect();
        let mut all: Vec<u64> = threads.into_iter().flat_map(|h| h.join().unwrap()).collect();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), 2000);
        assert_eq!(t.len(), 2000);
    }
}
