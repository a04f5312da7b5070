//! Open files and positioned reads.

use super::ptr::{cstr, out, slice_mut};
use super::status;
use super::types::{CvClient, CvFile, CvRange, CvStat};
use crate::error::Error;
use crate::ops;
use std::ffi::c_char;

/// Opens a file: one round trip, the tail (footer) included.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cv_open(client: CvClient, path: *const c_char, file: *mut CvFile) -> i32 {
    status(|| {
        // SAFETY: cv.h contract: a NUL-terminated string and a writable slot, or NULL.
        let (path, slot) = unsafe { (cstr(path, "path")?, out(file, "file")?) };
        slot.write(ops::open(client, path)?);
        Ok(())
    })
}

/// The file's length in bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cv_file_length(file: CvFile, length: *mut u64) -> i32 {
    status(|| {
        // SAFETY: cv.h contract: a writable slot or NULL.
        let slot = unsafe { out(length, "length")? };
        slot.write(ops::file_info(file)?.length);
        Ok(())
    })
}

/// The file's version (changes whenever its content does).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cv_file_version(file: CvFile, version: *mut u64) -> i32 {
    status(|| {
        // SAFETY: cv.h contract: a writable slot or NULL.
        let slot = unsafe { out(version, "version")? };
        slot.write(ops::file_info(file)?.version);
        Ok(())
    })
}

/// Where the in-memory tail starts and how long it is (0 if none): reads
/// inside it cost no round trip.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cv_file_tail(file: CvFile, offset: *mut u64, length: *mut u64) -> i32 {
    status(|| {
        // SAFETY: cv.h contract: writable slots or NULL.
        let (off_slot, len_slot) = unsafe { (out(offset, "offset")?, out(length, "length")?) };
        let info = ops::file_info(file)?;
        off_slot.write(info.tail_offset);
        len_slot.write(info.length - info.tail_offset);
        Ok(())
    })
}

/// The status that came with the open.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cv_file_stat(file: CvFile, stat: *mut CvStat) -> i32 {
    status(|| {
        // SAFETY: cv.h contract: a writable slot or NULL.
        let slot = unsafe { out(stat, "stat")? };
        slot.write(CvStat::from(&ops::file_status(file)?));
        Ok(())
    })
}

/// Reads up to `len` bytes at `offset` into `buf`; `*read` is 0 at or past
/// the end (like pread(2)).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cv_pread(file: CvFile, offset: u64, buf: *mut u8, len: usize, read: *mut usize) -> i32 {
    status(|| {
        // SAFETY: cv.h contract: `buf` writable for `len` bytes and not shared
        // during the call (or NULL with len 0); `read` a writable slot.
        let (buf, slot) = unsafe { (slice_mut(buf, len, "buf")?, out(read, "read")?) };
        slot.write(ops::pread(file, offset, buf)?);
        Ok(())
    })
}

/// Reads exactly `len` bytes at `offset`; `CV_ERR_EOF` (nothing read) when
/// the range reaches past the end.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cv_pread_fully(file: CvFile, offset: u64, buf: *mut u8, len: usize) -> i32 {
    status(|| {
        // SAFETY: cv.h contract: `buf` writable for `len` bytes, not shared during the call.
        let buf = unsafe { slice_mut(buf, len, "buf")? };
        ops::pread_fully(file, offset, buf)
    })
}

/// Reads `count` ranges in one call (coalesced, in parallel). Sets each
/// range's `read` (short at the end, 0 past it).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cv_preadv(file: CvFile, ranges: *mut CvRange, count: usize) -> i32 {
    status(|| {
        // SAFETY: cv.h contract: `ranges` writable for `count` elements (or
        // NULL with count 0), not shared during the call.
        let ranges = unsafe { slice_mut(ranges, count, "ranges")? };
        // Check every buffer before any I/O, so a bad one fails the call early.
        for (i, r) in ranges.iter().enumerate() {
            if r.len > 0 && r.buf.is_null() {
                return Err(Error::invalid(format!("ranges[{i}].buf is NULL")));
            }
            if r.len > isize::MAX as usize {
                return Err(Error::invalid(format!("ranges[{i}].len is too large")));
            }
        }
        let want: Vec<(u64, usize)> = ranges.iter().map(|r| (r.offset, r.len)).collect();
        let got = ops::preadv(file, &want)?;
        for (r, bytes) in ranges.iter_mut().zip(got) {
            // SAFETY: cv.h contract: each `buf` is writable for its `len` bytes
            // and overlaps neither another range's buffer nor the range array.
            let dst = unsafe { slice_mut(r.buf, r.len, "ranges[].buf")? };
            dst[..bytes.len()].copy_from_slice(&bytes);
            r.read = bytes.len();
        }
        Ok(())
    })
}

/// Frees a file handle; a second close is `CV_ERR_BAD_HANDLE`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cv_file_close(file: CvFile) -> i32 {
    status(|| ops::file_close(file))
}
