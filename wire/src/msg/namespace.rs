//! Namespace requests to the master and their replies.

use super::{BlockLoc, FileStatus, check_count, check_path, check_str};
use crate::error::WireError;
use crate::kinds::CheckLimits;
use crate::limits::Limits;
use rkyv::{Archive, Deserialize, Serialize};

/// Open a file: one round trip returns everything needed to read it.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct Open {
    /// Absolute path.
    pub path: String,
}

/// Reply to [`Open`]. The frame's payload holds the tail bytes, which start
/// at `tail_offset` in the file; an empty payload with `tail_cached == false`
/// means the tail was evicted and the client reads it from the workers.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct OpenOk {
    /// The file's metadata (id, length, version...).
    pub status: FileStatus,
    /// Every block, in file order.
    pub blocks: Vec<BlockLoc>,
    /// Whether the payload holds the tail.
    pub tail_cached: bool,
    /// File offset of the payload's first byte.
    pub tail_offset: u64,
    /// For a file cached from object storage: where its bytes come from.
    /// Readers pass it with every block read so a shard that lacks the
    /// block can fetch it.
    pub ufs: Option<UfsRef>,
}

/// The object behind a file cached from object storage.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct UfsRef {
    /// The mount point the object is under.
    pub mount: String,
    /// Object key relative to the mount's URL.
    pub key: String,
    /// Object version (ETag, or mtime and length) the file was opened at.
    pub version: String,
}

/// Metadata of one path.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct Stat {
    /// Absolute path.
    pub path: String,
}

/// Reply to [`Stat`]: one entry's metadata.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct StatOk {
    /// The entry.
    pub status: FileStatus,
}

/// One page of a directory, sorted by name.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct List {
    /// Directory to list.
    pub path: String,
    /// Return names strictly after this one (the previous page's last name).
    pub start_after: Option<String>,
    /// Most entries to return; the server may return fewer.
    pub limit: u32,
}

/// Reply to [`List`].
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct ListOk {
    /// Entries in name order.
    pub entries: Vec<FileStatus>,
    /// Whether more entries follow the last one.
    pub more: bool,
}

/// Create a directory.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct Mkdir {
    /// Absolute path.
    pub path: String,
    /// Create missing parents, and succeed if it already exists as a directory.
    pub parents: bool,
    /// POSIX permission bits.
    pub mode: u32,
}

/// Create a file for writing.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct Create {
    /// Absolute path.
    pub path: String,
    /// Replace an existing file.
    pub overwrite: bool,
    /// POSIX permission bits.
    pub mode: u32,
    /// Block size wanted; 0 takes the cluster default.
    pub block_size: u64,
}

/// Reply to [`Create`].
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct CreateOk {
    /// The new file's inode id, used by add-block and complete.
    pub file_id: u64,
    /// Block size in force for the file.
    pub block_size: u64,
    /// Write blocks pinned (never evicted): they are the only copy of the file, outside
    /// mounts for good and under a mount until it is exported, which unpins them. Masters
    /// of protocol version 5 always set it.
    pub pin_blocks: bool,
}

/// Allocate the next block of a file being written.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct AddBlock {
    /// File being written.
    pub file_id: u64,
    /// Index of the block in the file (0-based); makes retries idempotent.
    pub index: u32,
    /// Workers the writer could not store this block on (protocol 7): a block at `index` with
    /// a copy on one of them is replaced by a new block placed elsewhere.
    pub exclude: Vec<u64>,
}

/// Reply to [`AddBlock`]: where to write the block.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct AddBlockOk {
    /// The allocated block and its owning shard.
    pub block: BlockLoc,
}

/// Length of one written block, reported at completion.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct BlockLen {
    /// Block id.
    pub block_id: u64,
    /// Bytes written to it.
    pub len: u64,
}

/// Finish a file (answered by `Done`). The frame's payload holds the file's
/// tail, starting at `tail_offset`; the master keeps it hot for opens.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct Complete {
    /// File being written.
    pub file_id: u64,
    /// Final length.
    pub length: u64,
    /// Every block with its written length, in file order.
    pub blocks: Vec<BlockLen>,
    /// File offset of the payload's first byte.
    pub tail_offset: u64,
}

/// Complete a file only if its path holds what the writer expects then (answered by `Done`;
/// kind 31, added within protocol 8). The check and the publish are one journaled step, so of
/// two writers with the same expectation exactly one wins. A master that predates the kind
/// answers `Malformed`. A failed expectation is `AlreadyExists` ([`Expect::Absent`]) or
/// `StaleVersion` ([`Expect::Version`]); the file stays unpublished and its writer abandons it.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct CompleteIf {
    /// The completion, as [`Complete`]; the frame's payload is its tail.
    pub complete: Complete,
    /// What the path must hold at the moment the file is published.
    pub expect: Expect,
}

/// What a conditional completion expects at its path.
#[derive(Archive, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub enum Expect {
    /// Nothing but the file itself (S3's `If-None-Match: *`).
    Absent,
    /// This complete version of a file (S3's `If-Match` on cv's ETag).
    Version {
        /// The file's id.
        file_id: u64,
        /// Its version.
        version: u64,
    },
}

