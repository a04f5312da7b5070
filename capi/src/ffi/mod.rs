//! The C ABI declared in `include/cv.h`.
//!
//! Contract (also in cv.h): every function returns a status (`CV_OK` = 0 or
//! a `CV_ERR_*` code) and records the error's message for
//! `cv_last_error_message` on the calling thread. Pointers may be NULL only
//! where cv.h says so (a NULL is reported as `CV_ERR_INVALID_ARGUMENT`, never
//! dereferenced); a non-NULL pointer must be valid for the stated length for
//! the duration of the call. Handles are ids, so stale or doubled handles are
//! `CV_ERR_BAD_HANDLE`. `#[unsafe(no_mangle)]` is safe here because every
//! symbol carries the `cv_` prefix.

mod client;
mod file;
mod ptr;
mod status;
mod types;
mod writer;

use crate::error::{Result, record};
use crate::guard;

/// Runs `f` under the panic guard and turns its outcome into a status.
fn status(f: impl FnOnce() -> Result<()>) -> i32 {
    match guard::run(f) {
        Ok(()) => 0,
        Err(e) => record(&e),
    }
}
