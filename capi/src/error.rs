//! The binding's error: a kind with a stable numeric code (the `CV_ERR_*`
//! values of cv.h and `io.cv.CvErrorKind`), whether a retry can help, and a
//! message. The last error of each thread is kept for C callers.

use std::cell::RefCell;
use std::ffi::{CStr, CString};
use std::fmt;

/// What went wrong. The discriminant is the status code returned to C
/// (0 is success) and passed to Java; codes never change meaning.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum ErrorKind {
    /// No such file or directory.
    NotFound = 1,
    /// The target exists.
    AlreadyExists = 2,
    /// A component is a file where a directory is needed.
    NotADirectory = 3,
    /// A directory where a file is needed.
    IsADirectory = 4,
    /// The directory is not empty.
    NotEmpty = 5,
    /// The path is invalid (relative, too long, escapes the root).
    InvalidPath = 6,
    /// A bad argument: NULL pointer, impossible length, non-UTF-8 string.
    InvalidArgument = 7,
    /// Refused: missing permission or identity.
    PermissionDenied = 8,
    /// The deadline passed.
    Timeout = 9,
    /// A server or worker cannot be reached or is not ready.
    Unavailable = 10,
    /// Stored bytes failed their checksum.
    Corrupt = 11,
    /// Storage is full.
    NoSpace = 12,
    /// The peer broke the protocol, or versions differ.
    Protocol = 13,
    /// Certificates or the configuration file.
    Config = 14,
    /// Anything else.
    Other = 15,
    /// The handle is unknown, already closed, or of another type.
    BadHandle = 16,
    /// A read that must be complete reaches past the end of the file.
    Eof = 17,
    /// A bug inside the library (a caught panic); the call had no effect
    /// that can be relied on.
    Internal = 18,
    /// A request cv does not carry out, such as a rename across a mount boundary.
    Unsupported = 19,
}

impl ErrorKind {
    /// Every kind, in code order.
    pub const ALL: [ErrorKind; 19] = [
        ErrorKind::NotFound,
        ErrorKind::AlreadyExists,
        ErrorKind::NotADirectory,
        ErrorKind::IsADirectory,
        ErrorKind::NotEmpty,
        ErrorKind::InvalidPath,
        ErrorKind::InvalidArgument,
        ErrorKind::PermissionDenied,
        ErrorKind::Timeout,
        ErrorKind::Unavailable,
        ErrorKind::Corrupt,
        ErrorKind::NoSpace,
        ErrorKind::Protocol,
        ErrorKind::Config,
        ErrorKind::Other,
        ErrorKind::BadHandle,
        ErrorKind::Eof,
        ErrorKind::Internal,
        ErrorKind::Unsupported,
    ];

    /// The status code (never 0).
    pub fn code(self) -> i32 {
        self as i32
    }

    /// The kind of a status code, if it is one.
    pub fn from_code(code: i32) -> Option<ErrorKind> {
        ErrorKind::ALL.iter().copied().find(|k| k.code() == code)
    }

    /// The macro name in cv.h, e.g. `CV_ERR_NOT_FOUND`.
    pub fn c_name(self) -> &'static str {
        self.c_name_cstr().to_str().unwrap_or("CV_ERR_OTHER")
    }

    /// [`ErrorKind::c_name`] as a C string, for `cv_status_name`.
    pub fn c_name_cstr(self) -> &'static CStr {
        match self {
            ErrorKind::NotFound => c"CV_ERR_NOT_FOUND",
            ErrorKind::AlreadyExists => c"CV_ERR_ALREADY_EXISTS",
            ErrorKind::NotADirectory => c"CV_ERR_NOT_A_DIRECTORY",
            ErrorKind::IsADirectory => c"CV_ERR_IS_A_DIRECTORY",
            ErrorKind::NotEmpty => c"CV_ERR_NOT_EMPTY",
            ErrorKind::InvalidPath => c"CV_ERR_INVALID_PATH",
            ErrorKind::InvalidArgument => c"CV_ERR_INVALID_ARGUMENT",
            ErrorKind::PermissionDenied => c"CV_ERR_PERMISSION_DENIED",
            ErrorKind::Timeout => c"CV_ERR_TIMEOUT",
            ErrorKind::Unavailable => c"CV_ERR_UNAVAILABLE",
            ErrorKind::Corrupt => c"CV_ERR_CORRUPT",
            ErrorKind::NoSpace => c"CV_ERR_NO_SPACE",
            ErrorKind::Protocol => c"CV_ERR_PROTOCOL",
            ErrorKind::Config => c"CV_ERR_CONFIG",
            ErrorKind::Other => c"CV_ERR_OTHER",
            ErrorKind::BadHandle => c"CV_ERR_BAD_HANDLE",
            ErrorKind::Eof => c"CV_ERR_EOF",
            ErrorKind::Internal => c"CV_ERR_INTERNAL",
            ErrorKind::Unsupported => c"CV_ERR_UNSUPPORTED",
        }
    }

    /// The constant name of `io.cv.CvErrorKind`, e.g. `NOT_FOUND`.
    pub fn java_name(self) -> &'static str {
        &self.c_name()["CV_ERR_".len()..]
    }
}

