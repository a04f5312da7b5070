//! The client's error: a kind callers branch on, whether a retry can help,
//! and context.

use cv_net::{NetError, NetErrorKind};
use cv_wire::ErrorCode;
use std::fmt;

macro_rules! error_kinds {
    ($($(#[doc = $doc:literal])* $name:ident = $code:literal, retry: $retry:literal;)*) => {
        /// What went wrong.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum ErrorKind {
            $($(#[doc = $doc])* $name,)*
        }

        impl ErrorKind {
            /// Every kind, in table order.
            pub const ALL: &'static [ErrorKind] = &[$(ErrorKind::$name),*];

            /// The kind's stable number: the C ABI's `CV_ERR_*` status and the code of
            /// `io.cv.CvErrorKind`. Never renumber one, only add.
            pub const fn code(self) -> i32 {
                match self { $(ErrorKind::$name => $code,)* }
            }

            /// The kind's stable name (the variant's), from which the bindings spell theirs.
            pub const fn name(self) -> &'static str {
                match self { $(ErrorKind::$name => stringify!($name),)* }
            }

            /// Whether an error of this kind made here may succeed if the call is made
            /// again (an error a server reported carries its code's own flag).
            pub const fn retryable(self) -> bool {
                match self { $(ErrorKind::$name => $retry,)* }
            }
        }
    };
}

// The client's kinds, declared once: the C and Java bindings (cv-capi) expose them with
// these numbers and add their own three, 16 to 18, which no kind here may take.
error_kinds! {
    /// No such file or directory.
    NotFound = 1, retry: false;
    /// The target exists.
    AlreadyExists = 2, retry: false;
    /// A component is a file where a directory is needed.
    NotADirectory = 3, retry: false;
    /// A directory where a file is needed.
    IsADirectory = 4, retry: false;
    /// The directory is not empty.
    NotEmpty = 5, retry: false;
    /// The path is invalid (relative, too long, escapes the root).
    InvalidPath = 6, retry: false;
    /// An argument is not acceptable (offset past the end, bad range).
    InvalidArgument = 7, retry: false;
    /// Refused: missing permission or identity.
    PermissionDenied = 8, retry: false;
    /// The deadline passed.
    Timeout = 9, retry: true;
    /// A server or worker cannot be reached or is not ready.
    Unavailable = 10, retry: true;
    /// Stored bytes failed their checksum.
    Corrupt = 11, retry: true;
    /// Storage is full.
    NoSpace = 12, retry: false;
    /// The peer broke the protocol, or versions differ.
    Protocol = 13, retry: false;
    /// Certificates or configuration.
    Config = 14, retry: false;
    /// Anything else the server reported.
    Other = 15, retry: false;
    /// A request cv does not carry out, such as a rename across a mount boundary.
    Unsupported = 19, retry: false;
    /// A worker did not answer within the transport's idle timeout, or could not be dialed;
    /// the message names the worker, its shard and address. Reads fail over before they
    /// report it: this is what is left when no other owner could serve either.
    WorkerUnreachable = 20, retry: true;
    /// Acknowledged bytes whose only copy is gone: their worker is lost, or its disk dropped
    /// the block (a checksum failure, a lost disk). The message names the file and the block.
    DataLoss = 21, retry: false;
    /// The object store behind a mount failed or could not be reached (after the server's own
    /// retries); the message names the store and what failed.
    StoreUnavailable = 22, retry: true;
    /// The version of the file this handle reads was replaced or removed after the open (its
    /// blocks are gone, or the object under a cache-mode mount changed): open the file again.
    /// The message names the file and both versions when known.
    Stale = 23, retry: false;
    /// The file is still being written: it opens once its writer completes it, which may take
    /// hours, so the SDK does not retry and callers should not wait for it within a call. The
    /// message names the path.
    FileIncomplete = 24, retry: false;
}

/// A client error.
#[derive(Debug)]
pub struct Error {
    kind: ErrorKind,
    retryable: bool,
    message: String,
    /// The id of the call that failed (every retry of a call sends the same id), which the
    /// server's log of the failure names too.
    request: Option<u64>,
    source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

/// The client's result type.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// A new error.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Error { kind, retryable: kind.retryable(), message: message.into(), request: None, source: None }
    }

    /// The id of the request that failed, if a server was asked: grep the server's log for it.
    pub fn request_id(&self) -> Option<u64> {
        self.request
    }

    /// Names the request that failed (the first id given stays).
    pub(crate) fn with_request(mut self, id: u64) -> Self {
        self.request.get_or_insert(id);
        self
    }

    /// The same error (kind, retry, server code) with `what` said first.
    pub(crate) fn context(mut self, what: impl std::fmt::Display) -> Self {
        self.message = format!("{what}: {}", self.message);
        self
    }

    /// The kind.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The server's error code, for an error the server answered.
    pub(crate) fn code(&self) -> Option<ErrorCode> {
        self.net().and_then(NetError::code)
    }

    /// Where the server said to go instead (`NotLeader`: the leader; `WrongShard`: the owner).
    pub(crate) fn redirect(&self) -> Option<&str> {
        self.net().and_then(NetError::redirect)
    }

    fn net(&self) -> Option<&NetError> {
        self.source.as_deref().and_then(|s| s.downcast_ref::<NetError>())
    }

    /// Whether the same call may succeed if made again.
    pub fn retryable(&self) -> bool {
        self.retryable
    }

    /// The same error, final: no retry of the call can help.
    pub(crate) fn final_(mut self) -> Self {
        self.retryable = false;
        self
    }

    /// Context for humans.
    pub fn message(&self) -> &str {
        &self.message
    }

    pub(crate) fn timeout(what: &str, after: std::time::Duration) -> Self {
        Error::new(ErrorKind::Timeout, format!("{what}: no answer within {after:?}"))
    }
}

/// The kind a wire code becomes: every code maps here and only here.
fn kind_of(code: ErrorCode) -> ErrorKind {
    match code {
        ErrorCode::NotFound => ErrorKind::NotFound,
        ErrorCode::AlreadyExists => ErrorKind::AlreadyExists,
        ErrorCode::NotADirectory => ErrorKind::NotADirectory,
        ErrorCode::IsADirectory => ErrorKind::IsADirectory,
        ErrorCode::NotEmpty => ErrorKind::NotEmpty,
        ErrorCode::InvalidPath => ErrorKind::InvalidPath,
        ErrorCode::InvalidArgument | ErrorCode::NotWritable => ErrorKind::InvalidArgument,
        ErrorCode::PermissionDenied | ErrorCode::Unauthenticated | ErrorCode::StaleCapability => {
            ErrorKind::PermissionDenied
        }
        ErrorCode::Timeout => ErrorKind::Timeout,
        ErrorCode::Unavailable | ErrorCode::NoWorkers | ErrorCode::WrongShard | ErrorCode::NotLeader => {
            ErrorKind::Unavailable
        }
        ErrorCode::StaleVersion => ErrorKind::Stale,
        ErrorCode::Corrupt => ErrorKind::Corrupt,
        ErrorCode::NoSpace => ErrorKind::NoSpace,
        ErrorCode::VersionMismatch | ErrorCode::Malformed | ErrorCode::LimitExceeded => ErrorKind::Protocol,
        ErrorCode::Unsupported => ErrorKind::Unsupported,
        ErrorCode::UfsFailed | ErrorCode::WriteThroughFailed => ErrorKind::StoreUnavailable,
        ErrorCode::DataLoss => ErrorKind::DataLoss,
        ErrorCode::FileIncomplete => ErrorKind::FileIncomplete,
        ErrorCode::Internal => ErrorKind::Other,
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
        Error { kind, retryable, message: e.to_string(), request: None, source: Some(Box::new(e)) }
    }
}

impl From<cv_wire::WireError> for Error {
    fn from(e: cv_wire::WireError) -> Self {
        Error::new(ErrorKind::Protocol, e.to_string())
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}: {}", self.kind, self.message)?;
        match self.request {
            Some(id) => write!(f, " (request {id:016x})"),
            None => Ok(()),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source.as_deref().map(|e| e as &(dyn std::error::Error + 'static))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_unique_and_leave_the_bindings_theirs() {
        let mut seen = std::collections::HashSet::new();
        for &k in ErrorKind::ALL {
            assert!(seen.insert(k.code()), "duplicate code {}", k.code());
            assert!(k.code() > 0 && !(16..=18).contains(&k.code()), "{k:?} takes code {}", k.code());
            assert_eq!(format!("{k:?}"), k.name());
        }
    }

    #[test]
    fn local_errors_take_their_kinds_retry_flag() {
        for &k in ErrorKind::ALL {
            assert_eq!(Error::new(k, "x").retryable(), k.retryable(), "{k:?}");
        }
        let retryable: Vec<_> = ErrorKind::ALL.iter().filter(|k| k.retryable()).collect();
        let want = [
            ErrorKind::Timeout,
            ErrorKind::Unavailable,
            ErrorKind::Corrupt,
            ErrorKind::WorkerUnreachable,
            ErrorKind::StoreUnavailable,
        ];
        assert_eq!(retryable, want.iter().collect::<Vec<_>>());
    }

    #[test]
    fn remote_errors_keep_their_codes_retry_flag() {
        for &c in ErrorCode::ALL {
            let e = Error::from(NetError::remote(c, "x", None));
            assert_eq!((e.kind(), e.retryable()), (kind_of(c), c.retryable()), "{c:?}");
        }
    }
}
