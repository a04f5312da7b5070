//! The binding's error: a kind with a stable numeric code (the `CV_ERR_*`
//! values of cv.h and `io.cv.CvErrorKind`), whether a retry can help, and a
//! message. The last error of each thread is kept for C callers.

use cv_net::config::ConfigError;
use std::cell::RefCell;
use std::ffi::{CStr, CString};
use std::fmt;
use std::sync::OnceLock;

/// What went wrong: a kind of the client SDK, or one only the binding raises. The
/// client's kinds and their numbers are declared once, in cv-client; the binding adds
/// 16 to 18. [`ErrorKind::code`] is the status returned to C (0 is success) and passed
/// to Java; codes never change meaning.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// An error of the SDK, with the SDK's kind.
    Client(cv_client::ErrorKind),
    /// The handle is unknown, already closed, or of another type.
    BadHandle,
    /// A read that must be complete reaches past the end of the file.
    Eof,
    /// A bug inside the library (a caught panic); the call had no effect
    /// that can be relied on.
    Internal,
}

/// How many kinds there are, the client's and the binding's.
const COUNT: usize = cv_client::ErrorKind::ALL.len() + 3;

impl ErrorKind {
    /// Every kind, in code order (codes are dense from 1; checked when this compiles).
    pub const ALL: [ErrorKind; COUNT] = in_code_order();

    /// The status code (never 0).
    pub const fn code(self) -> i32 {
        match self {
            ErrorKind::Client(k) => k.code(),
            ErrorKind::BadHandle => 16,
            ErrorKind::Eof => 17,
            ErrorKind::Internal => 18,
        }
    }

    /// The kind of a status code, if it is one.
    pub fn from_code(code: i32) -> Option<ErrorKind> {
        let i = usize::try_from(code).ok()?.checked_sub(1)?;
        ErrorKind::ALL.get(i).copied()
    }

    /// The variant's name, e.g. `NotFound`.
    const fn name(self) -> &'static str {
        match self {
            ErrorKind::Client(k) => k.name(),
            ErrorKind::BadHandle => "BadHandle",
            ErrorKind::Eof => "Eof",
            ErrorKind::Internal => "Internal",
        }
    }

    /// The macro name in cv.h, e.g. `CV_ERR_NOT_FOUND`.
    pub fn c_name(self) -> &'static str {
        c_names()[self.index()].to_str().unwrap_or("CV_ERR_OTHER")
    }

    /// [`ErrorKind::c_name`] as a C string, for `cv_status_name`.
    pub fn c_name_cstr(self) -> &'static CStr {
        &c_names()[self.index()]
    }

    /// The constant name of `io.cv.CvErrorKind`, e.g. `NOT_FOUND`.
    pub fn java_name(self) -> &'static str {
        &self.c_name()["CV_ERR_".len()..]
    }

    fn index(self) -> usize {
        self.code() as usize - 1
    }
}

impl From<cv_client::ErrorKind> for ErrorKind {
    fn from(k: cv_client::ErrorKind) -> Self {
        ErrorKind::Client(k)
    }
}

/// Each kind at the index of its code, once; a gap or a clash fails the build.
const fn in_code_order() -> [ErrorKind; COUNT] {
    let mut out = [ErrorKind::Internal; COUNT];
    let mut seen = [false; COUNT];
    let own = [ErrorKind::BadHandle, ErrorKind::Eof, ErrorKind::Internal];
    let mut i = 0;
    while i < COUNT {
        let k = if i < own.len() { own[i] } else { ErrorKind::Client(cv_client::ErrorKind::ALL[i - own.len()]) };
        let at = k.code() as usize - 1;
        assert!(at < COUNT && !seen[at], "error codes must be dense from 1 and unique");
        seen[at] = true;
        out[at] = k;
        i += 1;
    }
    out
}

/// `CV_ERR_` and the kind's name in upper snake case (`NotADirectory` → `CV_ERR_NOT_A_DIRECTORY`),
/// indexed as [`ErrorKind::ALL`].
fn c_names() -> &'static [CString] {
    static NAMES: OnceLock<Vec<CString>> = OnceLock::new();
    NAMES.get_or_init(|| {
        let spell = |k: ErrorKind| {
            let mut s = String::from("CV_ERR");
            for ch in k.name().chars() {
                if ch.is_ascii_uppercase() {
                    s.push('_');
                }
                s.push(ch.to_ascii_uppercase());
            }
            CString::new(s).expect("names have no NUL")
        };
        ErrorKind::ALL.iter().map(|&k| spell(k)).collect()
    })
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
    pub fn new(kind: impl Into<ErrorKind>, message: impl Into<String>) -> Self {
        Error { kind: kind.into(), retryable: false, message: message.into() }
    }

    /// A bad argument.
    pub fn invalid(message: impl Into<String>) -> Self {
        Error::new(cv_client::ErrorKind::InvalidArgument, message)
    }

    /// A problem with the configuration file or the identity it names.
    pub fn config(message: impl Into<String>) -> Self {
        Error::new(cv_client::ErrorKind::Config, message)
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
        Error { kind: e.kind().into(), retryable: e.retryable(), message: e.to_string() }
    }
}

impl From<ConfigError> for Error {
    fn from(e: ConfigError) -> Self {
        Error::config(e.to_string())
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
        assert_eq!(ErrorKind::from_code(-1), None);
        assert_eq!(ErrorKind::from_code(99), None);
        assert_eq!(ErrorKind::from(cv_client::ErrorKind::NotFound).java_name(), "NOT_FOUND");
        assert_eq!(ErrorKind::from(cv_client::ErrorKind::NotADirectory).c_name(), "CV_ERR_NOT_A_DIRECTORY");
        assert_eq!(ErrorKind::BadHandle.c_name_cstr(), c"CV_ERR_BAD_HANDLE");
        assert_eq!(ErrorKind::Eof.c_name(), "CV_ERR_EOF");
    }

    #[test]
    fn client_errors_keep_kind_and_retry_status() {
        let e = Error::from(cv_client::Error::new(cv_client::ErrorKind::Unavailable, "down"));
        assert_eq!(e.kind(), ErrorKind::Client(cv_client::ErrorKind::Unavailable));
        assert!(e.retryable());
        let e = Error::from(cv_client::Error::new(cv_client::ErrorKind::NotFound, "/x"));
        assert_eq!(e.kind(), ErrorKind::Client(cv_client::ErrorKind::NotFound));
        assert!(!e.retryable());
        assert!(e.message().contains("/x"));
    }

    #[test]
    fn config_errors_are_config_and_name_the_field() {
        let e = Error::from(ConfigError::new("client.prefetch_depth", "must be between 1 and 64"));
        assert_eq!(e.kind(), ErrorKind::Client(cv_client::ErrorKind::Config));
        assert!(!e.retryable());
        assert!(e.message().contains("client.prefetch_depth"), "{e}");
        let e = crate::ops::client_from_toml("no toml [").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Client(cv_client::ErrorKind::Config), "{e}");
        let e = crate::ops::client_from_file("/nonexistent/cv.toml").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Client(cv_client::ErrorKind::Config), "{e}");
    }

    #[test]
    fn record_survives_interior_nul() {
        let code = record(&Error::invalid("a\0b"));
        assert_eq!(code, cv_client::ErrorKind::InvalidArgument.code());
        LAST_ERROR.with(|l| {
            let l = l.borrow();
            assert_eq!(l.code, code);
            assert_eq!(l.message.to_str().unwrap(), "CV_ERR_INVALID_ARGUMENT: a?b");
        });
    }
}
