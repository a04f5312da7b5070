//! What a shard sends to the fetch pool, and the handle it sends it through.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use cv_wire::msg::UfsRef;

use super::error::FetchError;

/// Bytes `offset..offset + len` of `object`, answered on `reply`.
#[derive(Debug)]
pub(crate) struct Fetch {
    pub(crate) object: UfsRef,
    pub(crate) offset: u64,
    pub(crate) len: u64,
    pub(crate) reply: flume::Sender<Result<Bytes, FetchError>>,
}

/// Fetches that readers wait for, across every shard of the worker: background fills hold
/// back while there are any, so that they do not take the store's bandwidth from them.
#[derive(Debug)]
struct ReaderFetches {
    in_flight: AtomicUsize,
    /// When the last one ended, in µs since `base`.
    last_end_us: AtomicU64,
    base: Instant,
}

/// A shard's way into the pool: cheap to clone, usable from any executor.
#[derive(Debug, Clone)]
pub(crate) struct Fetcher {
    tx: flume::Sender<Fetch>,
    readers: Arc<ReaderFetches>,
}

/// Counts one reader fetch while it lives.
struct ReaderGuard<'a>(&'a ReaderFetches);

impl Drop for ReaderGuard<'_> {
    fn drop(&mut self) {
        let now = self.0.base.elapsed().as_micros() as u64;
        self.0.last_end_us.fetch_max(now, Ordering::Relaxed);
        self.0.in_flight.fetch_sub(1, Ordering::Release);
    }
}

impl Fetcher {
    pub(crate) fn new(tx: flume::Sender<Fetch>) -> Self {
        let readers =
            ReaderFetches { in_flight: AtomicUsize::new(0), last_end_us: AtomicU64::new(0), base: Instant::now() };
        Self { tx, readers: Arc::new(readers) }
    }

    /// Fetches the range; never blocks the calling thread (the channel is unbounded and the
    /// answer is awaited). `for_reader`: a reader waits for these bytes (see [`Self::quiet_for`]).
    pub(crate) async fn fetch(
        &self,
        object: UfsRef,
        offset: u64,
        len: u64,
        for_reader: bool,
    ) -> Result<Bytes, FetchError> {
        let _reader = for_reader.then(|| {
            self.readers.in_flight.fetch_add(1, Ordering::Acquire);
            ReaderGuard(&self.readers)
        });
        let (reply, answer) = flume::bounded(1);
        if self.tx.send(Fetch { object, offset, len, reply }).is_err() {
            return Err(FetchError::stopped());
        }
        answer.recv_async().await.unwrap_or_else(|_| Err(FetchError::stopped()))
    }

    /// Whether no reader fetch is running anywhere in the worker and none ended within `gap`.
    pub(crate) fn quiet_for(&self, gap: Duration) -> bool {
        let r = &self.readers;
        if r.in_flight.load(Ordering::Acquire) > 0 {
            return false;
        }
        let since_last = (r.base.elapsed().as_micros() as u64).saturating_sub(r.last_end_us.load(Ordering::Relaxed));
        since_last >= gap.as_micros() as u64
    }
}
