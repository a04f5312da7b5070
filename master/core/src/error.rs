//! The master's typed error: a kind (what the caller can branch on) plus context.

use std::fmt;

/// What went wrong, in terms a client can act on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    NotFound,
    AlreadyExists,
    NotADirectory,
    IsADirectory,
    NotEmpty,
    InvalidPath,
    InvalidArgument,
    /// No live worker shard can take a block.
    NoWorkers,
    /// A request cv does not carry out, such as a rename across a mount boundary.
    Unsupported,
    /// What a multi-step request prepared changed under it (a listing recorded a new object
    /// during a rename); the request may be made again.
    Changed,
    /// A conditional completion found another version at its path than it expected.
    ConditionFailed,
    /// The file is complete (or was replaced) and can no longer take blocks.
    FileNotWritable,
    /// The file is still being written and cannot be opened.
    FileIncomplete,
    /// A worker id the master does not know.
    UnknownWorker,
    /// Journal or snapshot bytes are not in a format this build reads.
    CorruptData,
    /// Journal or snapshot written by a format version this build does not read.
    UnsupportedVersion,
    /// Disk I/O failed while making state durable.
    Io,
    /// Under Raft: this master does not lead (or has not yet applied what was committed before
    /// its term); the leader, if one is known, answers.
    NotLeader,
    /// An earlier journal failure left the master unable to promise durability; restart it.
    Poisoned,
    /// The journal's disk is full: the write was not made durable (for sure) and nothing of it
    /// stays. Reads are still served; writes are taken again once there is room.
    NoSpace,
}

impl ErrorKind {
    /// Whether the same request may succeed if retried later without change.
    pub fn retryable(self) -> bool {
        matches!(self, ErrorKind::NoWorkers | ErrorKind::Io | ErrorKind::Changed | ErrorKind::NotLeader)
    }
}

/// A master error: a kind and a human-readable context (the path, the id, the cause).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    kind: ErrorKind,
    context: String,
}

impl Error {
    pub fn new(kind: ErrorKind, context: impl Into<String>) -> Self {
        Self { kind, context: context.into() }
    }

    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    pub fn context(&self) -> &str {
        &self.context
    }

    pub fn retryable(&self) -> bool {
        self.kind.retryable()
    }

    pub(crate) fn io(op: &str, e: &std::io::Error) -> Self {
        Self::new(ErrorKind::Io, format!("{op}: {e}"))
    }

    /// Whether an I/O error means the disk (or the quota) is full: nothing else about the
    /// device is wrong, and freeing space lets writes go on.
    pub(crate) fn is_no_space(e: &std::io::Error) -> bool {
        matches!(e.kind(), std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded)
    }

    pub(crate) fn corrupt(context: impl Into<String>) -> Self {
        Self::new(ErrorKind::CorruptData, context)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}: {}", self.kind, self.context)
    }
}

impl std::error::Error for Error {}

impl From<crate::path::PathError> for Error {
    fn from(e: crate::path::PathError) -> Self {
        Self::new(ErrorKind::InvalidPath, e.to_string())
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
