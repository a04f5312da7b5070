//! S3-FIFO eviction with a ghost queue (Yang et al., SOSP '23), weighted by bytes.
//!
//! New keys enter a small FIFO; keys touched while there move to the main FIFO, the rest
//! leave and are remembered in the ghost queue, so a one-pass scan only churns the small
//! queue. A key re-inserted while remembered goes straight to main. Main is a FIFO with
//! re-insertion of keys touched since their last pass (a CLOCK with a 2-bit counter).
//!
//! For blocks read in ranges, [`S3Fifo::touch_range`] counts only a read of bytes read before
//! as a touch: a reader going through a block piece by piece (a scan, a column chunk) reads it
//! once, however many requests that takes. Without it a one-pass scan read in pieces looks hot
//! and fills main (`trace/sim.rs` measured it: no better than LRU).

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;

#[derive(Debug)]
struct Entry {
    weight: u64,
    freq: u8,
    in_main: bool,
    /// The span of the bytes read since the key became resident (`touch_range`): everything
    /// at first (a block written is as good as read), narrowed to what its first readers read
    /// by [`S3Fifo::read_so_far`] (a fill).
    seen: (u64, u64),
    // Queue slots carry the generation they were pushed with; older slots are stale.
    generation: u64,
}

/// Scan-resistant eviction order over keys with byte weights.
#[derive(Debug)]
pub struct S3Fifo<K> {
    entries: HashMap<K, Entry>,
    small: VecDeque<(K, u64)>,
    main: VecDeque<(K, u64)>,
    ghost: VecDeque<(K, u64)>,
    ghost_members: HashMap<K, u64>,
    ghost_capacity: usize,
    small_weight: u64,
    main_weight: u64,
    next_generation: u64,
}

/// Small queue target: one tenth of the resident weight.
const SMALL_SHARE_DIVISOR: u64 = 10;
const MAX_FREQ: u8 = 3;

impl<K: Hash + Eq + Clone> S3Fifo<K> {
    /// An empty policy that remembers up to `ghost_capacity` evicted keys.
    pub fn new(ghost_capacity: usize) -> Self {
        Self {
            entries: HashMap::new(),
            small: VecDeque::new(),
            main: VecDeque::new(),
            ghost: VecDeque::new(),
            ghost_members: HashMap::new(),
            ghost_capacity: ghost_capacity.max(1),
            small_weight: 0,
            main_weight: 0,
            next_generation: 0,
        }
    }

    /// Number of resident keys.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no key is resident.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Sum of resident weights.
    pub fn weight(&self) -> u64 {
        self.small_weight + self.main_weight
    }

    /// Whether `key` is resident.
    pub fn contains(&self, key: &K) -> bool {
        self.entries.contains_key(key)
    }

    /// Whether `key` was evicted recently (is in the ghost queue).
    pub fn remembers(&self, key: &K) -> bool {
        self.ghost_members.contains_key(key)
    }

    /// Puts `key` in the ghost queue without making it resident (an admission filter).
    pub fn remember(&mut self, key: K) {
        let g = self.bump();
        self.ghost_members.insert(key.clone(), g);
        self.ghost.push_back((key, g));
        self.trim_ghost();
    }

    /// Makes `key` resident with `weight`; a remembered key goes straight to main.
    pub fn insert(&mut self, key: K, weight: u64) {
        self.remove(&key);
        let in_main = self.ghost_members.remove(&key).is_some();
        let generation = self.bump();
        if in_main {
            self.main.push_back((key.clone(), generation));
            self.main_weight += weight;
        } else {
            self.small.push_back((key.clone(), generation));
            self.small_weight += weight;
        }
        self.entries.insert(key, Entry { weight, freq: 0, in_main, generation, seen: (0, u64::MAX) });
    }

    /// Says that of resident `key` only bytes `start..end` were read so far: a block filled for
    /// its readers, whose later reads of other bytes are the same pass, not a re-use.
    pub fn read_so_far(&mut self, key: &K, start: u64, end: u64) {
        if let Some(e) = self.entries.get_mut(key) {
            e.seen = (start, end);
        }
    }

    /// Records a read of bytes `start..end` of `key`; returns whether `key` is resident. Only
    /// bytes read before (overlapping the span read since it became resident) make it a
    /// touch; a first read of other bytes widens the span.
    pub fn touch_range(&mut self, key: &K, start: u64, end: u64) -> bool {
        let Some(e) = self.entries.get_mut(key) else { return false };
        let (lo, hi) = e.seen;
        let again = start < hi && end > lo || (start == end && lo < hi);
        if again {
            e.freq = (e.freq + 1).min(MAX_FREQ);
        }
        e.seen = (lo.min(start), hi.max(end));
        true
    }

    /// Records an access; returns whether `key` is resident.
    pub fn touch(&mut self, key: &K) -> bool {
        match self.entries.get_mut(key) {
            Some(e) => {
                e.freq = (e.freq + 1).min(MAX_FREQ);
                true
            }
            None => false,
        }
    }

    /// Forgets a resident key (deleted or pinned); returns its weight.
    pub fn remove(&mut self, key: &K) -> Option<u64> {
        let e = self.entries.remove(key)?;
        if e.in_main {
            self.main_weight -= e.weight;
        } else {
            self.small_weight -= e.weight;
        }
        Some(e.weight)
    }

