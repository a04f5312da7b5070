//! What the journal writer tells the core about its disk, beside the durable sequence number:
//! poisoned (restart), full (writes refused until a probe finds room), and stale (records the
//! core applied failed; it goes back to the durable state before it appends again).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};

use crate::error::{Error, ErrorKind};

#[derive(Debug, Default)]
pub(crate) struct Health {
    poisoned: AtomicBool,
    full: AtomicBool,
    stale: AtomicBool,
    /// The messages of the two errors above, naming where and what.
    why: Mutex<Why>,
}

#[derive(Debug, Default)]
struct Why {
    poisoned: String,
    full: String,
}

impl Health {
    fn why(&self) -> MutexGuard<'_, Why> {
        // Only strings are written under it; a panic cannot leave them half set.
        self.why.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn is_poisoned(&self) -> bool {
        self.poisoned.load(Ordering::Acquire)
    }

    pub fn poisoned(&self) -> Option<Error> {
        self.is_poisoned().then(|| Error::new(ErrorKind::Poisoned, self.why().poisoned.clone()))
    }

    pub fn set_poisoned(&self, why: String) {
        self.why().poisoned = why;
        self.poisoned.store(true, Ordering::Release);
    }

    pub fn full(&self) -> Option<Error> {
        if !self.full.load(Ordering::Acquire) {
            return None;
        }
        Some(Error::new(ErrorKind::NoSpace, self.why().full.clone()))
    }

    pub fn set_full(&self, why: String) {
        self.why().full = why;
        self.full.store(true, Ordering::Release);
    }

    pub fn clear_full(&self) {
        self.full.store(false, Ordering::Release);
    }

    pub fn is_stale(&self) -> bool {
        self.stale.load(Ordering::Acquire)
    }

    pub fn set_stale(&self, stale: bool) {
        self.stale.store(stale, Ordering::Release);
    }
}
