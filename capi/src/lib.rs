//! cv's C ABI (`include/cv.h`) and JNI binding (`java/io/cv`) over the
//! cv-client SDK, in one shared library (`libcv_capi.so`, also a static
//! library).
//!
//! Both bindings are thin: they convert arguments and call [`ops`], safe
//! Rust over handle tables, which runs the client's futures on one internal
//! tokio runtime. Handles are ids (never pointers), every call is guarded
//! against panics, and errors carry a stable [`ErrorKind`] code.

pub mod error;
pub mod guard;
pub mod handles;
pub mod ops;
pub mod runtime;

// The FFI boundaries: the only modules with unsafe code.
#[allow(unsafe_code)]
mod ffi;
#[allow(unsafe_code)]
mod jni;

pub use error::{Error, ErrorKind, Result};
