//! Short-circuit reads: a client on a worker's host reads that worker's committed blocks
//! straight from its data files. Over QUIC (mutual TLS) the client learns how to reach the
//! worker locally ([`LocalHello`]) and leases one block at a time ([`LeaseBlock`]); over the
//! worker's Unix socket it trades the token for descriptors of a shard's data files
//! ([`LocalOpen`], the descriptors passed with `SCM_RIGHTS`).

use super::{check_count, check_str};
use crate::error::WireError;
use crate::kinds::CheckLimits;
use crate::limits::Limits;
use rkyv::{Archive, Deserialize, Serialize};

/// Bytes of the token a worker hands out in [`LocalHelloOk`].
pub const LOCAL_TOKEN_LEN: usize = 32;
/// Most data directories one shard may pass in one [`LocalOpenOk`].
pub const MAX_LOCAL_DIRS: usize = 64;

/// Asks a shard whether, and how, this client may read its blocks from its files.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct LocalHello {}

/// Reply to [`LocalHello`] from a worker that serves short-circuit reads.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct LocalHelloOk {
    /// The worker's host's `/proc/sys/kernel/random/boot_id`: a client whose own differs is
    /// on another host (or in another boot) and must not use the socket.
    pub boot_id: String,
    /// Path of the worker's Unix socket.
    pub socket: String,
    /// What [`LocalOpen`] must present: proof that the process on the socket was sent here
    /// by this authenticated connection.
    pub token: Vec<u8>,
    /// The shard answering (its index on the worker).
    pub shard: u16,
}

/// Lease block `block_id` for reading from the shard's data file.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct LeaseBlock {
    /// Block id; must belong to the shard the request is sent to.
    pub block_id: u64,
    /// The master's read capability for the block, as for `ReadBlock` (since v9).
    pub cap: super::BlockCap,
}

/// Reply to [`LeaseBlock`]: where the block's bytes are, and their chunk checksums. Until
/// `lease_ms` after the request was sent, the extent holds this block and no other: the
/// worker does not reuse it before then, even if the block is evicted or deleted.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct LeaseBlockOk {
    /// Index of the data file (the order of [`LocalOpenOk`]'s descriptors).
    pub dir: u16,
    /// Offset of the block's first byte in that file (aligned for O_DIRECT).
    pub disk_offset: u64,
    /// Bytes of data.
    pub len: u64,
    /// Bytes per checksummed chunk.
    pub chunk_size: u32,
    /// crc32 of each chunk, in order.
    pub crcs: Vec<u32>,
    /// How long the lease lasts.
    pub lease_ms: u32,
}

/// Sent on the worker's Unix socket: the descriptors of shard `shard`'s data files, please.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct LocalOpen {
    /// The token of [`LocalHelloOk`].
    pub token: Vec<u8>,
    /// Shard index.
    pub shard: u16,
}

/// Reply to [`LocalOpen`]; the message carries one read-only O_DIRECT descriptor per data
/// file, in directory order, as `SCM_RIGHTS`.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct LocalOpenOk {
    /// Descriptors passed.
    pub dirs: u16,
}

/// Sent by the worker on the Unix socket, unasked: a block this connection's client may hold
/// a lease on is gone (evicted, deleted, rewritten). The client drops the connection with its
/// leases and descriptors, and asks again (`LocalHello`) before its next short-circuit read.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct LocalRevoke {
    /// The block that went.
    pub block_id: u64,
}

impl CheckLimits for ArchivedLocalHelloOk {
    fn check_limits(&self, l: &Limits) -> Result<(), WireError> {
        check_str(&self.boot_id, l, "local_hello_ok.boot_id")?;
        check_str(&self.socket, l, "local_hello_ok.socket")?;
        check_count(self.token.len(), l, "local_hello_ok.token")
    }
}

impl CheckLimits for ArchivedLeaseBlockOk {
    fn check_limits(&self, l: &Limits) -> Result<(), WireError> {
        check_count(self.crcs.len(), l, "lease_block_ok.crcs")
    }
}

impl CheckLimits for ArchivedLocalOpen {
    fn check_limits(&self, l: &Limits) -> Result<(), WireError> {
        check_count(self.token.len(), l, "local_open.token")
    }
}

super::no_limits!(ArchivedLocalHello, ArchivedLeaseBlock, ArchivedLocalOpenOk, ArchivedLocalRevoke);
