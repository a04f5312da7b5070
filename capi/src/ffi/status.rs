//! Version, status names and the thread's last error.

use crate::error::{ErrorKind, LAST_ERROR};
use std::ffi::{CStr, c_char};

const VERSION: &CStr = match CStr::from_bytes_with_nul(concat!(env!("CARGO_PKG_VERSION"), "\0").as_bytes()) {
    Ok(v) => v,
    Err(_) => c"unknown",
};

/// The library version, e.g. "0.1.0". Static storage.
#[unsafe(no_mangle)]
pub extern "C" fn cv_version() -> *const c_char {
    VERSION.as_ptr()
}

/// The macro name of a status ("CV_OK", "CV_ERR_NOT_FOUND", ...);
/// "CV_ERR_UNKNOWN" for a number that is not a status. Static storage.
#[unsafe(no_mangle)]
pub extern "C" fn cv_status_name(status: i32) -> *const c_char {
    match status {
        0 => c"CV_OK".as_ptr(),
        s => ErrorKind::from_code(s).map_or(c"CV_ERR_UNKNOWN", |k| k.c_name_cstr()).as_ptr(),
    }
}

/// The status of the last failed call on this thread (0 if none yet).
#[unsafe(no_mangle)]
pub extern "C" fn cv_last_error_code() -> i32 {
    LAST_ERROR.with(|l| l.borrow().code)
}

/// 1 if the last failed call on this thread may succeed when repeated.
#[unsafe(no_mangle)]
pub extern "C" fn cv_last_error_retryable() -> i32 {
    LAST_ERROR.with(|l| i32::from(l.borrow().retryable))
}

/// The message of the last failed call on this thread ("" if none). Valid
/// until the next failing cv call on this thread.
#[unsafe(no_mangle)]
pub extern "C" fn cv_last_error_message() -> *const c_char {
    LAST_ERROR.with(|l| l.borrow().message.as_ptr())
}
