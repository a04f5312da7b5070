//! What the gateway served, counted as it goes (for `cvctl bench gateway-tpch`, and the
//! seed of the metrics endpoint issue 25 asks for).

use std::sync::atomic::{AtomicU64, Ordering};

/// Requests served, by kind.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    gets: AtomicU64,
    heads: AtomicU64,
    lists: AtomicU64,
    writes: AtomicU64,
    bytes_out: AtomicU64,
    cache_corrupt: AtomicU64,
}

/// A snapshot of the counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct GatewayStats {
    /// GetObject requests answered with a body.
    pub gets: u64,
    /// HeadObject requests answered.
    pub heads: u64,
    /// ListObjects(V2) pages answered.
    pub lists: u64,
    /// PutObject, UploadPart, CopyObject, multipart completions and deletes answered.
    pub writes: u64,
    /// Body bytes of the GETs answered.
    pub bytes_out: u64,
    /// Cached chunks (`[gateway] cache`) dropped because their bytes failed their checksum
    /// (changed in memory since they were cached); each was read from the cluster instead.
    pub cache_corrupt: u64,
}

impl Counters {
    pub fn get(&self, bytes: u64) {
        self.gets.fetch_add(1, Ordering::Relaxed);
        self.bytes_out.fetch_add(bytes, Ordering::Relaxed);
    }

    pub fn head(&self) {
        self.heads.fetch_add(1, Ordering::Relaxed);
    }

    pub fn list(&self) {
        self.lists.fetch_add(1, Ordering::Relaxed);
    }

    pub fn write(&self) {
        self.writes.fetch_add(1, Ordering::Relaxed);
    }

    pub fn cache_corrupt(&self) {
        self.cache_corrupt.fetch_add(1, Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> GatewayStats {
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        GatewayStats {
            gets: l(&self.gets),
            heads: l(&self.heads),
            lists: l(&self.lists),
            writes: l(&self.writes),
            bytes_out: l(&self.bytes_out),
            cache_corrupt: l(&self.cache_corrupt),
        }
    }
}

impl GatewayStats {
    /// Each count divided by `n` (per pass, per second).
    pub fn per(self, n: u64) -> GatewayStats {
        let n = n.max(1);
        GatewayStats {
            gets: self.gets / n,
            heads: self.heads / n,
            lists: self.lists / n,
            writes: self.writes / n,
            bytes_out: self.bytes_out / n,
            cache_corrupt: self.cache_corrupt / n,
        }
    }
}

impl std::ops::Sub for GatewayStats {
    type Output = GatewayStats;

    fn sub(self, o: GatewayStats) -> GatewayStats {
        GatewayStats {
            gets: self.gets - o.gets,
            heads: self.heads - o.heads,
            lists: self.lists - o.lists,
            writes: self.writes - o.writes,
            bytes_out: self.bytes_out - o.bytes_out,
            cache_corrupt: self.cache_corrupt - o.cache_corrupt,
        }
    }
}
