//! Errors of mounting and running the mount (not of single file system
//! calls: those are errnos, see [`crate::errno_of`]).

use std::fmt;

/// What went wrong while mounting or unmounting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FuseErrorKind {
    /// The options are not acceptable.
    Config,
    /// The cv root to mount is missing or is not a directory.
    Root,
    /// The cluster could not be reached.
    Client,
    /// The kernel refused the mount, or the session failed.
    Mount,
}

/// A mount error.
#[derive(Debug)]
pub struct FuseError {
    kind: FuseErrorKind,
    message: String,
    source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

impl FuseError {
    /// A new error.
    pub fn new(kind: FuseErrorKind, message: impl Into<String>) -> Self {
        FuseError { kind, message: message.into(), source: None }
    }

    /// With the underlying cause.
    pub fn with_source(mut self, source: impl std::error::Error + Send + Sync + 'static) -> Self {
        self.source = Some(Box::new(source));
        self
    }

    /// The kind.
    pub fn kind(&self) -> FuseErrorKind {
        self.kind
    }

    /// Whether trying again may work: only an unreachable cluster may come back.
    pub fn retryable(&self) -> bool {
        match self.kind {
            FuseErrorKind::Client => self
                .source
                .as_ref()
                .and_then(|s| s.downcast_ref::<cv_client::Error>())
                .is_some_and(cv_client::Error::retryable),
            FuseErrorKind::Config | FuseErrorKind::Root | FuseErrorKind::Mount => false,
        }
    }
}

impl fmt::Display for FuseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}: {}", self.kind, self.message)?;
        if let Some(s) = &self.source {
            write!(f, ": {s}")?;
        }
        Ok(())
    }
}

impl std::error::Error for FuseError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source.as_deref().map(|e| e as &(dyn std::error::Error + 'static))
    }
}
