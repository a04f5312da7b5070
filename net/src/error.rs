//! The error type of cv-net: a kind, whether a retry can help, and context.

use cv_wire::{ErrorCode, WireError};
use std::fmt;

/// What went wrong, coarsely, for callers that branch on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NetErrorKind {
    /// Certificates or keys missing, unreadable or invalid.
    Tls,
    /// A configuration value is invalid.
    Config,
    /// The connection could not be made or was lost.
    Connect,
    /// The deadline passed.
    Timeout,
    /// The peer sent bytes that are not a valid frame.
    Protocol,
    /// The peer answered with an error code (see [`NetError::code`]).
    Remote,
    /// A local socket or file operation failed.
    Io,
}

/// An error from the transport layer.
#[derive(Debug)]
pub struct NetError {
    kind: NetErrorKind,
    retryable: bool,
    code: Option<ErrorCode>,
    message: String,
    redirect: Option<String>,
    source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

impl NetError {
    /// A new error of `kind` with context.
    pub fn new(kind: NetErrorKind, message: impl Into<String>) -> Self {
        let retryable = matches!(kind, NetErrorKind::Connect | NetErrorKind::Timeout);
        NetError { kind, retryable, code: None, message: message.into(), redirect: None, source: None }
    }

    /// An error answered by the peer.
    pub fn remote(code: ErrorCode, message: impl Into<String>, redirect: Option<String>) -> Self {
        NetError {
            kind: NetErrorKind::Remote,
            retryable: code.retryable(),
            code: Some(code),
            message: message.into(),
            redirect,
            source: None,
        }
    }

    /// Attaches the underlying cause.
    pub fn with_source(mut self, source: impl std::error::Error + Send + Sync + 'static) -> Self {
        self.source = Some(Box::new(source));
        self
    }

    /// The same error with `message` as its context (the cause stays).
    pub fn with_message(mut self, message: impl Into<String>) -> Self {
        self.message = message.into();
        self
    }

    /// Overrides whether a retry can help (a failure of a kind that usually can, here cannot).
    pub fn set_retryable(&mut self, retryable: bool) {
        self.retryable = retryable;
    }

    /// The kind.
    pub fn kind(&self) -> NetErrorKind {
        self.kind
    }

    /// Whether sending the same request again may succeed.
    pub fn retryable(&self) -> bool {
        self.retryable
    }

    /// The peer's error code for [`NetErrorKind::Remote`]; for
    /// [`NetErrorKind::Protocol`], the code to answer the peer with.
    pub fn code(&self) -> Option<ErrorCode> {
        self.code
    }

    /// For `WrongShard`: where the block lives.
    pub fn redirect(&self) -> Option<&str> {
        self.redirect.as_deref()
    }

    /// Context for humans.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for NetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.code {
            Some(code) => write!(
                f,
                "{} ({}): {}",
                code.name(),
                if self.retryable { "retryable" } else { "permanent" },
                self.message
            )?,
            None => write!(f, "{:?}: {}", self.kind, self.message)?,
        }
        if let Some(s) = &self.source {
            write!(f, ": {s}")?;
        }
        Ok(())
    }
}

impl std::error::Error for NetError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source.as_deref().map(|e| e as &(dyn std::error::Error + 'static))
    }
}

impl From<WireError> for NetError {
    fn from(e: WireError) -> Self {
        let mut err = NetError::new(NetErrorKind::Protocol, e.to_string());
        err.code = Some(e.code());
        err.with_source(e)
    }
}
