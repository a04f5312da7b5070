//! Error mapping for the server: master error kinds and object-store error kinds to wire
//! codes (each in one place, here), the per-request failure a handler returns, and the
//! typed error of starting a server.

use cv_master_core::error::{Error, ErrorKind};
use cv_net::NetError;
use cv_net::config::ConfigError;
use cv_ufs::{UfsError, UfsErrorKind};
use cv_wire::{ErrorCode, WireError};
use std::fmt;

/// The wire code a client sees for a master error kind. Every kind maps here and only here.
pub fn code_of(kind: ErrorKind) -> ErrorCode {
    match kind {
        ErrorKind::NotFound => ErrorCode::NotFound,
        ErrorKind::AlreadyExists => ErrorCode::AlreadyExists,
        ErrorKind::NotADirectory => ErrorCode::NotADirectory,
        ErrorKind::IsADirectory => ErrorCode::IsADirectory,
        ErrorKind::NotEmpty => ErrorCode::NotEmpty,
        ErrorKind::InvalidPath => ErrorCode::InvalidPath,
        ErrorKind::InvalidArgument => ErrorCode::InvalidArgument,
        ErrorKind::NoWorkers => ErrorCode::NoWorkers,
        ErrorKind::FileNotWritable => ErrorCode::NotWritable,
        ErrorKind::Unsupported => ErrorCode::Unsupported,
        ErrorKind::Changed => ErrorCode::StaleVersion,
        // The path holds another version than a conditional completion expected: not retryable.
        ErrorKind::ConditionFailed => ErrorCode::StaleVersion,
        // Readable once its writer completes it, which may take hours: not worth a retry.
        ErrorKind::FileIncomplete => ErrorCode::FileIncomplete,
        ErrorKind::UnknownWorker => ErrorCode::NotFound,
        ErrorKind::NotLeader => ErrorCode::NotLeader,
        // The master's own files: the client can do nothing but report it.
        ErrorKind::CorruptData | ErrorKind::UnsupportedVersion => ErrorCode::Internal,
        // A disk hiccup, or a journal that needs a restart: another master (or this one,
        // restarted) may answer later.
        ErrorKind::Io | ErrorKind::Poisoned => ErrorCode::Unavailable,
        // The journal's disk is full: this write did not happen; later ones may, once an
        // operator makes room (the message names the journal).
        ErrorKind::NoSpace => ErrorCode::NoSpace,
    }
}

/// The wire code a client sees for an object-store error kind. Every kind maps here and
/// only here.
pub fn ufs_code_of(kind: UfsErrorKind) -> ErrorCode {
    match kind {
        UfsErrorKind::NotFound => ErrorCode::NotFound,
        UfsErrorKind::PermissionDenied => ErrorCode::PermissionDenied,
        UfsErrorKind::Config => ErrorCode::InvalidArgument,
        UfsErrorKind::Changed => ErrorCode::StaleVersion,
        UfsErrorKind::Unavailable | UfsErrorKind::Other => ErrorCode::UfsFailed,
    }
}

/// Why one request failed: the code and message of its error reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Fail {
    pub code: ErrorCode,
    pub message: String,
}

impl Fail {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Fail { code, message: message.into() }
    }
}

impl From<Error> for Fail {
    fn from(e: Error) -> Self {
        Fail::new(code_of(e.kind()), e.context())
    }
}

impl From<UfsError> for Fail {
    fn from(e: UfsError) -> Self {
        Fail::new(ufs_code_of(e.kind()), e.to_string())
    }
}

impl From<WireError> for Fail {
    fn from(e: WireError) -> Self {
        Fail::new(e.code(), e.to_string())
    }
}

/// What part of starting or running the server failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerErrorKind {
    /// A configuration value is invalid.
    Config,
    /// The endpoint could not be built (address in use, bad identity).
    Net,
    /// The core could not recover or start its journal.
    Master,
    /// A background task failed to run.
    Runtime,
}

/// A typed error of [`super::MasterServer`].
#[derive(Debug)]
pub struct ServerError {
    kind: ServerErrorKind,
    retryable: bool,
    message: String,
    source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

impl ServerError {
    pub fn new(kind: ServerErrorKind, message: impl Into<String>) -> Self {
        ServerError { kind, retryable: false, message: message.into(), source: None }
    }

    pub fn kind(&self) -> ServerErrorKind {
        self.kind
    }

    /// Whether starting again unchanged may succeed (e.g. a transient disk error).
    pub fn retryable(&self) -> bool {
        self.retryable
    }
}

impl fmt::Display for ServerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "master {:?}: {}", self.kind, self.message)?;
        if let Some(s) = &self.source {
            write!(f, ": {s}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ServerError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source.as_deref().map(|e| e as &(dyn std::error::Error + 'static))
    }
}

impl From<ConfigError> for ServerError {
    fn from(e: ConfigError) -> Self {
        ServerError {
            message: format!("invalid configuration `{}`", e.field),
            ..Self::wrap(ServerErrorKind::Config, e)
        }
    }
}

impl From<NetError> for ServerError {
    fn from(e: NetError) -> Self {
        let retryable = e.retryable();
        ServerError { retryable, message: "endpoint".into(), ..Self::wrap(ServerErrorKind::Net, e) }
    }
}

impl From<Error> for ServerError {
    fn from(e: Error) -> Self {
        let retryable = e.retryable();
        ServerError { retryable, message: "core".into(), ..Self::wrap(ServerErrorKind::Master, e) }
    }
}

impl ServerError {
    fn wrap(kind: ServerErrorKind, e: impl std::error::Error + Send + Sync + 'static) -> Self {
        ServerError { kind, retryable: false, message: String::new(), source: Some(Box::new(e)) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespace_kinds_keep_their_meaning_and_retry_flags_agree() {
        assert_eq!(code_of(ErrorKind::NotEmpty), ErrorCode::NotEmpty);
        assert_eq!(code_of(ErrorKind::InvalidPath), ErrorCode::InvalidPath);
        assert_eq!(code_of(ErrorKind::FileNotWritable), ErrorCode::NotWritable);
        // A kind the master calls retryable must not become a permanent wire code.
        for k in [ErrorKind::NoWorkers, ErrorKind::Io] {
            assert!(k.retryable() && code_of(k).retryable(), "{k:?}");
        }
        let f = Fail::from(Error::new(ErrorKind::AlreadyExists, "/a"));
        assert_eq!((f.code, f.message.as_str()), (ErrorCode::AlreadyExists, "/a"));
    }

    #[test]
    fn store_kinds_keep_their_meaning() {
        assert_eq!(ufs_code_of(UfsErrorKind::NotFound), ErrorCode::NotFound);
        assert_eq!(ufs_code_of(UfsErrorKind::Changed), ErrorCode::StaleVersion);
        assert_eq!(ufs_code_of(UfsErrorKind::Config), ErrorCode::InvalidArgument);
        // A store that is down may be up again: the client may retry.
        assert!(ufs_code_of(UfsErrorKind::Unavailable).retryable());
    }
}
