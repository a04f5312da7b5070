//! The parts of one block fetched so far, and the arithmetic of what is still missing.
//!
//! A block being filled from object storage arrives in pieces: first the ranges readers
//! asked for, then the gaps between them. Pieces never overlap (only uncovered bytes are
//! fetched), so every byte of a block is fetched from the store once.

use std::collections::BTreeMap;
use std::ops::Range;

use bytes::{Bytes, BytesMut};

/// Fetched pieces of a block of `len` bytes, by start offset.
#[derive(Debug)]
pub(crate) struct Pieces {
    len: u64,
    done: BTreeMap<u64, Bytes>,
}

impl Pieces {
    pub(crate) fn new(len: u64) -> Self {
        Self { len, done: BTreeMap::new() }
    }

    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.done.is_empty()
    }

    /// Adds the bytes fetched at `start`; they must not overlap a piece already held.
    pub(crate) fn insert(&mut self, start: u64, data: Bytes) {
        let end = start + data.len() as u64;
        debug_assert!(self.done.range(..end).all(|(s, d)| s + d.len() as u64 <= start), "overlapping piece");
        if !data.is_empty() {
            self.done.insert(start, data);
        }
    }

    /// The bytes of `r` if every one of them is held: a shared slice when one piece holds
    /// them all, else a copy joined from the pieces.
    pub(crate) fn get(&self, r: &Range<u64>) -> Option<Bytes> {
        if r.is_empty() {
            return Some(Bytes::new());
        }
        let mut parts = Vec::new();
        let mut at = r.start;
        // From the piece that starts at or before `r.start` on, in order.
        let first = self.done.range(..=r.start).next_back().map_or(r.start, |(s, _)| *s);
        for (&s, d) in self.done.range(first..r.end) {
            let end = s + d.len() as u64;
            if end <= at {
                continue;
            }
            if s > at {
                return None;
            }
            parts.push(d.slice((at - s) as usize..(r.end.min(end) - s) as usize));
            at = end.min(r.end);
            if at == r.end {
                break;
            }
        }
        if at < r.end {
            return None;
        }
        if parts.len() == 1 {
            return parts.pop();
        }
        let mut out = BytesMut::with_capacity((r.end - r.start) as usize);
        parts.iter().for_each(|p| out.extend_from_slice(p));
        Some(out.freeze())
    }

    /// The bytes held from `at` on, up to `end`, that one piece holds (a shared slice):
    /// what can be sent next to a reader who has everything before `at`.
    pub(crate) fn run(&self, at: u64, end: u64) -> Option<Bytes> {
        let (&s, d) = self.done.range(..=at).next_back()?;
        let piece_end = s + d.len() as u64;
        if piece_end <= at || at >= end {
            return None;
        }
        Some(d.slice((at - s) as usize..(end.min(piece_end) - s) as usize))
    }

    /// The sub-ranges of `r` held by no piece and not in `pending` (ranges being fetched).
    pub(crate) fn missing(&self, r: Range<u64>, pending: &[Range<u64>]) -> Vec<Range<u64>> {
        let mut covered: Vec<Range<u64>> =
            self.done.iter().map(|(s, d)| *s..*s + d.len() as u64).chain(pending.iter().cloned()).collect();
        covered.sort_by_key(|c| c.start);
        let mut out = Vec::new();
        let mut at = r.start;
        for c in covered {
            if c.end <= at {
                continue;
            }
            if c.start >= r.end {
                break;
            }
            if c.start > at {
                out.push(at..c.start);
            }
            at = at.max(c.end);
            if at >= r.end {
                break;
            }
        }
        if at < r.end {
            out.push(at..r.end);
        }
        out
    }

    /// Whether every byte is held (pieces never overlap, so their lengths add up).
    pub(crate) fn is_whole(&self) -> bool {
        self.done.values().map(|d| d.len() as u64).sum::<u64>() == self.len
    }

    /// The whole block, once every byte is held.
    pub(crate) fn whole(&self) -> Option<Bytes> {
        self.get(&(0..self.len))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(r: Range<u64>) -> Bytes {
        r.map(|i| i as u8).collect::<Vec<u8>>().into()
    }

    #[test]
    fn missing_ranges_skip_held_and_pending_bytes() {
        let mut p = Pieces::new(100);
        assert_eq!(p.missing(0..100, &[]), vec![0..100]);
        p.insert(10, bytes(10..20));
        p.insert(50, bytes(50..60));
        assert_eq!(p.missing(0..100, &[]), vec![0..10, 20..50, 60..100]);
        assert_eq!(p.missing(0..100, &[30..40, 55..70]), vec![0..10, 20..30, 40..50, 70..100]);
        assert_eq!(p.missing(12..18, &[]), Vec::<Range<u64>>::new());
        assert_eq!(p.missing(15..55, &[]), vec![20..50]);
        assert_eq!(p.missing(0..100, std::slice::from_ref(&(0..100))), Vec::<Range<u64>>::new());
    }

    #[test]
    fn run_is_what_one_piece_holds_from_an_offset() {
        let mut p = Pieces::new(100);
        assert!(p.run(0, 100).is_none());
        p.insert(0, bytes(0..10));
        p.insert(10, bytes(10..30));
        p.insert(50, bytes(50..60));
        assert_eq!(p.run(0, 100).unwrap(), bytes(0..10));
        assert_eq!(p.run(4, 8).unwrap(), bytes(4..8));
        assert_eq!(p.run(10, 100).unwrap(), bytes(10..30));
        assert_eq!(p.run(25, 100).unwrap(), bytes(25..30));
        assert!(p.run(30, 100).is_none(), "a gap");
        assert!(p.run(40, 100).is_none());
        assert_eq!(p.run(55, 58).unwrap(), bytes(55..58));
        assert!(p.run(58, 58).is_none(), "nothing wanted");
        assert!(p.run(60, 100).is_none());
    }

    #[test]
    fn get_slices_one_piece_and_joins_neighbours() {
        let mut p = Pieces::new(30);
        p.insert(0, bytes(0..10));
        p.insert(20, bytes(20..30));
        assert_eq!(p.get(&(2..8)).unwrap(), bytes(2..8));
        assert_eq!(p.get(&(5..5)).unwrap(), Bytes::new());
        assert!(p.get(&(5..15)).is_none(), "a gap inside");
        assert!(p.get(&(12..15)).is_none(), "inside the gap");
        assert!(p.whole().is_none());
        assert!(!p.is_whole());
        p.insert(10, bytes(10..20));
        assert!(p.is_whole());
        assert_eq!(p.get(&(5..25)).unwrap(), bytes(5..25));
        assert_eq!(p.get(&(10..20)).unwrap(), bytes(10..20));
        assert_eq!(p.whole().unwrap(), bytes(0..30));
        assert!(p.get(&(25..31)).is_none(), "past the end");
    }
}
