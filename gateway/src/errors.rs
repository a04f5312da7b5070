//! cv's errors as S3 errors, in one place. A response names the bucket and key
//! the client sent and a request id, never cv's internal paths, workers or
//! stores: those go to the gateway's log under the same request id.

use cv_client::{Error, ErrorKind};
use s3s::{S3Error, S3ErrorCode};
use std::sync::atomic::{AtomicU64, Ordering};

/// A fresh request id for an error (logged and returned as `RequestId`).
pub(crate) fn request_id() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    static BASE: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    let base = *BASE.get_or_init(rand::random::<u64>);
    format!("{:016X}", base.wrapping_add(NEXT.fetch_add(1, Ordering::Relaxed)))
}

/// The S3 code and client-facing message for a cv error kind; `what` names the
/// object as the client addressed it (`bucket/key`).
fn code_of(kind: ErrorKind, what: &str) -> (S3ErrorCode, String) {
    use ErrorKind::*;
    match kind {
        // An upload in progress is not an object in S3 either: it is one once its writer
        // completes it (a stat of it, `is_object`, answers the same).
        NotFound | FileIncomplete => (S3ErrorCode::NoSuchKey, format!("{what} does not exist")),
        NotADirectory | AlreadyExists | IsADirectory => (
            S3ErrorCode::InvalidRequest,
            format!(
                "{what} conflicts with another key: cv keeps keys as paths, so `a` and `a/b` cannot both be objects"
            ),
        ),
        InvalidPath | InvalidArgument => (S3ErrorCode::InvalidArgument, format!("{what}: not a key cv can hold")),
        PermissionDenied => (S3ErrorCode::AccessDenied, "the cluster refused the gateway's identity".into()),
        // Shedding load: the client should back off and retry.
        Unavailable => (S3ErrorCode::SlowDown, "the cluster is busy; reduce the request rate".into()),
        Timeout | WorkerUnreachable => {
            (S3ErrorCode::ServiceUnavailable, format!("{what}: the cluster did not answer in time"))
        }
        // A retry of the whole request may succeed once the store does.
        StoreUnavailable => (S3ErrorCode::ServiceUnavailable, format!("{what}: the object store behind it failed")),
        NoSpace => (S3ErrorCode::Custom("InsufficientStorage".into()), "the cluster is out of space".into()),
        // A retry opens the object afresh.
        Stale => (S3ErrorCode::ServiceUnavailable, format!("{what} was replaced while it was read; retry")),
        Corrupt | DataLoss => (S3ErrorCode::InternalError, format!("{what}: stored bytes could not be read intact")),
        _ => (S3ErrorCode::InternalError, format!("{what}: internal error")),
    }
}

/// An S3 error for cv error `e` on object `what`, logged with its request id.
pub(crate) fn s3_error(e: &Error, what: &str) -> S3Error {
    let (code, msg) = code_of(e.kind(), what);
    let id = request_id();
    if matches!(code, S3ErrorCode::NoSuchKey) {
        tracing::debug!(request_id = %id, object = what, error = %e, "gateway: no such key");
    } else {
        tracing::warn!(request_id = %id, object = what, error = %e, "gateway: request failed");
    }
    let status = match &code {
        S3ErrorCode::Custom(_) => Some(hyper::StatusCode::INSUFFICIENT_STORAGE),
        _ => None,
    };
    let mut err = S3Error::with_message(code, msg);
    err.set_request_id(id);
    if let Some(s) = status {
        err.set_status_code(s);
    }
    err
}

/// An S3 error of our own making (no cv error behind it).
pub(crate) fn s3_err(code: S3ErrorCode, msg: impl Into<String>) -> S3Error {
    let mut err = S3Error::with_message(code, msg.into());
    err.set_request_id(request_id());
    err
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_maps_without_internal_detail() {
        for &k in ErrorKind::ALL {
            let e = Error::new(k, "worker w3 shard 2 at 10.0.0.3:7001: /warehouse/secret/path failed");
            let s = s3_error(&e, "lake/t/a.parquet");
            let msg = s.message().unwrap_or_default().to_string();
            assert!(!msg.contains("/warehouse") && !msg.contains("10.0.0.3"), "{k:?}: {msg}");
            assert!(s.request_id().is_some());
        }
        assert_eq!(*s3_error(&Error::new(ErrorKind::NotFound, ""), "b/k").code(), S3ErrorCode::NoSuchKey);
        assert_eq!(*s3_error(&Error::new(ErrorKind::FileIncomplete, ""), "b/k").code(), S3ErrorCode::NoSuchKey);
        assert_eq!(*s3_error(&Error::new(ErrorKind::Unavailable, ""), "b/k").code(), S3ErrorCode::SlowDown);
        assert_eq!(*s3_error(&Error::new(ErrorKind::Stale, ""), "b/k").code(), S3ErrorCode::ServiceUnavailable);
        let full = s3_error(&Error::new(ErrorKind::NoSpace, ""), "b/k");
        assert_eq!(full.status_code(), Some(hyper::StatusCode::INSUFFICIENT_STORAGE));
    }
}
