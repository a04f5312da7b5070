//! Writing files.

use super::ptr::{bytes, cstr, out, out_opt};
use super::status;
use super::types::{CvClient, CvStat, CvWriter};
use crate::ops;
use std::ffi::c_char;

/// Creates a file (replacing an existing one when `overwrite` is non-zero).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cv_create(
    client: CvClient,
    path: *const c_char,
    overwrite: i32,
    writer: *mut CvWriter,
) -> i32 {
    status(|| {
        // SAFETY: cv.h contract: a NUL-terminated string and a writable slot, or NULL.
        let (path, slot) = unsafe { (cstr(path, "path")?, out(writer, "writer")?) };
        slot.write(ops::create(client, path, overwrite != 0)?);
        Ok(())
    })
}

/// Appends `len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cv_write(writer: CvWriter, data: *const u8, len: usize) -> i32 {
    status(|| {
        // SAFETY: cv.h contract: `data` readable for `len` bytes (or NULL with len 0).
        let data = unsafe { bytes(data, len, "data")? };
        ops::write(writer, data)
    })
}

/// Completes the file and frees the handle, also on failure; `stat` (may be
/// NULL) receives the finished file's metadata.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cv_writer_close(writer: CvWriter, stat: *mut CvStat) -> i32 {
    status(|| {
        // SAFETY: cv.h contract: a writable slot or NULL.
        let slot = match unsafe { out_opt(stat, "stat") } {
            Ok(slot) => slot,
            Err(e) => {
                // The handle is freed on every failure (cv.h): without a place for the status the
                // close cannot succeed, so the writer is given up. Its own result is the lesser
                // news; the bad argument is what the caller must learn.
                let _ = ops::writer_abort(writer);
                return Err(e);
            }
        };
        let st = ops::writer_close(writer)?;
        if let Some(slot) = slot {
            slot.write(CvStat::from(&st));
        }
        Ok(())
    })
}

/// Frees the handle without completing the file (it stays invisible).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cv_writer_abort(writer: CvWriter) -> i32 {
    status(|| ops::writer_abort(writer))
}
