//! The tail cache: each complete file's trailing bytes (its footer), so `open` answers with them.
//!
//! Byte-budgeted S3-FIFO: new tails enter a small FIFO (~10 % of the budget); those read again
//! while there are promoted to the main FIFO, the others leave, their keys remembered in a ghost
//! queue so a quick re-insert goes straight to main. Main is a FIFO with reinsertion (a second
//! chance per recent read). A scan of many once-read files churns only the small queue, so the
//! hot set in main survives it. Not journaled: the master saves it to its `tails` file
//! (`tail_file.rs`) now and then and at shutdown, and a restart restores each queue from it.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use crate::state::InodeId;

/// Bytes charged per entry on top of its tail (map and queue slots).
const ENTRY_OVERHEAD: u64 = 64;
const MAX_FREQ: u8 = 3;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Queue {
    Small,
    Main,
}

#[derive(Debug)]
struct Entry {
    version: u64,
    offset: u64,
    bytes: Arc<[u8]>,
    freq: u8,
    queue: Queue,
    /// Matches the queue slot that currently owns the entry; older slots are stale.
    seq: u64,
}

impl Entry {
    fn charge(&self) -> u64 {
        self.bytes.len() as u64 + ENTRY_OVERHEAD
    }
}

/// A cached tail: `bytes` are the file's bytes starting at `offset`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CachedTail {
    pub offset: u64,
    pub bytes: Arc<[u8]>,
}

/// Counters since start.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TailStats {
    pub hits: u64,
    pub misses: u64,
    pub inserts: u64,
    pub evictions: u64,
    pub bytes: u64,
    pub entries: u64,
}

#[derive(Debug)]
pub struct TailCache {
    budget: u64,
    small_target: u64,
    entries: HashMap<InodeId, Entry>,
    small: VecDeque<(InodeId, u64)>,
    main: VecDeque<(InodeId, u64)>,
    small_bytes: u64,
    main_bytes: u64,
    ghost: VecDeque<(InodeId, u64)>,
    ghost_set: HashMap<InodeId, u64>,
    next_seq: u64,
    stats: TailStats,
}

impl TailCache {
    pub fn new(budget_bytes: u64) -> Self {
        Self {
            budget: budget_bytes,
            small_target: budget_bytes / 10,
            entries: HashMap::new(),
            small: VecDeque::new(),
            main: VecDeque::new(),
            small_bytes: 0,
            main_bytes: 0,
            ghost: VecDeque::new(),
            ghost_set: HashMap::new(),
            next_seq: 0,
            stats: TailStats::default(),
        }
    }

    pub fn stats(&self) -> TailStats {
        TailStats { bytes: self.small_bytes + self.main_bytes, entries: self.entries.len() as u64, ..self.stats }
    }

    /// The tail of `file` at `version`, counting a hit or a miss.
    pub fn get(&mut self, file: InodeId, version: u64) -> Option<CachedTail> {
        match self.entries.get_mut(&file) {
            Some(e) if e.version == version => {
                e.freq = (e.freq + 1).min(MAX_FREQ);
                self.stats.hits += 1;
                Some(CachedTail { offset: e.offset, bytes: e.bytes.clone() })
            }
            _ => {
                self.stats.misses += 1;
                None
            }
        }
    }

    /// [`Self::get`] without counting it: a second look by the same request.
    pub fn peek(&self, file: InodeId, version: u64) -> Option<CachedTail> {
        let e = self.entries.get(&file).filter(|e| e.version == version)?;
        Some(CachedTail { offset: e.offset, bytes: e.bytes.clone() })
    }

    pub fn contains(&self, file: InodeId) -> bool {
        self.entries.contains_key(&file)
    }

    /// Caches a tail, replacing any older one for the file. Tails larger than the budget are
    /// not cached.
    pub fn insert(&mut self, file: InodeId, version: u64, offset: u64, bytes: Arc<[u8]>) {
        self.remove(file);
        let charge = bytes.len() as u64 + ENTRY_OVERHEAD;
        if charge > self.budget {
            return;
        }
        let queue = if self.ghost_set.remove(&file).is_some() { Queue::Main } else { Queue::Small };
        let seq = self.bump();
        self.entries.insert(file, Entry { version, offset, bytes, freq: 0, queue, seq });
        match queue {
            Queue::Small => {
                self.small.push_back((file, seq));
                self.small_bytes += charge;
            }
            Queue::Main => {
                self.main.push_back((file, seq));
                self.main_bytes += charge;
            }
        }
        self.stats.inserts += 1;
        while self.small_bytes + self.main_bytes > self.budget {
            if !self.evict_one() {
                break;
            }
        }
    }