/// Give up a file being written (answered by `Done`; kind 30, added within protocol 8): it is
/// removed by id, so the version its path shows (a replaced file's previous one) is untouched.
/// A file already complete, or gone, is left as it is. A master that predates the kind answers
/// `Malformed`.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct Abandon {
    /// The file being written.
    pub file_id: u64,
}

/// Make `path` a new complete file holding the bytes of `sources`, in order, without copying
/// them: it lists their blocks (answered by `StatOk`, the new file's status; kind 41, added
/// within protocol 8). It replaces a file at `path` in one step. The sources stay as they are
/// (a block two files list stays while either does). Refused (`Unsupported`) for a source or a
/// target under a mount, whose blocks belong to a store; the caller then copies. A master that
/// predates the kind answers `Malformed`.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct Compose {
    /// Absolute path of the new file.
    pub path: String,
    /// Complete files, in the order their bytes are wanted.
    pub sources: Vec<String>,
}

/// Rename a file or directory atomically.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct Rename {
    /// Existing path.
    pub src: String,
    /// New path; its parent must exist and it must not.
    pub dst: String,
}

/// Delete a path.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct Delete {
    /// Absolute path.
    pub path: String,
    /// Delete a non-empty directory and everything under it.
    pub recursive: bool,
}

impl CheckLimits for ArchivedOpen {
    fn check_limits(&self, l: &Limits) -> Result<(), WireError> {
        check_path(&self.path, l, "open.path")
    }
}

impl CheckLimits for ArchivedOpenOk {
    fn check_limits(&self, l: &Limits) -> Result<(), WireError> {
        self.status.check(l)?;
        check_count(self.blocks.len(), l, "open_ok.blocks")?;
        self.blocks.iter().try_for_each(|b| b.check(l))?;
        self.ufs.as_ref().map_or(Ok(()), |u| u.check(l))
    }
}

impl ArchivedUfsRef {
    pub(crate) fn check(&self, l: &Limits) -> Result<(), WireError> {
        check_path(&self.mount, l, "ufs.mount")?;
        check_path(&self.key, l, "ufs.key")?;
        check_str(&self.version, l, "ufs.version")
    }
}

impl CheckLimits for ArchivedStat {
    fn check_limits(&self, l: &Limits) -> Result<(), WireError> {
        check_path(&self.path, l, "stat.path")
    }
}

impl CheckLimits for ArchivedStatOk {
    fn check_limits(&self, l: &Limits) -> Result<(), WireError> {
        self.status.check(l)
    }
}

impl CheckLimits for ArchivedList {
    fn check_limits(&self, l: &Limits) -> Result<(), WireError> {
        check_path(&self.path, l, "list.path")?;
        match self.start_after.as_ref() {
            Some(s) => check_path(s, l, "list.start_after"),
            None => Ok(()),
        }
    }
}

impl CheckLimits for ArchivedListOk {
    fn check_limits(&self, l: &Limits) -> Result<(), WireError> {
        check_count(self.entries.len(), l, "list_ok.entries")?;
        self.entries.iter().try_for_each(|e| e.check(l))
    }
}

impl CheckLimits for ArchivedMkdir {
    fn check_limits(&self, l: &Limits) -> Result<(), WireError> {
        check_path(&self.path, l, "mkdir.path")
    }
}

impl CheckLimits for ArchivedCreate {
    fn check_limits(&self, l: &Limits) -> Result<(), WireError> {
        check_path(&self.path, l, "create.path")
    }
}

impl CheckLimits for ArchivedAddBlockOk {
    fn check_limits(&self, l: &Limits) -> Result<(), WireError> {
        self.block.check(l)
    }
}

impl CheckLimits for ArchivedComplete {
    fn check_limits(&self, l: &Limits) -> Result<(), WireError> {
        check_count(self.blocks.len(), l, "complete.blocks")
    }
}

impl CheckLimits for ArchivedCompleteIf {
    fn check_limits(&self, l: &Limits) -> Result<(), WireError> {
        self.complete.check_limits(l)
    }
}

super::no_limits!(ArchivedAbandon);

impl CheckLimits for ArchivedCompose {
    fn check_limits(&self, l: &Limits) -> Result<(), WireError> {
        check_path(&self.path, l, "compose.path")?;
        check_count(self.sources.len(), l, "compose.sources")?;
        self.sources.iter().try_for_each(|p| check_path(p, l, "compose.sources"))
    }
}

impl CheckLimits for ArchivedRename {
    fn check_limits(&self, l: &Limits) -> Result<(), WireError> {
        check_path(&self.src, l, "rename.src")?;
        check_path(&self.dst, l, "rename.dst")
    }
}

impl CheckLimits for ArchivedDelete {
    fn check_limits(&self, l: &Limits) -> Result<(), WireError> {
        check_path(&self.path, l, "delete.path")
    }
}

impl CheckLimits for ArchivedAddBlock {
    fn check_limits(&self, l: &Limits) -> Result<(), WireError> {
        check_count(self.exclude.len(), l, "add_block.exclude")
    }
}

super::no_limits!(ArchivedCreateOk);