/// An error of the binding.
#[derive(Debug, Clone)]
pub struct Error {
    kind: ErrorKind,
    retryable: bool,
    message: String,
}

/// The binding's result type.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// A new error that a retry cannot fix.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Error { kind, retryable: false, message: message.into() }
    }

    /// A bad argument.
    pub fn invalid(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::InvalidArgument, message)
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
}

impl From<cv_client::Error> for Error {
    fn from(e: cv_client::Error) -> Self {
        use cv_client::ErrorKind as K;
        let kind = match e.kind() {
            K::NotFound => ErrorKind::NotFound,
            K::AlreadyExists => ErrorKind::AlreadyExists,
            K::NotADirectory => ErrorKind::NotADirectory,
            K::IsADirectory => ErrorKind::IsADirectory,
            K::NotEmpty => ErrorKind::NotEmpty,
            K::InvalidPath => ErrorKind::InvalidPath,
            K::InvalidArgument => ErrorKind::InvalidArgument,
            K::PermissionDenied => ErrorKind::PermissionDenied,
            K::Timeout => ErrorKind::Timeout,
            K::Unavailable => ErrorKind::Unavailable,
            K::Corrupt => ErrorKind::Corrupt,
            K::NoSpace => ErrorKind::NoSpace,
            K::Protocol => ErrorKind::Protocol,
            K::Config => ErrorKind::Config,
            K::Unsupported => ErrorKind::Unsupported,
            K::Other => ErrorKind::Other,
        };
        Error { kind, retryable: e.retryable(), message: e.to_string() }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind.c_name(), self.message)
    }
}

impl std::error::Error for Error {}

/// The last error recorded on this thread, as C reads it.
#[derive(Debug)]
pub(crate) struct LastError {
    pub(crate) code: i32,
    pub(crate) retryable: bool,
    pub(crate) message: CString,
}

thread_local! {
    pub(crate) static LAST_ERROR: RefCell<LastError> =
        RefCell::new(LastError { code: 0, retryable: false, message: CString::default() });
}

/// Records `e` as this thread's last error and returns its code.
pub(crate) fn record(e: &Error) -> i32 {
    // Interior NULs would cut the C string short; replace them.
    let text = e.to_string().replace('\0', "?");
    let message = CString::new(text).unwrap_or_default();
    LAST_ERROR.with(|l| *l.borrow_mut() = LastError { code: e.kind.code(), retryable: e.retryable, message });
    e.kind.code()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_unique_dense_and_round_trip() {
        for (i, k) in ErrorKind::ALL.iter().enumerate() {
            assert_eq!(k.code(), i as i32 + 1);
            assert_eq!(ErrorKind::from_code(k.code()), Some(*k));
            assert!(k.c_name().starts_with("CV_ERR_"));
        }
        assert_eq!(ErrorKind::from_code(0), None);
        assert_eq!(ErrorKind::from_code(99), None);
        assert_eq!(ErrorKind::NotFound.java_name(), "NOT_FOUND");
    }

    #[test]
    fn client_errors_keep_kind_and_retry_status() {
        let e = Error::from(cv_client::Error::new(cv_client::ErrorKind::Unavailable, "down"));
        assert_eq!(e.kind(), ErrorKind::Unavailable);
        assert!(e.retryable());
        let e = Error::from(cv_client::Error::new(cv_client::ErrorKind::NotFound, "/x"));
        assert_eq!(e.kind(), ErrorKind::NotFound);
        assert!(!e.retryable());
        assert!(e.message().contains("/x"));
    }

    #[test]
    fn record_survives_interior_nul() {
        let code = record(&Error::invalid("a\0b"));
        assert_eq!(code, ErrorKind::InvalidArgument.code());
        LAST_ERROR.with(|l| {
            let l = l.borrow();
            assert_eq!(l.code, code);
            assert_eq!(l.message.to_str().unwrap(), "CV_ERR_INVALID_ARGUMENT: a?b");
        });
    }
}
