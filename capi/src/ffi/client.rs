//! Clients and namespace calls.

use super::ptr::{cstr, out};
use super::status;
use super::types::{CvClient, CvListFn, CvStat};
use crate::error::Error;
use crate::ops;
use std::ffi::{CString, c_char, c_void};

/// Connects a client configured by the TOML file at `config_path`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cv_client_open_file(config_path: *const c_char, client: *mut CvClient) -> i32 {
    status(|| {
        // SAFETY: cv.h contract: a NUL-terminated string and a writable slot, or NULL.
        let (path, slot) = unsafe { (cstr(config_path, "config_path")?, out(client, "client")?) };
        slot.write(ops::client_from_file(path)?);
        Ok(())
    })
}

/// Connects a client configured by TOML text.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cv_client_open_toml(config_toml: *const c_char, client: *mut CvClient) -> i32 {
    status(|| {
        // SAFETY: cv.h contract: a NUL-terminated string and a writable slot, or NULL.
        let (text, slot) = unsafe { (cstr(config_toml, "config_toml")?, out(client, "client")?) };
        slot.write(ops::client_from_toml(text)?);
        Ok(())
    })
}

/// Connects a client configured by the file at `config_path` (or NULL: none) with the TOML
/// text `overrides_toml` laid over it key by key.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cv_client_open_layers(
    config_path: *const c_char,
    overrides_toml: *const c_char,
    client: *mut CvClient,
) -> i32 {
    status(|| {
        // SAFETY: cv.h contract: NULL or a NUL-terminated string, a NUL-terminated string and
        // a writable slot, or NULL.
        let (path, text, slot) = unsafe {
            let path = if config_path.is_null() { None } else { Some(cstr(config_path, "config_path")?) };
            (path, cstr(overrides_toml, "overrides_toml")?, out(client, "client")?)
        };
        slot.write(ops::client_from_layers(path, text)?);
        Ok(())
    })
}

/// Closes a client; a second close is `CV_ERR_BAD_HANDLE`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cv_client_close(client: CvClient) -> i32 {
    status(|| ops::client_close(client))
}

/// Metadata of a path.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cv_stat(client: CvClient, path: *const c_char, stat: *mut CvStat) -> i32 {
    status(|| {
        // SAFETY: cv.h contract: a NUL-terminated string and a writable slot, or NULL.
        let (path, slot) = unsafe { (cstr(path, "path")?, out(stat, "stat")?) };
        slot.write(CvStat::from(&ops::stat(client, path)?));
        Ok(())
    })
}

/// Calls `callback` for each entry of a directory, in name order.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cv_list(client: CvClient, path: *const c_char, callback: CvListFn, ctx: *mut c_void) -> i32 {
    status(|| {
        // SAFETY: cv.h contract: a NUL-terminated string or NULL.
        let path = unsafe { cstr(path, "path")? };
        let callback = callback.ok_or_else(|| Error::invalid("callback is NULL"))?;
        for entry in ops::list(client, path)? {
            let name = CString::new(entry.path.as_str()).map_err(|_| Error::invalid("entry path holds a NUL"))?;
            let st = CvStat::from(&entry);
            // SAFETY: `callback` is the caller's function of type cv_list_fn;
            // `name` and `st` outlive the call, `ctx` is passed through untouched.
            if unsafe { callback(ctx, name.as_ptr(), &st) } != 0 {
                break;
            }
        }
        Ok(())
    })
}

/// Creates a directory (and missing parents when `parents` is non-zero).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cv_mkdir(client: CvClient, path: *const c_char, parents: i32) -> i32 {
    status(|| {
        // SAFETY: cv.h contract: a NUL-terminated string or NULL.
        let path = unsafe { cstr(path, "path")? };
        ops::mkdir(client, path, parents != 0)
    })
}

/// Renames a file or directory atomically.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cv_rename(client: CvClient, src: *const c_char, dst: *const c_char) -> i32 {
    status(|| {
        // SAFETY: cv.h contract: NUL-terminated strings or NULL.
        let (src, dst) = unsafe { (cstr(src, "src")?, cstr(dst, "dst")?) };
        ops::rename(client, src, dst)
    })
}

/// Deletes a path; a non-empty directory only when `recursive` is non-zero.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cv_delete(client: CvClient, path: *const c_char, recursive: i32) -> i32 {
    status(|| {
        // SAFETY: cv.h contract: a NUL-terminated string or NULL.
        let path = unsafe { cstr(path, "path")? };
        ops::delete(client, path, recursive != 0)
    })
}