    /// Every entry, each queue oldest first, small before main: the order [`Self::restore`]
    /// takes them in to rebuild both queues.
    pub fn dump(&self) -> Vec<(InodeId, u64, bool, CachedTail)> {
        let live = |&(k, s): &(InodeId, u64)| self.entries.get(&k).filter(|e| e.seq == s).map(|e| (k, e));
        self.small
            .iter()
            .filter_map(live)
            .chain(self.main.iter().filter_map(live))
            .map(|(k, e)| {
                (k, e.version, e.queue == Queue::Main, CachedTail { offset: e.offset, bytes: e.bytes.clone() })
            })
            .collect()
    }

    /// Puts back an entry of [`Self::dump`] into the queue it was in (`main`), not counted as
    /// an insert; entries beyond the budget are evicted as usual.
    pub fn restore(&mut self, file: InodeId, version: u64, main: bool, tail: CachedTail) {
        self.remove(file);
        let charge = tail.bytes.len() as u64 + ENTRY_OVERHEAD;
        if charge > self.budget {
            return;
        }
        let queue = if main { Queue::Main } else { Queue::Small };
        let seq = self.bump();
        self.entries.insert(file, Entry { version, offset: tail.offset, bytes: tail.bytes, freq: 0, queue, seq });
        if main {
            self.main.push_back((file, seq));
            self.main_bytes += charge;
        } else {
            self.small.push_back((file, seq));
            self.small_bytes += charge;
        }
        while self.small_bytes + self.main_bytes > self.budget {
            if !self.evict_one() {
                break;
            }
        }
    }

    /// Forgets a file's tail (deleted or overwritten).
    pub fn remove(&mut self, file: InodeId) {
        if let Some(e) = self.entries.remove(&file) {
            match e.queue {
                Queue::Small => self.small_bytes -= e.charge(),
                Queue::Main => self.main_bytes -= e.charge(),
            }
        }
    }

    fn bump(&mut self) -> u64 {
        self.next_seq += 1;
        self.next_seq
    }

    /// Evicts one entry (or moves entries between queues until one leaves). False if empty.
    fn evict_one(&mut self) -> bool {
        loop {
            if self.entries.is_empty() {
                return false;
            }
            let from_small = self.small_bytes > self.small_target || self.main_bytes == 0;
            let popped = if from_small { self.small.pop_front() } else { self.main.pop_front() };
            let Some((key, seq)) = popped else {
                // Only stale slots were left in that queue; the byte counts say the other has data.
                continue;
            };
            let Some(e) = self.entries.get_mut(&key) else {
                continue;
            };
            if e.seq != seq {
                continue;
            }
            let charge = e.charge();
            match (e.queue, e.freq) {
                (Queue::Small, 0) => {
                    self.entries.remove(&key);
                    self.small_bytes -= charge;
                    self.remember_ghost(key);
                    self.stats.evictions += 1;
                    return true;
                }
                (Queue::Small, _) => {
                    e.queue = Queue::Main;
                    e.freq = 0;
                    let seq = self.bump();
                    if let Some(e) = self.entries.get_mut(&key) {
                        e.seq = seq;
                    }
                    self.small_bytes -= charge;
                    self.main_bytes += charge;
                    self.main.push_back((key, seq));
                }
                (Queue::Main, 0) => {
                    self.entries.remove(&key);
                    self.main_bytes -= charge;
                    self.stats.evictions += 1;
                    return true;
                }
                (Queue::Main, _) => {
                    e.freq -= 1;
                    self.main.push_back((key, seq));
                }
            }
        }
    }

