//! Typed errors of the block store.

use std::fmt;

use super::damage::IndexDamage;

/// What went wrong, coarse enough for a caller to decide what to do next.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The block is not in this store (never written, deleted, evicted or dropped).
    NotFound,
    /// A checksum did not match: the block was dropped; fetch it again.
    Corrupt,
    /// No space left after evicting everything evictable.
    NoSpace,
    /// The request itself is wrong (range past the end, bad config, too long a block).
    InvalidArgument,
    /// Another writer holds this block id right now.
    Busy,
    /// The block id is committed with other bytes: a block id names one content for ever,
    /// and a committed block is never overwritten.
    Committed,
    /// The operating system failed an I/O call.
    Io,
    /// An on-disk structure has an unknown version or belongs to another store.
    Incompatible,
    /// The block index is damaged where no crash can have left it (details in
    /// [`StoreError::index_damage`]): the store does not open until an operator acts.
    Damaged,
}

impl ErrorKind {
    /// Stable lower-case name, for logs and wire codes.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::NotFound => "not_found",
            ErrorKind::Corrupt => "corrupt",
            ErrorKind::NoSpace => "no_space",
            ErrorKind::InvalidArgument => "invalid_argument",
            ErrorKind::Busy => "busy",
            ErrorKind::Committed => "committed",
            ErrorKind::Io => "io",
            ErrorKind::Incompatible => "incompatible",
            ErrorKind::Damaged => "damaged",
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An error of the block store: a kind, a message with context, and the OS error if any.
#[derive(Debug)]
pub struct StoreError {
    kind: ErrorKind,
    message: String,
    source: Option<std::io::Error>,
    damage: Option<Box<IndexDamage>>,
}

/// Result alias of the block store.
pub type Result<T> = std::result::Result<T, StoreError>;

impl StoreError {
    /// A new error of `kind` with a context message.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self { kind, message: message.into(), source: None, damage: None }
    }

    /// A damaged block index ([`ErrorKind::Damaged`]); the message is the damage's description.
    pub fn damaged(damage: IndexDamage) -> Self {
        Self { kind: ErrorKind::Damaged, message: damage.to_string(), source: None, damage: Some(Box::new(damage)) }
    }

    /// An I/O error with context; `ENOSPC` becomes [`ErrorKind::NoSpace`].
    pub fn io(context: impl Into<String>, err: std::io::Error) -> Self {
        let kind = if err.kind() == std::io::ErrorKind::StorageFull { ErrorKind::NoSpace } else { ErrorKind::Io };
        Self { kind, message: context.into(), source: Some(err), damage: None }
    }

    /// What went wrong.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The context message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Which record of which index log is damaged, for [`ErrorKind::Damaged`].
    pub fn index_damage(&self) -> Option<&IndexDamage> {
        self.damage.as_deref()
    }

    /// The same error, naming the file it was found in (decoding sees bytes, not paths).
    pub(crate) fn in_file(self, file: &std::path::Path) -> Self {
        match self.damage {
            Some(d) => Self::damaged(d.in_file(file)),
            None => Self { message: format!("{}: {}", file.display(), self.message), ..self },
        }
    }

    /// Whether the same call may succeed if tried again later unchanged.
    ///
    /// `Corrupt` is retryable: the block was dropped, so a refetch and rewrite succeeds.
    /// `Damaged` is not: the index stays as it is until an operator acts.
    pub fn retryable(&self) -> bool {
        matches!(self.kind, ErrorKind::Busy | ErrorKind::Io | ErrorKind::Corrupt | ErrorKind::NoSpace)
    }
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind, self.message)?;
        if let Some(src) = &self.source {
            write!(f, ": {src}")?;
        }
        Ok(())
    }
}

impl std::error::Error for StoreError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source.as_ref().map(|e| e as &(dyn std::error::Error + 'static))
    }
}
