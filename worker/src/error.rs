//! Typed errors of the worker server (startup, shards, shutdown).

use std::fmt;

/// What went wrong, coarse enough to decide what to do next.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum WorkerErrorKind {
    /// A setting is invalid (the message names the field).
    Config,
    /// Certificates or TLS configuration could not be used.
    Tls,
    /// A shard's executor thread could not be created or pinned.
    Executor,
    /// A shard's block store failed to open or close.
    Store,
    /// A shard's QUIC endpoint could not bind its port.
    Bind,
    /// A shard thread ended unexpectedly (it panicked or exited early).
    ShardGone,
    /// The short-circuit socket could not be served (its files or socket).
    Local,
}

impl WorkerErrorKind {
    /// Stable lower-case name, for logs.
    pub fn as_str(self) -> &'static str {
        match self {
            WorkerErrorKind::Config => "config",
            WorkerErrorKind::Tls => "tls",
            WorkerErrorKind::Executor => "executor",
            WorkerErrorKind::Store => "store",
            WorkerErrorKind::Bind => "bind",
            WorkerErrorKind::ShardGone => "shard_gone",
            WorkerErrorKind::Local => "local",
        }
    }
}

/// An error of the worker server: a kind, context, and the underlying cause if any.
#[derive(Debug)]
pub struct WorkerError {
    kind: WorkerErrorKind,
    message: String,
    source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

/// Result alias of the worker server.
pub type Result<T> = std::result::Result<T, WorkerError>;

impl WorkerError {
    /// A new error of `kind` with a context message.
    pub fn new(kind: WorkerErrorKind, message: impl Into<String>) -> Self {
        Self { kind, message: message.into(), source: None }
    }

    /// Attaches the underlying cause.
    pub fn with_source(mut self, source: impl std::error::Error + Send + Sync + 'static) -> Self {
        self.source = Some(Box::new(source));
        self
    }

    /// What went wrong.
    pub fn kind(&self) -> WorkerErrorKind {
        self.kind
    }

    /// The context message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Whether starting again unchanged may succeed: a port still held by a previous
    /// process, or a store busy with I/O, may clear; bad settings or certificates do not.
    pub fn retryable(&self) -> bool {
        matches!(self.kind, WorkerErrorKind::Bind | WorkerErrorKind::ShardGone)
    }
}

impl fmt::Display for WorkerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "worker {}: {}", self.kind.as_str(), self.message)?;
        if let Some(s) = &self.source {
            write!(f, ": {s}")?;
        }
        Ok(())
    }
}

impl std::error::Error for WorkerError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source.as_deref().map(|e| e as &(dyn std::error::Error + 'static))
    }
}

impl From<cv_net::config::ConfigError> for WorkerError {
    fn from(e: cv_net::config::ConfigError) -> Self {
        WorkerError::new(WorkerErrorKind::Config, e.to_string())
    }
}

impl From<cv_net::NetError> for WorkerError {
    fn from(e: cv_net::NetError) -> Self {
        WorkerError::new(WorkerErrorKind::Tls, "transport configuration").with_source(e)
    }
}
