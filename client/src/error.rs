//! The client's error: a kind callers branch on, whether a retry can help,
//! and context.

use cv_net::{NetError, NetErrorKind};
use cv_wire::ErrorCode;
use std::fmt;

/// What went wrong.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// No such file or directory.
    NotFound,
    /// The target exists.
    AlreadyExists,
    /// A component is a file where a directory is needed.
    NotADirectory,
    /// A directory where a file is needed.
    IsADirectory,
    /// The directory is not empty.
    NotEmpty,
    /// The path is invalid (relative, too long, escapes the root).
    InvalidPath,
    /// An argument is not acceptable (offset past the end, bad range).
    InvalidArgument,
    /// Refused: missing permission or identity.
    PermissionDenied,
    /// The deadline passed.
    Timeout,
    /// A server or worker cannot be reached or is not ready.
    Unavailable,
    /// Stored bytes failed their checksum.
    Corrupt,
    /// Storage is full.
    NoSpace,
    /// The peer broke the protocol, or versions differ.
    Protocol,
    /// Certificates or configuration.
    Config,
    /// A request cv does not carry out, such as a rename across a mount boundary.
    Unsupported,
    /// Anything else the server reported.
    Other,
}

/// A client error.
#[derive(Debug)]
pub struct Error {
    kind: ErrorKind,
    retryable: bool,
    message: String,
    source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

/// The client's result type.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// A new error.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        let retryable = matches!(kind, ErrorKind::Timeout | ErrorKind::Unavailable | ErrorKind::Corrupt);
        Error { kind, retryable, message: message.into(), source: None }
    }

    /// The kind.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// Whether the same call may succeed if made again.
    pub fn retryable(&self) -> bool {
        self.retryable
    }

    /// Context for humans.
    pub fn message(&self) -> &str {
        &self.message
    }

    pub(crate) fn timeout(what: &str, after: std::time::Duration) -> Self {
        Error::new(ErrorKind::Timeout, format!("{what}: no answer within {after:?}"))
    }
}

fn kind_of(code: ErrorCode) -> ErrorKind {
    match code {
        ErrorCode::NotFound => ErrorKind::NotFound,
        ErrorCode::AlreadyExists => ErrorKind::AlreadyExists,
        ErrorCode::NotADirectory => ErrorKind::NotADirectory,
        ErrorCode::IsADirectory => ErrorKind::IsADirectory,
        ErrorCode::NotEmpty => ErrorKind::NotEmpty,
        ErrorCode::InvalidPath => ErrorKind::InvalidPath,
        ErrorCode::InvalidArgument | ErrorCode::NotWritable => ErrorKind::InvalidArgument,
        ErrorCode::PermissionDenied | ErrorCode::Unauthenticated => ErrorKind::PermissionDenied,
        ErrorCode::Timeout => ErrorKind::Timeout,
        ErrorCode::Unavailable | ErrorCode::NoWorkers | ErrorCode::WrongShard | ErrorCode::StaleVersion => {
            ErrorKind::Unavailable
        }
        ErrorCode::Corrupt => ErrorKind::Corrupt,
        ErrorCode::NoSpace => ErrorKind::NoSpace,
        ErrorCode::VersionMismatch | ErrorCode::Malformed | ErrorCode::LimitExceeded => ErrorKind::Protocol,
        ErrorCode::Unsupported => ErrorKind::Unsupported,
        ErrorCode::Internal | ErrorCode::UfsFailed => ErrorKind::Other,
    }
}

impl From<NetError> for Error {
    fn from(e: NetError) -> Self {
        let (kind, retryable) = match (e.kind(), e.code()) {
            (NetErrorKind::Remote, Some(code)) => (kind_of(code), code.retryable()),
            (NetErrorKind::Connect, _) => (ErrorKind::Unavailable, true),
            (NetErrorKind::Timeout, _) => (ErrorKind::Timeout, true),
            (NetErrorKind::Tls | NetErrorKind::Config, _) => (ErrorKind::Config, false),
            (NetErrorKind::Protocol, _) => (ErrorKind::Protocol, false),
            (NetErrorKind::Io, _) => (ErrorKind::Unavailable, true),
            (NetErrorKind::Remote, None) => (ErrorKind::Other, false),
        };
        Error { kind, retryable, message: e.to_string(), source: Some(Box::new(e)) }
    }
}

impl From<cv_wire::WireError> for Error {
    fn from(e: cv_wire::WireError) -> Self {
        Error::new(ErrorKind::Protocol, e.to_string())
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}: {}", self.kind, self.message)
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source.as_deref().map(|e| e as &(dyn std::error::Error + 'static))
    }
}
