//! No panic crosses the boundary: every exported call runs inside
//! `catch_unwind`, and a panic becomes an `Internal` error.

use crate::error::{Error, ErrorKind, Result};
use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind};

/// Runs `f`, turning a panic into an error. State touched by a panicking
/// call is only the handle tables, whose operations are single steps.
pub fn run<T>(f: impl FnOnce() -> Result<T>) -> Result<T> {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|p| Err(panic_error(p.as_ref())))
}

fn panic_error(p: &(dyn Any + Send)) -> Error {
    let what = p
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into());
    Error::new(ErrorKind::Internal, format!("internal error (panic): {what}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn panics_become_internal_errors() {
        let e = run::<()>(|| panic!("boom {}", 1)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Internal);
        assert!(e.message().contains("boom 1"), "{e}");
        assert_eq!(run(|| Ok(3)).unwrap(), 3);
    }
}
