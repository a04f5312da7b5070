//! When each path under a cache-mode mount was last checked at its store (the injected
//! clock), kept beside the state under its lock so that an open decides with one lookup.
//! Not journaled: the server saves it to the `tails` file and gives it back at start.

use std::collections::HashMap;
use std::time::Duration;

use crate::path::CvPath;

#[derive(Debug, Default)]
pub(super) struct Freshness {
    checked_ms: HashMap<String, u64>,
    /// Bumped by every change, so the `tails` file is saved only when something changed.
    changes: u64,
}

impl Freshness {
    /// Whether `path` was checked at its store less than `within` before `now`.
    pub(super) fn within(&self, path: &str, now: u64, within: Duration) -> bool {
        self.checked_ms.get(path).is_some_and(|&at| now.saturating_sub(at) < within.as_millis() as u64)
    }

    pub(super) fn mark(&mut self, path: &str, now: u64) {
        self.checked_ms.insert(path.to_owned(), now);
        self.changes += 1;
    }

    /// Forgets every check at or under `path`.
    pub(super) fn forget_under(&mut self, path: &CvPath) {
        self.checked_ms.retain(|p, _| CvPath::parse(p).map(|p| !p.is_under(path)).unwrap_or(false));
        self.changes += 1;
    }

    pub(super) fn checks(&self) -> Vec<(String, u64)> {
        self.checked_ms.iter().map(|(p, at)| (p.clone(), *at)).collect()
    }

    /// Takes back a check made at `at`, unless one since is known.
    pub(super) fn restore(&mut self, path: String, at: u64) {
        self.checked_ms.entry(path).or_insert(at);
    }

    pub(super) fn changes(&self) -> u64 {
        self.changes
    }
}
