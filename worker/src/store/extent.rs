//! Free-extent allocator for one data file: aligned byte ranges, first fit, coalescing frees.

use std::collections::BTreeMap;

/// Free space of one data file as disjoint `[offset, offset+len)` ranges keyed by offset.
#[derive(Debug)]
pub(crate) struct ExtentAllocator {
    free: BTreeMap<u64, u64>,
    capacity: u64,
    free_bytes: u64,
}

impl ExtentAllocator {
    /// All of `[base, base+capacity)` free.
    pub(crate) fn new(base: u64, capacity: u64) -> Self {
        let mut free = BTreeMap::new();
        if capacity > 0 {
            free.insert(base, capacity);
        }
        Self { free, capacity, free_bytes: capacity }
    }

    pub(crate) fn capacity(&self) -> u64 {
        self.capacity
    }

    pub(crate) fn used(&self) -> u64 {
        self.capacity - self.free_bytes
    }

    /// First free range that fits `len` bytes; `None` when none does.
    pub(crate) fn allocate(&mut self, len: u64) -> Option<u64> {
        if len == 0 {
            return Some(0);
        }
        let (&off, &flen) = self.free.iter().find(|&(_, &l)| l >= len)?;
        self.free.remove(&off);
        if flen > len {
            self.free.insert(off + len, flen - len);
        }
        self.free_bytes -= len;
        Some(off)
    }

    /// Marks `[off, off+len)` used if all of it is free (rebuilding from the index).
    pub(crate) fn reserve(&mut self, off: u64, len: u64) -> bool {
        if len == 0 {
            return true;
        }
        let Some((&foff, &flen)) = self.free.range(..=off).next_back() else {
            return false;
        };
        if off + len > foff + flen {
            return false;
        }
        self.free.remove(&foff);
        if off > foff {
            self.free.insert(foff, off - foff);
        }
        if foff + flen > off + len {
            self.free.insert(off + len, foff + flen - off - len);
        }
        self.free_bytes -= len;
        true
    }

    /// Returns `[off, off+len)` to the free space, merging with neighbours.
    /// A range overlapping free space is refused (a double free) and reported as `false`.
    pub(crate) fn free(&mut self, off: u64, len: u64) -> bool {
        if len == 0 {
            return true;
        }
        let prev = self.free.range(..=off).next_back().map(|(&o, &l)| (o, l));
        let next = self.free.range(off..).next().map(|(&o, &l)| (o, l));
        if prev.is_some_and(|(o, l)| o + l > off) || next.is_some_and(|(o, _)| o < off + len) {
            return false;
        }
        let (mut start, mut end) = (off, off + len);
        if let Some((o, l)) = prev.filter(|&(o, l)| o + l == off) {
            self.free.remove(&o);
            start = o;
            debug_assert_eq!(o + l, off);
        }
        if let Some((o, l)) = next.filter(|&(o, _)| o == end) {
            self.free.remove(&o);
            end = o + l;
        }
        self.free.insert(start, end - start);
        self.free_bytes += len;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocate_free_coalesce() {
        let mut a = ExtentAllocator::new(4096, 40960);
        let x = a.allocate(8192).unwrap();
        let y = a.allocate(8192).unwrap();
        let z = a.allocate(8192).unwrap();
        assert_eq!((x, y, z), (4096, 12288, 20480));
        assert_eq!(a.used(), 24576);
        assert!(a.free(y, 8192));
        assert!(!a.free(y, 4096), "double free refused");
        assert_eq!(a.allocate(16384), Some(28672), "hole of 8 KiB too small");
        assert!(a.free(x, 8192));
        assert!(a.free(z, 8192));
        assert_eq!(a.allocate(24576), Some(4096), "three frees merged");
        assert_eq!(a.allocate(4096), None);
    }

    #[test]
    fn reserve_carves_exact_ranges() {
        let mut a = ExtentAllocator::new(0, 16384);
        assert!(a.reserve(4096, 4096));
        assert!(!a.reserve(4096, 4096), "already used");
        assert!(!a.reserve(12288, 8192), "past the end");
        assert_eq!(a.used(), 4096);
        assert_eq!(a.allocate(8192), Some(8192));
        assert_eq!(a.allocate(4096), Some(0));
    }
}
