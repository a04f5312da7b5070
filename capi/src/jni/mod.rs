//! The JNI binding: native methods of `io.cv.Native` (capi/java). Java
//! objects hold the same handles as C callers; all work goes through
//! [`crate::ops`].
//!
//! `#[unsafe(no_mangle)]` is safe here because every symbol is a
//! `Java_io_cv_Native_*` name. Raw memory is touched only in `convert`.

mod convert;
mod fs;
mod stream;
mod throw;
