//! Hot object bytes in the gateway's memory (`[gateway] cache`), as the kernel's page cache
//! keeps them for a local file: cv's workers read their disks with O_DIRECT, so without it every
//! GET of a hot column chunk is a device read. Chunks of `CHUNK` bytes are keyed by file id and
//! version, which change with the content, so a cached chunk is never stale: a new version is
//! a new key, and the old one ages out. Weighted S3-FIFO-like eviction (quick_cache), and
//! concurrent misses of one chunk wait for one read.

use crate::read::read_range;
use bytes::Bytes;
use cv_client::File;
use quick_cache::Weighter;

/// Bytes a cached chunk holds (the file's last chunk may be shorter).
pub(crate) const CHUNK: u64 = 256 << 10;
/// Bytes charged per entry on top of its bytes.
const ENTRY_OVERHEAD: u64 = 96;

/// (file id, version, chunk index).
type Key = (u64, u64, u64);

#[derive(Clone, Debug)]
struct ByLen;

impl Weighter<Key, Bytes> for ByLen {
    fn weight(&self, _: &Key, v: &Bytes) -> u64 {
        v.len() as u64 + ENTRY_OVERHEAD
    }
}

pub(crate) struct ChunkCache {
    chunks: quick_cache::sync::Cache<Key, Bytes, ByLen>,
}

impl std::fmt::Debug for ChunkCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChunkCache").field("bytes", &self.chunks.weight()).finish()
    }
}

impl ChunkCache {
    /// A cache of at most `budget` bytes; `None` for 0 (off).
    pub fn new(budget: u64) -> Option<Self> {
        (budget > 0).then(|| ChunkCache {
            chunks: quick_cache::sync::Cache::with_weighter((budget / CHUNK).max(16) as usize, budget, ByLen),
        })
    }

    /// Whether chunk `index` of `file` is in memory now.
    pub fn holds(&self, file: &File, index: u64) -> bool {
        let st = file.status();
        self.chunks.contains_key(&(st.id, st.version, index))
    }

    /// Chunk `index` of `file`: from memory, or read (once, however many ask at a time).
    pub async fn chunk(&self, file: &File, index: u64) -> cv_client::Result<Bytes> {
        let st = file.status();
        let start = index * CHUNK;
        let end = (start + CHUNK).min(st.length);
        self.chunks.get_or_insert_async(&(st.id, st.version, index), read_range(file, start..end)).await
    }
}
