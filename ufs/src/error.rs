//! Typed object-store errors: a kind, whether a retry can help, and the
//! OpenDAL error behind it.

use std::fmt;

/// What went wrong, in the terms cv acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UfsErrorKind {
    /// The URL or an option is wrong; fix the mount.
    Config,
    /// No such object or directory.
    NotFound,
    /// The store refused the credentials or the operation.
    PermissionDenied,
    /// The object changed under a conditional request.
    Changed,
    /// Timed out, throttled, or the store is down: a later attempt may work.
    Unavailable,
    /// The store answered with something cv cannot use.
    Other,
}

/// An object-store error.
#[derive(Debug, thiserror::Error)]
pub struct UfsError {
    kind: UfsErrorKind,
    message: String,
    #[source]
    source: Option<opendal::Error>,
}

impl UfsError {
    pub fn new(kind: UfsErrorKind, message: impl Into<String>) -> Self {
        UfsError { kind, message: message.into(), source: None }
    }

    /// The same error, classified as `kind`.
    pub(crate) fn with_kind(mut self, kind: UfsErrorKind) -> Self {
        self.kind = kind;
        self
    }

    pub fn kind(&self) -> UfsErrorKind {
        self.kind
    }

    /// Whether the same call may succeed later.
    pub fn is_retryable(&self) -> bool {
        self.kind == UfsErrorKind::Unavailable
    }

    /// `what` failed with an OpenDAL error.
    pub(crate) fn from_opendal(what: impl fmt::Display, e: opendal::Error) -> Self {
        use opendal::ErrorKind as K;
        let kind = match e.kind() {
            K::NotFound => UfsErrorKind::NotFound,
            K::PermissionDenied => UfsErrorKind::PermissionDenied,
            K::ConfigInvalid | K::Unsupported => UfsErrorKind::Config,
            K::ConditionNotMatch => UfsErrorKind::Changed,
            K::RateLimited => UfsErrorKind::Unavailable,
            _ if e.is_temporary() => UfsErrorKind::Unavailable,
            _ => UfsErrorKind::Other,
        };
        // The retry layer marks errors it gave up on as persistent; a
        // timeout or a 5xx that outlived the retries is still "try later".
        let kind = if kind == UfsErrorKind::Other && looks_unavailable(&e) { UfsErrorKind::Unavailable } else { kind };
        // OpenDAL's Display carries the context and the cause (e.g. "connection refused").
        UfsError { kind, message: format!("{what}: {e}"), source: Some(e) }
    }
}

fn looks_unavailable(e: &opendal::Error) -> bool {
    let text = e.to_string();
    ["timeout", "timed out", "503", "500", "502", "504", "connection", "Connect"].iter().any(|s| text.contains(s))
}

impl fmt::Display for UfsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "object store {:?}: {}", self.kind, self.message)
    }
}
