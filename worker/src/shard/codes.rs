//! The one place where store and fetch errors become protocol error codes.

use cv_wire::ErrorCode;

use crate::fetch::{FetchError, FetchErrorKind};
use crate::store::{ErrorKind, StoreError};

/// The code a client acts on: `Corrupt` (retryable) makes it refetch, `NotFound` makes it
/// go to the object store, `Unavailable` makes it retry or fall back.
pub(crate) fn store_code(e: &StoreError) -> ErrorCode {
    match e.kind() {
        ErrorKind::NotFound => ErrorCode::NotFound,
        ErrorKind::Corrupt => ErrorCode::Corrupt,
        ErrorKind::NoSpace => ErrorCode::NoSpace,
        ErrorKind::InvalidArgument => ErrorCode::InvalidArgument,
        ErrorKind::Committed => ErrorCode::AlreadyExists,
        // Another writer holds the id, or the disk failed an I/O: may pass if tried again.
        ErrorKind::Busy | ErrorKind::Io => ErrorCode::Unavailable,
        // Only opening a store fails so; listed so a new kind is mapped on purpose.
        ErrorKind::Incompatible | ErrorKind::Damaged => ErrorCode::Internal,
    }
}

/// A failed fetch from object storage: `StaleVersion` makes the client reopen the file (the
/// object is gone or changed); anything else is `UfsFailed`, which a client may retry.
pub(crate) fn fetch_code(e: &FetchError) -> ErrorCode {
    match e.kind() {
        FetchErrorKind::Stale => ErrorCode::StaleVersion,
        FetchErrorKind::Unavailable | FetchErrorKind::Failed => ErrorCode::UfsFailed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_keep_the_meaning_callers_rely_on() {
        let code = |k| store_code(&StoreError::new(k, "x"));
        assert_eq!(code(ErrorKind::Corrupt), ErrorCode::Corrupt);
        assert!(code(ErrorKind::Corrupt).retryable());
        assert_eq!(code(ErrorKind::NotFound), ErrorCode::NotFound);
        assert_eq!(code(ErrorKind::NoSpace), ErrorCode::NoSpace);
        assert_eq!(code(ErrorKind::InvalidArgument), ErrorCode::InvalidArgument);
        assert!(code(ErrorKind::Busy).retryable());
        assert!(code(ErrorKind::Io).retryable());
        assert_eq!(code(ErrorKind::Incompatible), ErrorCode::Internal);
    }

    #[test]
    fn fetch_codes_tell_reopen_from_retry() {
        let code = |k| fetch_code(&FetchError::new(k, "x"));
        assert_eq!(code(FetchErrorKind::Stale), ErrorCode::StaleVersion);
        assert!(!code(FetchErrorKind::Stale).retryable());
        assert_eq!(code(FetchErrorKind::Unavailable), ErrorCode::UfsFailed);
        assert!(code(FetchErrorKind::Unavailable).retryable());
        assert_eq!(code(FetchErrorKind::Failed), ErrorCode::UfsFailed);
    }
}