    fn remember_ghost(&mut self, key: InodeId) {
        let seq = self.bump();
        self.ghost_set.insert(key, seq);
        self.ghost.push_back((key, seq));
        // Remember about as many keys as main holds entries (at least a few hundred).
        let cap = self.entries.len().max(256);
        while self.ghost_set.len() > cap {
            let Some((k, s)) = self.ghost.pop_front() else {
                break;
            };
            if self.ghost_set.get(&k) == Some(&s) {
                self.ghost_set.remove(&k);
            }
        }
        // Stale ghost slots (keys re-inserted since) must not grow the deque without bound.
        if self.ghost.len() > cap * 2 {
            let set = &self.ghost_set;
            self.ghost.retain(|(k, s)| set.get(k) == Some(s));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tail(n: usize) -> Arc<[u8]> {
        vec![7u8; n].into()
    }

    #[test]
    fn hit_miss_and_version() {
        let mut c = TailCache::new(1 << 20);
        assert!(c.get(1, 1).is_none());
        c.insert(1, 1, 100, tail(10));
        let t = c.get(1, 1).unwrap();
        assert_eq!((t.offset, t.bytes.len()), (100, 10));
        assert!(c.get(1, 2).is_none(), "another version is a miss");
        let s = c.stats();
        assert_eq!((s.hits, s.misses, s.entries), (1, 2, 1));
        c.remove(1);
        assert_eq!(c.stats().bytes, 0);
    }

    #[test]
    fn stays_within_budget() {
        let budget = 100 * (1000 + ENTRY_OVERHEAD);
        let mut c = TailCache::new(budget);
        for f in 0..10_000 {
            c.insert(f, 1, 0, tail(1000));
            assert!(c.stats().bytes <= budget);
        }
        assert!(c.stats().evictions >= 9_900);
        c.insert(99_999, 1, 0, tail(budget as usize * 2));
        assert!(!c.contains(99_999), "a tail over the budget is not cached");
    }

    #[test]
    fn scan_does_not_flush_hot_set() {
        // Budget for 1000 tails; a hot set of 300 read repeatedly, then a scan of 20 000 files
        // read once each, interleaved with hot reads.
        let size = 4096;
        let mut c = TailCache::new(1000 * (size as u64 + ENTRY_OVERHEAD));
        let hot = 0..300u64;
        for f in hot.clone() {
            c.insert(f, 1, 0, tail(size));
        }
        for _ in 0..3 {
            for f in hot.clone() {
                if c.get(f, 1).is_none() {
                    c.insert(f, 1, 0, tail(size));
                }
            }
        }
        // A hot key is read again only after ~2100 scan inserts: twice the budget, so an LRU
        // (or plain FIFO) would have evicted every hot tail between two of its reads.
        let before = c.stats();
        let mut hot_reads = 0;
        for (i, f) in (10_000..30_000u64).enumerate() {
            if c.get(f, 1).is_none() {
                c.insert(f, 1, 0, tail(size));
            }
            if i % 7 == 0 {
                hot_reads += 1;
                let h = (i as u64 / 7) % 300;
                if c.get(h, 1).is_none() {
                    c.insert(h, 1, 0, tail(size));
                }
            }
        }
        let after = c.stats();
        let hot_misses = (after.misses - before.misses) - 20_000; // every scan read misses
        assert!(hot_misses * 100 < hot_reads, "hot set flushed: {hot_misses}/{hot_reads} missed");
        for f in hot {
            assert!(c.contains(f), "hot tail {f} was evicted by the scan");
        }
    }

    #[test]
    fn dump_and_restore_keep_entries_and_queues() {
        // 20 tails fit; 40 inserted, then 0..5 again: those come back through the ghost queue
        // into main.
        let mut c = TailCache::new(20 * (100 + ENTRY_OVERHEAD));
        for f in 0..40 {
            c.insert(f, f + 1, f * 10, tail(100));
        }
        for f in 0..5 {
            c.insert(f, f + 1, f * 10, tail(100));
        }
        let shape = |c: &TailCache| -> Vec<(InodeId, u64, bool, u64, usize)> {
            c.dump().into_iter().map(|(f, v, m, t)| (f, v, m, t.offset, t.bytes.len())).collect()
        };
        let before = shape(&c);
        assert_eq!(before.iter().filter(|e| e.2).count(), 5, "{before:?}");
        let mut r = TailCache::new(20 * (100 + ENTRY_OVERHEAD));
        for (f, v, main, t) in c.dump() {
            r.restore(f, v, main, t);
        }
        assert_eq!(shape(&r), before);
        assert_eq!((r.stats().inserts, r.stats().bytes), (0, c.stats().bytes));
        assert_eq!(r.get(3, 4).map(|t| t.offset), Some(30));
        // A smaller budget keeps what fits.
        let mut small = TailCache::new(3 * (100 + ENTRY_OVERHEAD));
        for (f, v, main, t) in c.dump() {
            small.restore(f, v, main, t);
        }
        assert_eq!(small.stats().entries, 3);
    }

    #[test]
    fn ghost_hit_goes_to_main() {
        let mut c = TailCache::new(20 * (100 + ENTRY_OVERHEAD));
        for f in 0..40 {
            c.insert(f, 1, 0, tail(100));
        }
        assert!(!c.contains(0));
        c.insert(0, 1, 0, tail(100));
        assert_eq!(c.entries.get(&0).map(|e| e.queue), Some(Queue::Main));
    }
}
