//! Hot object bytes in the gateway's memory (`[gateway] cache`), as the kernel's page cache
//! keeps them for a local file: cv's workers read their disks with O_DIRECT, so without it every
//! GET of a hot column chunk is a device read. Chunks of `CHUNK` bytes are keyed by file id and
//! version, which change with the content, so a cached chunk is never stale: a new version is
//! a new key, and the old one ages out. Weighted S3-FIFO-like eviction (quick_cache), and
//! concurrent misses of one chunk wait for one read.
//!
//! Every chunk keeps the crc32 of its bytes, computed as it is inserted (from bytes the client
//! has just checked against the workers' crcs), and every hit checks it before serving: a bit
//! flipped in RAM while the chunk sat here is never sent. A chunk that fails is dropped,
//! counted (`GatewayStats::cache_corrupt`) and read from the cluster again.

use crate::read::read_range;
use crate::stats::Counters;
use bytes::Bytes;
use cv_client::File;
use quick_cache::Weighter;
use std::future::Future;
use std::sync::Arc;

/// Bytes a cached chunk holds (the file's last chunk may be shorter).
pub(crate) const CHUNK: u64 = 256 << 10;
/// Bytes charged per entry on top of its bytes.
const ENTRY_OVERHEAD: u64 = 96;

/// (file id, version, chunk index).
type Key = (u64, u64, u64);

/// A cached chunk: its bytes and their crc32 when they were inserted.
#[derive(Clone, Debug)]
struct Cached {
    bytes: Bytes,
    crc: u32,
}

impl Cached {
    fn new(bytes: Bytes) -> Self {
        Cached { crc: crc32fast::hash(&bytes), bytes }
    }

    /// Whether the bytes are still those inserted.
    fn intact(&self) -> bool {
        crc32fast::hash(&self.bytes) == self.crc
    }
}

#[derive(Clone, Debug)]
struct ByLen;

impl Weighter<Key, Cached> for ByLen {
    fn weight(&self, _: &Key, v: &Cached) -> u64 {
        v.bytes.len() as u64 + ENTRY_OVERHEAD
    }
}

pub(crate) struct ChunkCache {
    chunks: quick_cache::sync::Cache<Key, Cached, ByLen>,
    counters: Arc<Counters>,
}

impl std::fmt::Debug for ChunkCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChunkCache").field("bytes", &self.chunks.weight()).finish()
    }
}

impl ChunkCache {
    /// A cache of at most `budget` bytes, counting what it drops into `counters`; `None` for 0
    /// (off).
    pub fn new(budget: u64, counters: Arc<Counters>) -> Option<Self> {
        (budget > 0).then(|| ChunkCache {
            chunks: quick_cache::sync::Cache::with_weighter((budget / CHUNK).max(16) as usize, budget, ByLen),
            counters,
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
        self.get_or_read((st.id, st.version, index), || read_range(file, start..end)).await
    }

    /// The chunk at `key` from memory if its bytes pass their check, else `read`'s (cached).
    /// A chunk failing its check is dropped and read again; if the chunk read in its place
    /// fails too (another reader's, or memory failing again), the bytes are read and served
    /// without the cache.
    async fn get_or_read<F, Fut>(&self, key: Key, read: F) -> cv_client::Result<Bytes>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = cv_client::Result<Bytes>>,
    {
        for _ in 0..2 {
            match self.chunks.get_value_or_guard_async(&key).await {
                Ok(hit) if hit.intact() => return Ok(hit.bytes),
                Ok(bad) => self.drop_corrupt(&key, &bad),
                Err(guard) => {
                    let bytes = read().await?;
                    let _ = guard.insert(Cached::new(bytes.clone()));
                    return Ok(bytes);
                }
            }
        }
        read().await
    }

    /// Drops `bad` (not a chunk another reader has put in its place meanwhile), and counts it.
    fn drop_corrupt(&self, key: &Key, bad: &Cached) {
        let same = |v: &Cached| v.crc == bad.crc && v.bytes.as_ptr() == bad.bytes.as_ptr();
        if self.chunks.remove_if(key, same).is_some() {
            self.counters.cache_corrupt();
        }
        tracing::warn!(
            file = key.0,
            version = key.1,
            chunk = key.2,
            "gateway: a cached chunk failed its checksum; dropped"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    /// Flips a bit of a cached chunk, as a fault in RAM would, keeping its crc.
    fn flip(cache: &ChunkCache, key: &Key, at: usize) {
        let mut c = cache.chunks.peek(key).expect("cached");
        let mut v = c.bytes.to_vec();
        v[at] ^= 0x04;
        c.bytes = Bytes::from(v);
        cache.chunks.replace(*key, c, true).expect("replaced");
    }

    #[tokio::test]
    async fn a_chunk_flipped_in_memory_is_refused_dropped_and_read_again() {
        let counters = Arc::new(Counters::default());
        let cache = ChunkCache::new(4 * CHUNK, counters.clone()).unwrap();
        let good: Bytes = (0..CHUNK as u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 11) as u8).collect();
        let reads = AtomicU32::new(0);
        let read = || async {
            reads.fetch_add(1, Ordering::Relaxed);
            Ok(good.clone())
        };
        let key = (7, 1, 0);
        assert_eq!(cache.get_or_read(key, read).await.unwrap(), good);
        assert_eq!(cache.get_or_read(key, read).await.unwrap(), good);
        assert_eq!(reads.load(Ordering::Relaxed), 1, "the second is a hit");

        // A hit on a flipped chunk is refused and the entry dropped: with the cluster
        // unreachable, the request fails rather than serve it.
        flip(&cache, &key, 1234);
        let unreachable = || async { Err(cv_client::Error::new(cv_client::ErrorKind::Unavailable, "down")) };
        assert!(cache.get_or_read(key, unreachable).await.is_err(), "flipped bytes served");
        assert!(!cache.chunks.contains_key(&key), "dropped");
        assert_eq!(counters.snapshot().cache_corrupt, 1);

        // With the cluster there, the request reads from it, and the chunk is cached afresh.
        assert_eq!(cache.get_or_read(key, read).await.unwrap(), good);
        flip(&cache, &key, 0);
        assert_eq!(cache.get_or_read(key, read).await.unwrap(), good);
        assert_eq!((reads.load(Ordering::Relaxed), counters.snapshot().cache_corrupt), (3, 2));
        assert_eq!(cache.get_or_read(key, read).await.unwrap(), good);
        assert_eq!(reads.load(Ordering::Relaxed), 3, "intact again: a hit");
    }
}
