//! Read-only answers built from the state: stat, listings, the block map of an open file.

use std::net::SocketAddr;
use std::sync::Arc;

use super::types::{BlockId, FileState, InodeId, WorkerId};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    Dir,
    File,
}

/// What the state knows of one entry (cv-wire's `FileStatus` is made from it; its `Stat` is
/// the request).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryStat {
    pub id: InodeId,
    pub kind: EntryKind,
    /// Bytes for a file, number of entries for a directory.
    pub length: u64,
    pub mtime: u64,
    pub version: u64,
    pub mode: u32,
    /// `None` for directories.
    pub state: Option<FileState>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    pub name: String,
    pub stat: EntryStat,
}

/// One page of a directory listing, sorted by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListPage {
    pub entries: Vec<DirEntry>,
    /// More entries follow the last one returned.
    pub more: bool,
}

/// Where one block of a file lives, as the state knows it (cv-wire's `BlockLoc`, what a client
/// gets, is made from it once the shard's address is known).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlacedBlock {
    pub block_id: BlockId,
    pub offset_in_file: u64,
    pub len: u64,
    pub worker_id: WorkerId,
    pub shard: u16,
    /// The owning shard's endpoint; `None` if its worker's registered host is not an IP
    /// address (only a journal written before registration resolved hosts).
    pub addr: Option<SocketAddr>,
    /// False when the owner is lost: the client reads around it (e.g. from object storage).
    pub worker_live: bool,
    /// No live worker holds a copy and the object store does not hold the block.
    pub lost: bool,
    /// The other live copies (worker, its shard's endpoint), after the one above.
    pub replicas: Vec<(WorkerId, Option<SocketAddr>)>,
}

/// The file's trailing bytes as `open` returns them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tail {
    /// `bytes` are the file's bytes from `offset` to its end.
    Cached { offset: u64, bytes: Arc<[u8]> },
    /// Not cached (evicted, or lost in a restart): read the footer from the workers.
    Evicted,
}

/// The one-round-trip answer to `open`: a complete file, its blocks and its tail (which the
/// core fills from the tail cache; the state holds none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenFile {
    pub file_id: InodeId,
    pub length: u64,
    pub version: u64,
    pub mtime: u64,
    pub blocks: Vec<PlacedBlock>,
    pub tail: Tail,
    /// The object the file is a copy of (cache mode).
    pub ufs: Option<super::UfsObject>,
}
