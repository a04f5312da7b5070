//! Why a fetch failed, in the terms a shard answers with.

use std::fmt;

use cv_ufs::{UfsError, UfsErrorKind};

/// What a reader should do about a failed fetch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FetchErrorKind {
    /// The object (or its mount) is gone or changed since the file was opened: reopen.
    Stale,
    /// The object store or the master is unreachable, slow or throttling: a retry may work.
    Unavailable,
    /// The store refused (credentials, configuration) or answered nonsense: retrying the same
    /// request is unlikely to help until the mount is fixed.
    Failed,
}

/// A failed fetch: a kind and a message that never contains credentials.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FetchError {
    kind: FetchErrorKind,
    message: String,
}

impl FetchError {
    pub(crate) fn new(kind: FetchErrorKind, message: impl Into<String>) -> Self {
        Self { kind, message: message.into() }
    }

    /// The pool is gone (the worker is stopping).
    pub(crate) fn stopped() -> Self {
        Self::new(FetchErrorKind::Unavailable, "the object-store fetch pool is stopping")
    }

    /// A UFS error while doing `what`.
    pub(crate) fn from_ufs(what: &str, e: &UfsError) -> Self {
        let kind = match e.kind() {
            UfsErrorKind::NotFound | UfsErrorKind::Changed => FetchErrorKind::Stale,
            UfsErrorKind::Unavailable => FetchErrorKind::Unavailable,
            UfsErrorKind::Config | UfsErrorKind::PermissionDenied | UfsErrorKind::Other => FetchErrorKind::Failed,
        };
        let hint = match e.kind() {
            UfsErrorKind::NotFound => "the object is gone; reopen the file",
            UfsErrorKind::Changed => "the object changed since the file was opened; reopen it",
            UfsErrorKind::Unavailable => "the object store is unavailable; a retry may succeed",
            UfsErrorKind::Config => "the mount's configuration is wrong",
            UfsErrorKind::PermissionDenied => "the object store refused the mount's credentials",
            UfsErrorKind::Other => "the object store answered with something unusable",
        };
        Self::new(kind, format!("{what}: {hint}: {e}"))
    }

    pub(crate) fn kind(&self) -> FetchErrorKind {
        self.kind
    }

    pub(crate) fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for FetchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for FetchError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ufs_kinds_become_fetch_kinds() {
        let kind = |k| FetchError::from_ufs("read", &UfsError::new(k, "x")).kind();
        assert_eq!(kind(UfsErrorKind::NotFound), FetchErrorKind::Stale);
        assert_eq!(kind(UfsErrorKind::Changed), FetchErrorKind::Stale);
        assert_eq!(kind(UfsErrorKind::Unavailable), FetchErrorKind::Unavailable);
        assert_eq!(kind(UfsErrorKind::Config), FetchErrorKind::Failed);
        assert_eq!(kind(UfsErrorKind::PermissionDenied), FetchErrorKind::Failed);
        assert_eq!(kind(UfsErrorKind::Other), FetchErrorKind::Failed);
        assert_eq!(FetchError::stopped().kind(), FetchErrorKind::Unavailable);
    }
}
