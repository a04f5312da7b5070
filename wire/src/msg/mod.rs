//! The message catalogue. Each message is a plain struct; [`crate::Kind`]
//! assigns it a frame kind. Replies that carry bytes (an open reply's tail, a
//! block read) put them in the frame's raw payload, not in the body.

mod admin;
mod block;
mod conn;
mod local;
mod mount;
mod namespace;
mod raft;
mod registry;
mod revoke;

pub use admin::*;
pub use block::*;
pub use conn::*;
pub use local::*;
pub use mount::*;
pub use namespace::*;
pub use raft::*;
pub use registry::*;
pub use revoke::*;

use crate::error::{WireError, WireErrorKind};
use crate::limits::Limits;
use rkyv::{Archive, Deserialize, Serialize};

/// What the peer on the other end of a connection is.
#[derive(Archive, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[rkyv(derive(Debug, PartialEq, Eq, Clone, Copy))]
pub enum Role {
    /// An application through the SDK, the C ABI or FUSE.
    Client,
    /// The metadata service.
    Master,
    /// A storage worker (registering, or one shard).
    Worker,
    /// An operator tool (`cvctl`) allowed administrative calls.
    Admin,
}

/// A directory or a file.
#[derive(Archive, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug, PartialEq, Eq, Clone, Copy))]
pub enum FileKind {
    /// A regular file made of blocks.
    File,
    /// A directory.
    Dir,
}

/// Metadata of one namespace entry.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct FileStatus {
    /// Inode id, stable across renames.
    pub id: u64,
    /// Absolute normalized path.
    pub path: String,
    /// File or directory.
    pub kind: FileKind,
    /// Length in bytes (0 for directories).
    pub length: u64,
    /// Last modification, milliseconds since the Unix epoch.
    pub mtime_ms: u64,
    /// Changes whenever the content changes; part of every cache key.
    pub version: u64,
    /// POSIX permission bits.
    pub mode: u32,
    /// False while a file is being written.
    pub complete: bool,
    /// Block size the file was written with (0 for directories).
    pub block_size: u64,
}

/// Where one block of a file lives.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct BlockLoc {
    /// Cluster-unique block id.
    pub block_id: u64,
    /// Offset of the block's first byte in the file.
    pub offset: u64,
    /// Length of the block in bytes.
    pub len: u64,
    /// Owning worker.
    pub worker_id: u64,
    /// Owning shard on that worker.
    pub shard: u16,
    /// The owning shard's QUIC endpoint.
    pub addr: ShardAddr,
    /// The block's only copy is on a worker the master has lost: reading it is a data loss
    /// (`DataLoss`, naming the file), not a wait on a dead address. A block the object store
    /// also holds is never lost: its location is then the next live owner's. With replicas
    /// (protocol 7): no copy is on a live worker.
    pub lost: bool,
    /// The other live copies of a block whose only copy would otherwise be in cv (protocol 7):
    /// a writer stores the block on each of them as well as on the owner before it
    /// acknowledges, and a reader tries them in order when the owner cannot serve.
    pub replicas: Vec<Replica>,
    /// What the caller may do with the block, signed by the master (since v9): read it (an
    /// open's), or write it (an `AddBlock` reply's). Good on every copy.
    pub cap: BlockCap,
}

/// One more copy of a block: a shard of the same index (a block id names its shard) on
/// another worker.
#[derive(Archive, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct Replica {
    /// The worker holding the copy.
    pub worker_id: u64,
    /// Its shard's QUIC endpoint.
    pub addr: ShardAddr,
}

/// A shard's QUIC endpoint, typed: readers dial it as it is, with nothing to parse or resolve
/// per block. The IP is 16 bytes (an IPv4 address travels IPv4-mapped).
#[derive(Archive, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[rkyv(derive(Debug))]
pub struct ShardAddr {
    /// IPv6 address, or IPv4-mapped IPv6 (`::ffff:a.b.c.d`).
    pub ip: [u8; 16],
    /// UDP port.
    pub port: u16,
}

impl ShardAddr {
    /// The endpoint at `addr`.
    pub fn new(addr: std::net::SocketAddr) -> ShardAddr {
        let ip = match addr.ip() {
            std::net::IpAddr::V4(v4) => v4.to_ipv6_mapped(),
            std::net::IpAddr::V6(v6) => v6,
        };
        ShardAddr { ip: ip.octets(), port: addr.port() }
    }

    /// The socket address to dial (IPv4-mapped addresses as IPv4).
    pub fn socket_addr(&self) -> std::net::SocketAddr {
        let ip = std::net::Ipv6Addr::from(self.ip).to_canonical();
        std::net::SocketAddr::new(ip, self.port)
    }
}

impl std::fmt::Display for ShardAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.socket_addr().fmt(f)
    }
}

/// One `key=value` option (mount options).
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct KeyValue {
    /// Option name.
    pub key: String,
    /// Option value.
    pub value: String,
}

pub(crate) fn check_path(p: &rkyv::string::ArchivedString, l: &Limits, field: &str) -> Result<(), WireError> {
    if p.len() > l.max_path as usize {
        return Err(limit(field, p.len(), l.max_path));
    }
    Ok(())
}

pub(crate) fn check_str(s: &rkyv::string::ArchivedString, l: &Limits, field: &str) -> Result<(), WireError> {
    if s.len() > l.max_string as usize {
        return Err(limit(field, s.len(), l.max_string));
    }
    Ok(())
}

pub(crate) fn check_count(n: usize, l: &Limits, field: &str) -> Result<(), WireError> {
    if n > l.max_list as usize {
        return Err(limit(field, n, l.max_list));
    }
    Ok(())
}

fn limit(field: &str, got: usize, max: u32) -> WireError {
    WireError::new(WireErrorKind::LimitExceeded, format!("{field}: {got} > limit {max}"))
}

impl ArchivedFileStatus {
    pub(crate) fn check(&self, l: &Limits) -> Result<(), WireError> {
        check_path(&self.path, l, "status.path")
    }
}

impl ArchivedBlockLoc {
    pub(crate) fn check(&self, l: &Limits) -> Result<(), WireError> {
        check_count(self.replicas.len(), l, "block.replicas")
    }
}

impl ArchivedKeyValue {
    pub(crate) fn check(&self, l: &Limits) -> Result<(), WireError> {
        check_str(&self.key, l, "option.key")?;
        check_str(&self.value, l, "option.value")
    }
}

/// Implements `CheckLimits` for archived messages with nothing to bound
/// beyond the frame size.
macro_rules! no_limits {
    ($($ty:ty),*) => {
        $(impl $crate::kinds::CheckLimits for $ty {
            fn check_limits(&self, _: &$crate::Limits) -> Result<(), $crate::WireError> { Ok(()) }
        })*
    };
}
pub(crate) use no_limits;
