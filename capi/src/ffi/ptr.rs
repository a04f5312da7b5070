//! Checked conversions of C arguments. NULL, misaligned pointers, sizes
//! beyond `isize::MAX` and non-UTF-8 strings are errors, never dereferenced.

use crate::error::{Error, Result};
use std::ffi::{CStr, c_char};
use std::mem::MaybeUninit;

/// A NUL-terminated UTF-8 string argument.
///
/// # Safety
/// `p` is NULL or points to a NUL-terminated string that lives and does not
/// change for `'a`.
pub(super) unsafe fn cstr<'a>(p: *const c_char, what: &str) -> Result<&'a str> {
    if p.is_null() {
        return Err(Error::invalid(format!("{what} is NULL")));
    }
    // SAFETY: non-NULL and NUL-terminated by the caller's contract.
    let c = unsafe { CStr::from_ptr(p) };
    c.to_str().map_err(|_| Error::invalid(format!("{what} is not UTF-8")))
}

/// A mutable array argument of `count` elements; NULL is accepted only when
/// `count` is 0.
///
/// # Safety
/// `p` is NULL or valid for reads and writes of `count` elements for `'a`,
/// and nothing else accesses that memory meanwhile.
pub(super) unsafe fn slice_mut<'a, T>(p: *mut T, count: usize, what: &str) -> Result<&'a mut [T]> {
    if count == 0 {
        return Ok(&mut []);
    }
    check(p, count, what)?;
    // SAFETY: non-NULL, aligned, size fits isize (checked); validity and
    // exclusivity by the caller's contract.
    Ok(unsafe { std::slice::from_raw_parts_mut(p, count) })
}

/// A read-only byte array argument; NULL is accepted only when `len` is 0.
///
/// # Safety
/// `p` is NULL or valid for reads of `len` bytes for `'a`, unchanged meanwhile.
pub(super) unsafe fn bytes<'a>(p: *const u8, len: usize, what: &str) -> Result<&'a [u8]> {
    if len == 0 {
        return Ok(&[]);
    }
    check(p, len, what)?;
    // SAFETY: non-NULL, size fits isize (checked); validity by the caller's contract.
    Ok(unsafe { std::slice::from_raw_parts(p, len) })
}

/// A required out-parameter.
///
/// # Safety
/// `p` is NULL or valid for a write of one `T` for `'a`.
pub(super) unsafe fn out<'a, T>(p: *mut T, what: &str) -> Result<&'a mut MaybeUninit<T>> {
    check(p, 1, what)?;
    // SAFETY: non-NULL and aligned (checked); writable by the caller's
    // contract. MaybeUninit makes no claim about the current contents.
    Ok(unsafe { &mut *p.cast::<MaybeUninit<T>>() })
}

/// An optional out-parameter (NULL means "not wanted").
///
/// # Safety
/// As [`out`].
pub(super) unsafe fn out_opt<'a, T>(p: *mut T, what: &str) -> Result<Option<&'a mut MaybeUninit<T>>> {
    if p.is_null() {
        return Ok(None);
    }
    // SAFETY: forwarded contract.
    unsafe { out(p, what) }.map(Some)
}

fn check<T>(p: *const T, count: usize, what: &str) -> Result<()> {
    if p.is_null() {
        return Err(Error::invalid(format!("{what} is NULL")));
    }
    if !p.is_aligned() {
        return Err(Error::invalid(format!("{what} is misaligned")));
    }
    let size = count.checked_mul(size_of::<T>().max(1));
    if size.is_none_or(|s| s > isize::MAX as usize) {
        return Err(Error::invalid(format!("{what}: {count} elements is too large")));
    }
    Ok(())
}
