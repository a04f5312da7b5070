//! The durable data of the master: everything a snapshot holds. Plain values, no behaviour.

use std::collections::{BTreeMap, BTreeSet};

pub type InodeId = u64;
pub type BlockId = u64;
pub type WorkerId = u64;

/// The root directory's inode id.
pub const ROOT_ID: InodeId = 1;

#[derive(Debug, Clone, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub struct Inode {
    pub id: InodeId,
    pub parent: InodeId,
    pub name: String,
    pub mtime: u64,
    pub mode: u32,
    pub body: InodeBody,
}

#[derive(Debug, Clone, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub enum InodeBody {
    Dir { children: BTreeMap<String, InodeId> },
    File(FileBody),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub enum FileState {
    /// Created; blocks may be added; not visible to `open`.
    Writing,
    /// Length and block lengths fixed; readable.
    Complete,
}

#[derive(Debug, Clone, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub struct FileBody {
    pub length: u64,
    pub version: u64,
    pub state: FileState,
    pub blocks: Vec<BlockId>,
}

#[derive(Debug, Clone, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub struct BlockInfo {
    pub file: InodeId,
    pub index: u32,
    /// 0 until the file is completed.
    pub len: u64,
    pub worker: WorkerId,
    pub shard: u16,
    /// The owning worker reported holding it (block report delta "added").
    pub reported: bool,
    /// Other workers holding a copy, on a shard of the same index (format 4). A block whose
    /// file the object store does not hold gets `replicas` copies in all; `worker` is the
    /// first of them.
    pub replicas: Vec<WorkerId>,
}

impl BlockInfo {
    /// Every worker holding a copy: the owner first.
    pub fn copies(&self) -> impl Iterator<Item = WorkerId> + '_ {
        std::iter::once(self.worker).chain(self.replicas.iter().copied())
    }

    /// Takes worker `w`'s copy out (the first replica becomes the owner when it was the
    /// owner's); `false`, with nothing changed, when `w` holds none or it is the last copy.
    pub fn remove_copy(&mut self, w: WorkerId) -> bool {
        if self.replicas.is_empty() {
            return false;
        }
        if self.worker == w {
            self.worker = self.replicas.remove(0);
            self.reported = false;
            return true;
        }
        let Some(i) = self.replicas.iter().position(|&r| r == w) else { return false };
        self.replicas.remove(i);
        true
    }
}

/// What a conditional completion (`Mutation::CompleteIf`) expects its file's path to hold
/// when the file is published.
#[derive(Debug, Clone, Copy, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub enum Expect {
    /// No complete file other than the one being published.
    Absent,
    /// Exactly this complete file at this version.
    Version { file_id: InodeId, version: u64 },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub enum MountMode {
    /// Object storage is the truth; cv caches reads.
    Cache,
    /// cv is the truth; object storage gets an eventual copy.
    Fs,
}

/// A mount's `key=value` options, as a [`Mutation::Mount`](super::Mutation) carries them and
/// a [`MountEntry`] keeps them. Its `Debug` names the keys only: values hold credentials.
/// (Same archived layout as the `Vec` it wraps, so journals and snapshots written before it
/// read unchanged.)
#[derive(Clone, Default, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub struct MountOptions(pub Vec<(String, String)>);

impl std::fmt::Debug for MountOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let keys: Vec<String> = self.0.iter().map(|(k, _)| format!("{k}=<hidden>")).collect();
        f.debug_list().entries(keys).finish()
    }
}

impl From<Vec<(String, String)>> for MountOptions {
    fn from(v: Vec<(String, String)>) -> Self {
        Self(v)
    }
}

impl std::ops::Deref for MountOptions {
    type Target = [(String, String)];
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

/// A row of the mount table (cv-wire's `Mount` is the request that asks for one). Its `Debug`
/// names the options but shows none of their values (credentials: [`MountOptions`]).
#[derive(Debug, Clone, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub struct MountEntry {
    pub path: String,
    pub ufs_url: String,
    pub mode: MountMode,
    pub options: MountOptions,
}

/// The object a file was cached from (cache mode): its bytes are that
/// version of that object, so its blocks can be dropped and fetched again.
#[derive(Debug, Clone, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub struct UfsObject {
    /// Mount point.
    pub mount: String,
    /// Key relative to the mount's URL.
    pub key: String,
    /// ETag, else mtime and length.
    pub version: String,
}

