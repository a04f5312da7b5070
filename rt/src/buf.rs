//! Page-aligned byte buffers for O_DIRECT, recycled per thread.
//!
//! A buffer is allocated zeroed once and then reused through a small per-thread free list
//! (by power-of-two class), so a read does not pay an allocation and a page-fault pass.
#![allow(unsafe_code)]

use std::alloc::{Layout, alloc_zeroed, dealloc, handle_alloc_error};
use std::cell::RefCell;
use std::ptr::NonNull;

/// Alignment of every buffer: covers 512 B and 4 KiB logical sectors.
pub const BUF_ALIGN: usize = 4096;
/// Buffers kept per size class after use.
const KEEP_PER_CLASS: usize = 32;
/// Largest class kept (bigger buffers are freed).
const MAX_KEPT: usize = 16 << 20;
/// Bytes kept by one thread's pool in all (beyond it, freed buffers go back to the allocator).
const MAX_POOLED: usize = 64 << 20;

/// An owned, zero-initialised, [`BUF_ALIGN`]-aligned buffer of `cap` bytes.
#[derive(Debug)]
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    cap: usize,
}

// SAFETY: an `AlignedBuf` is the only owner of its allocation and holds no reference to
// thread-local state; dropping it on another thread recycles it into that thread's pool or
// frees it with the layout it was allocated with. Sending it is what a `Vec<u8>` allows.
unsafe impl Send for AlignedBuf {}

impl AsRef<[u8]> for AlignedBuf {
    fn as_ref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl AsMut<[u8]> for AlignedBuf {
    fn as_mut(&mut self) -> &mut [u8] {
        self.as_mut_slice()
    }
}

impl AlignedBuf {
    /// A buffer of at least `len` bytes (rounded up to a power of two, at least [`BUF_ALIGN`]).
    pub fn with_capacity(len: usize) -> AlignedBuf {
        let cap = len.max(BUF_ALIGN).next_power_of_two();
        if let Some(b) = POOL.with(|p| p.borrow_mut().take(cap)) {
            return b;
        }
        let layout = Layout::from_size_align(cap, BUF_ALIGN).expect("buffer layout");
        // SAFETY: `layout` has a non-zero size (at least BUF_ALIGN) and a power-of-two alignment.
        let raw = unsafe { alloc_zeroed(layout) };
        let ptr = NonNull::new(raw).unwrap_or_else(|| handle_alloc_error(layout));
        AlignedBuf { ptr, cap }
    }

    pub fn capacity(&self) -> usize {
        self.cap
    }

    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: `ptr` owns `cap` initialised bytes (zeroed at allocation, only ever written
        // through `&mut self` or by the kernel while the buffer is lent to an operation).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.cap) }
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as in `as_slice`; `&mut self` makes this the only reference.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.cap) }
    }

    /// The address handed to the kernel. The buffer must outlive the operation.
    pub(crate) fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr.as_ptr()
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        let cap = self.cap;
        let ptr = self.ptr;
        // Recycle unless the pool is full or gone (thread exit).
        let kept = POOL.try_with(|p| p.borrow_mut().give(AlignedBuf { ptr, cap })).unwrap_or(false);
        if !kept {
            let layout = Layout::from_size_align(cap, BUF_ALIGN).expect("buffer layout");
            // SAFETY: `ptr` was allocated by `alloc_zeroed` with exactly this layout and is
            // freed once: `give` refused it, so nobody else holds it.
            unsafe { dealloc(ptr.as_ptr(), layout) }
        }
    }
}

/// Free buffers of this thread, by class.
#[derive(Default)]
struct Pool {
    classes: Vec<(usize, Vec<AlignedBuf>)>,
    /// Bytes held in `classes`.
    bytes: usize,
}

impl Pool {
    fn take(&mut self, cap: usize) -> Option<AlignedBuf> {
        let b = self.classes.iter_mut().find(|(c, _)| *c == cap).and_then(|(_, v)| v.pop())?;
        self.bytes -= cap;
        Some(b)
    }

    /// Keeps `b`; false (and `b` forgotten without freeing) if it must be freed by the caller.
    fn give(&mut self, b: AlignedBuf) -> bool {
        let cap = b.cap;
        if cap <= MAX_KEPT && self.bytes + cap <= MAX_POOLED {
            let i = match self.classes.iter().position(|(c, _)| *c == cap) {
                Some(i) => i,
                None => {
                    self.classes.push((cap, Vec::new()));
                    self.classes.len() - 1
                }
            };
            if self.classes[i].1.len() < KEEP_PER_CLASS {
                self.classes[i].1.push(b);
                self.bytes += cap;
                return true;
            }
        }
        // The caller frees the memory; this value must not run Drop again.
        std::mem::forget(b);
        false
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        for (cap, v) in self.classes.drain(..) {
            let layout = Layout::from_size_align(cap, BUF_ALIGN).expect("buffer layout");
            for b in v {
                let ptr = b.ptr;
                std::mem::forget(b);
                // SAFETY: allocated with this layout; the pool owned it alone.
                unsafe { dealloc(ptr.as_ptr(), layout) }
            }
        }
    }
}

thread_local! {
    static POOL: RefCell<Pool> = RefCell::new(Pool::default());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_aligned_zeroed_and_recycled() {
        let mut a = AlignedBuf::with_capacity(5000);
        assert_eq!(a.capacity(), 8192);
        assert_eq!(a.as_slice().as_ptr() as usize % BUF_ALIGN, 0);
        assert!(a.as_slice().iter().all(|&b| b == 0));
        a.as_mut_slice()[0] = 7;
        let addr = a.as_slice().as_ptr();
        drop(a);
        let b = AlignedBuf::with_capacity(8192);
        assert_eq!(b.as_slice().as_ptr(), addr, "the freed buffer is reused");
        let big = AlignedBuf::with_capacity(MAX_KEPT * 2);
        assert_eq!(big.capacity(), MAX_KEPT * 2);
        drop(big);
        // The pool stops keeping buffers at its byte cap.
        let many: Vec<_> = (0..8).map(|_| AlignedBuf::with_capacity(MAX_KEPT)).collect();
        drop(many);
        assert!(POOL.with(|p| p.borrow().bytes) <= MAX_POOLED);
    }
}
