//! Opened files kept for a moment (`[gateway] open_ttl`, off by default), so
//! that an engine's HEAD and the ranged GETs after it (a footer, then column
//! chunks) cost one master round trip for the object, not one each.
//!
//! The price is S3's read-after-write guarantee for writers elsewhere: a file
//! replaced or deleted through another client may be served in its previous
//! version until its entry ages out, as the FUSE mount's `attr_ttl` allows for
//! lookups. Writes through this gateway drop the entry at once. Bytes are
//! never wrong: a read of a version whose blocks are gone fails at the
//! workers, and the request is served again from a fresh open.

use cv_client::File;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Entries kept at most; past it the oldest half goes.
const MAX_ENTRIES: usize = 4096;

#[derive(Debug)]
pub(crate) struct Opened {
    ttl: Duration,
    map: Mutex<HashMap<String, (Instant, File)>>,
}

impl Opened {
    pub fn new(ttl: Duration) -> Self {
        Opened { ttl, map: Mutex::new(HashMap::new()) }
    }

    pub fn enabled(&self) -> bool {
        !self.ttl.is_zero()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, (Instant, File)>> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The file opened at `path` within the last `ttl`.
    pub fn get(&self, path: &str) -> Option<File> {
        if !self.enabled() {
            return None;
        }
        let mut map = self.lock();
        match map.get(path) {
            Some((at, f)) if at.elapsed() < self.ttl => Some(f.clone()),
            Some(_) => {
                map.remove(path);
                None
            }
            None => None,
        }
    }

    pub fn put(&self, path: &str, file: &File) {
        if !self.enabled() {
            return;
        }
        let mut map = self.lock();
        if map.len() >= MAX_ENTRIES {
            let mut ages: Vec<Instant> = map.values().map(|(at, _)| *at).collect();
            ages.sort();
            let cut = ages[ages.len() / 2];
            map.retain(|_, (at, _)| *at > cut);
        }
        map.insert(path.to_string(), (Instant::now(), file.clone()));
    }

    /// Forgets `path` (written, deleted or found stale through this gateway).
    pub fn forget(&self, path: &str) {
        if self.enabled() {
            self.lock().remove(path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn off_by_default_keeps_nothing() {
        let o = Opened::new(Duration::ZERO);
        assert!(!o.enabled());
        assert!(o.get("/a").is_none());
    }
}