#[derive(Debug, Clone, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub struct Worker {
    pub id: WorkerId,
    /// The IP address the worker is dialed at (the server resolves an advertised name once,
    /// at registration).
    pub host: String,
    /// One UDP port per shard; the shard number is the index.
    pub shard_ports: Vec<u16>,
    pub capacity: u64,
    pub used: u64,
    pub last_heartbeat: u64,
    pub live: bool,
    /// Failure-domain label (format 4): copies of a block go to different zones when there
    /// are several. Empty: none.
    pub zone: String,
    /// Being drained (format 4): no new blocks; its copies are made elsewhere and dropped.
    pub draining: bool,
}

impl Worker {
    /// The endpoint of `shard`, if the worker has that shard and its host is an IP address.
    pub fn shard_addr(&self, shard: u16) -> Option<std::net::SocketAddr> {
        let port = *self.shard_ports.get(usize::from(shard))?;
        let ip: std::net::IpAddr = self.host.parse().ok()?;
        Some(std::net::SocketAddr::new(ip, port))
    }
}

/// Everything durable. Maps are ordered so that equal histories give equal (and comparable) data.
#[derive(Debug, Clone, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub struct StateData {
    pub inodes: BTreeMap<InodeId, Inode>,
    pub blocks: BTreeMap<BlockId, BlockInfo>,
    pub mounts: BTreeMap<String, MountEntry>,
    pub workers: BTreeMap<WorkerId, Worker>,
    /// Block deletes not yet handed to their worker in a heartbeat reply.
    pub pending_deletes: BTreeMap<WorkerId, BTreeSet<BlockId>>,
    pub next_inode: InodeId,
    pub next_block: BlockId,
    pub next_worker: WorkerId,
    pub next_version: u64,
    /// Files that are copies of an object-store version (format 2).
    pub ufs_files: BTreeMap<InodeId, UfsObject>,
    /// Blocks of exported files not yet handed to their worker to unpin (format 2).
    pub pending_unpins: BTreeMap<WorkerId, BTreeSet<BlockId>>,
    /// Objects to delete from their stores, by mount point: behind files removed or moved
    /// through cv (format 3).
    pub pending_object_deletes: BTreeMap<String, BTreeSet<String>>,
    /// Files being written, by the request id of the `create` that made each (format 4): a
    /// create retried across a master restart, under the same id, is answered with its file.
    pub creates: BTreeMap<InodeId, u64>,
    /// Revoked certificates (format 5), by [`Revocation::key`].
    pub revoked: BTreeMap<String, Revocation>,
    /// Bumped by every change to `revoked` (format 5): servers compare it with the list they
    /// hold.
    pub revoked_generation: u64,
}

/// A revoked certificate, or every certificate of one name valid from before a moment
/// (format 5; docs/security.md, "Revocation").
#[derive(Debug, Clone, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub struct Revocation {
    /// Normalized serial (lowercase hex, no leading zeros); empty for an entry by name.
    pub serial: String,
    /// By name: the subject common name. By serial: the name given, if any.
    pub name: String,
    /// By name: certificates valid from this Unix second or before.
    pub issued_before: i64,
    /// When it was recorded, Unix ms.
    pub at_ms: u64,
    /// The admin certificate that recorded it.
    pub by: String,
}

impl Revocation {
    /// Its key in [`StateData::revoked`]: one entry per serial, one per name.
    pub fn key(&self) -> String {
        if self.serial.is_empty() { format!("name:{}", self.name) } else { format!("serial:{}", self.serial) }
    }
}

impl Default for StateData {
    fn default() -> Self {
        let root = Inode {
            id: ROOT_ID,
            parent: ROOT_ID,
            name: String::new(),
            mtime: 0,
            mode: 0o755,
            body: InodeBody::Dir { children: BTreeMap::new() },
        };
        Self {
            inodes: BTreeMap::from([(ROOT_ID, root)]),
            blocks: BTreeMap::new(),
            mounts: BTreeMap::new(),
            workers: BTreeMap::new(),
            pending_deletes: BTreeMap::new(),
            next_inode: ROOT_ID + 1,
            next_block: 1,
            next_worker: 1,
            next_version: 1,
            ufs_files: BTreeMap::new(),
            pending_unpins: BTreeMap::new(),
            pending_object_deletes: BTreeMap::new(),
            creates: BTreeMap::new(),
            revoked: BTreeMap::new(),
            revoked_generation: 0,
        }
    }
}
