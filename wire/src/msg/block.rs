//! Block requests to a worker shard. Block bytes travel in the frame payload.

use super::check_count;
use crate::error::WireError;
use crate::kinds::CheckLimits;
use crate::limits::Limits;
use rkyv::{Archive, Deserialize, Serialize};

/// Read `len` bytes at `offset` of a block. The reply's payload holds them.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct ReadBlock {
    /// Block id; must belong to the shard the request is sent to.
    pub block_id: u64,
    /// Offset inside the block.
    pub offset: u64,
    /// Bytes wanted; the reply may be shorter at the block's end.
    pub len: u64,
    /// For a block of a file cached from object storage: where to fetch it
    /// if the shard does not hold it.
    pub source: Option<BlockSource>,
    /// Only make sure the block is cached (fetching it if needed); the reply
    /// carries no bytes. Used by `cvctl load`.
    pub fill_only: bool,
    /// Check every chunk against its stored crc32 on the worker before sending. Without it a
    /// chunk sent whole goes with its stored checksum unchecked and the reader's frame check
    /// is its verification; a reader whose check failed asks again with `verify` (since v4).
    pub verify: bool,
    /// The master's read capability for this block (from the open's [`crate::msg::BlockLoc`];
    /// since v9). A `source` must be the one it names. Ignored from workers and masters.
    pub cap: BlockCap,
}

/// A master's signature over what a caller may do with one block (since v9; docs/security.md,
/// "Block capabilities"): read it (opens) or write it once (`AddBlock`), until `expires_ms`,
/// and, for a block of a cached object, fill it from that object only. `tag` is HMAC-SHA-256,
/// truncated, under the key `key_id` that the master hands its workers, over the access, the
/// block id, `expires_ms`, `key_id` and `source` (`cv_net::capability`). All zero: none (what
/// workers and masters send each other, whose certificates are their right).
#[derive(Archive, Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct BlockCap {
    /// Which of the master's keys signed it.
    pub key_id: u32,
    /// Valid until then, milliseconds since the Unix epoch.
    pub expires_ms: u64,
    /// The first 16 bytes of SHA-256 over the block's source (object and range) for a block of
    /// a cached object; zeros for a block cv holds alone.
    pub source: [u8; 16],
    /// The truncated HMAC.
    pub tag: [u8; 16],
}

/// Where a block of a cached object comes from.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct BlockSource {
    /// The object (mount, key, version), as in the open reply.
    pub object: crate::msg::UfsRef,
    /// Offset of the block's first byte in the object.
    pub offset: u64,
    /// Length of the block.
    pub len: u64,
}

/// Reply to [`ReadBlock`]; the payload holds the bytes.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct ReadBlockOk {
    /// Total length of the block (so the reader knows where it ends).
    pub block_len: u64,
}

/// Store a whole block; the payload holds its bytes. Committed atomically.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct WriteBlock {
    /// Block id allocated by the master.
    pub block_id: u64,
    /// Keep the block until the master unpins it (fs mode, not yet exported).
    pub pinned: bool,
    /// The master's write capability for this block (the `AddBlock` reply's; since v9).
    pub cap: BlockCap,
}

/// Reply to [`WriteBlock`].
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct WriteBlockOk {
    /// Bytes stored.
    pub len: u64,
    /// crc32 of the stored bytes, for the writer to compare.
    pub crc32: u32,
}

/// Drop blocks (answered by `Done`).
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct DeleteBlocks {
    /// Blocks to drop; unknown ids are ignored.
    pub block_ids: Vec<u64>,
}

/// Ask about one block.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct StatBlock {
    /// Block id.
    pub block_id: u64,
}

/// Reply to [`StatBlock`].
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct StatBlockOk {
    /// Bytes stored.
    pub len: u64,
    /// Whether eviction may drop it.
    pub pinned: bool,
    /// Whether some of it is in the memory tier.
    pub in_memory: bool,
}

impl CheckLimits for ArchivedDeleteBlocks {
    fn check_limits(&self, l: &Limits) -> Result<(), WireError> {
        check_count(self.block_ids.len(), l, "delete_blocks.block_ids")
    }
}

impl CheckLimits for ArchivedReadBlock {
    fn check_limits(&self, l: &Limits) -> Result<(), WireError> {
        self.source.as_ref().map_or(Ok(()), |s| s.object.check(l))
    }
}

super::no_limits!(
    ArchivedReadBlockOk,
    ArchivedWriteBlock,
    ArchivedWriteBlockOk,
    ArchivedStatBlock,
    ArchivedStatBlockOk
);