    /// Chooses and removes the next victim; `None` when nothing is resident.
    pub fn evict(&mut self) -> Option<(K, u64)> {
        while !self.entries.is_empty() {
            let from_small = self.small_weight > 0
                && (self.main_weight == 0 || self.small_weight * SMALL_SHARE_DIVISOR >= self.weight());
            let victim = if from_small { self.evict_small() } else { self.evict_main() };
            if victim.is_some() {
                return victim;
            }
        }
        None
    }

    fn evict_small(&mut self) -> Option<(K, u64)> {
        let (key, g) = self.small.pop_front()?;
        let e = self.entries.get_mut(&key)?;
        if e.generation != g || e.in_main {
            return None; // stale slot
        }
        if e.freq > 0 {
            // Touched while probationary: promote.
            let gen2 = self.next_generation;
            self.next_generation += 1;
            e.freq = 0;
            e.in_main = true;
            e.generation = gen2;
            self.small_weight -= e.weight;
            self.main_weight += e.weight;
            self.main.push_back((key, gen2));
            return None;
        }
        let w = e.weight;
        self.entries.remove(&key);
        self.small_weight -= w;
        self.remember(key.clone());
        Some((key, w))
    }

    fn evict_main(&mut self) -> Option<(K, u64)> {
        let (key, g) = self.main.pop_front()?;
        let e = self.entries.get_mut(&key)?;
        if e.generation != g || !e.in_main {
            return None;
        }
        if e.freq > 0 {
            e.freq -= 1;
            self.main.push_back((key, g));
            return None;
        }
        let w = e.weight;
        self.entries.remove(&key);
        self.main_weight -= w;
        Some((key, w))
    }

    fn bump(&mut self) -> u64 {
        let g = self.next_generation;
        self.next_generation += 1;
        g
    }

    fn trim_ghost(&mut self) {
        while self.ghost_members.len() > self.ghost_capacity {
            let Some((k, g)) = self.ghost.pop_front() else {
                break;
            };
            if self.ghost_members.get(&k) == Some(&g) {
                self.ghost_members.remove(&k);
            }
        }
        // Stale slots would otherwise pile up when keys are remembered again and again.
        if self.ghost.len() > 2 * self.ghost_capacity + 16 {
            let members = &self.ghost_members;
            self.ghost.retain(|(k, g)| members.get(k) == Some(g));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Keeps at most `cap` unit-weight keys, evicting through the policy.
    fn access(p: &mut S3Fifo<u64>, key: u64, cap: u64) -> bool {
        if p.touch(&key) {
            return true;
        }
        while p.weight() >= cap {
            p.evict();
        }
        p.insert(key, 1);
        false
    }

    #[test]
    fn one_pass_scan_keeps_hot_set() {
        let cap = 100;
        let mut p = S3Fifo::new(cap as usize);
        let hot: Vec<u64> = (0..20).collect();
        for _ in 0..5 {
            for &k in &hot {
                access(&mut p, k, cap);
            }
        }
        // A scan of 1000 distinct keys, ten times the cache, interleaved with hot accesses.
        for (i, k) in (1000..2000u64).enumerate() {
            access(&mut p, k, cap);
            if i % 10 == 0 {
                access(&mut p, hot[(i / 10) % hot.len()], cap);
            }
        }
        let kept = hot.iter().filter(|k| p.contains(k)).count();
        assert_eq!(kept, hot.len(), "the scan evicted hot keys");
        assert!(p.weight() <= cap);
    }

    #[test]
    fn pure_scan_with_no_interleaving_keeps_touched_keys() {
        let mut p = S3Fifo::new(16);
        for k in 0..8u64 {
            p.insert(k, 1);
            p.touch(&k);
        }
        for k in 100..400u64 {
            while p.weight() >= 16 {
                p.evict();
            }
            p.insert(k, 1);
        }
        assert!((0..8u64).all(|k| p.contains(&k)));
    }

    /// A scan reading each block in four pieces does not look hot; reading the same bytes
    /// again does.
    #[test]
    fn pieces_of_one_pass_are_no_touch_and_a_second_read_is() {
        let mut p = S3Fifo::new(16);
        p.insert(1u64, 4);
        p.read_so_far(&1, 0, 10); // the fill's reader read the first piece
        for piece in 1..4 {
            assert!(p.touch_range(&1, piece * 10, piece * 10 + 10));
        }
        p.insert(2u64, 4);
        p.read_so_far(&2, 0, 10);
        p.touch_range(&2, 0, 10); // read again
        // Eviction: 1 was never touched again and leaves from small; 2 goes to main.
        assert_eq!(p.evict(), Some((1, 4)));
        assert!(p.contains(&2));
        assert!(!p.touch_range(&3, 0, 1));
        // A block written, not filled, is as good as read: its first read is a re-use.
        p.insert(4u64, 4);
        p.touch_range(&4, 100, 110);
        p.insert(5u64, 4);
        p.read_so_far(&5, 0, 1);
        assert_eq!(p.evict(), Some((5, 4)));
        assert!(p.contains(&4));
    }

    #[test]
    fn ghost_hit_goes_to_main_and_weights_balance() {
        let mut p = S3Fifo::new(4);
        p.insert(1u64, 10);
        p.insert(2, 5);
        assert_eq!(p.weight(), 15);
        assert_eq!(p.evict(), Some((1, 10)));
        assert!(p.remembers(&1));
        p.insert(1, 7);
        assert!(!p.remembers(&1));
        assert_eq!(p.weight(), 12);
        assert_eq!(p.remove(&2), Some(5));
        assert_eq!(p.evict(), Some((1, 7)));
        assert_eq!(p.evict(), None);
        assert_eq!(p.weight(), 0);
    }
}
