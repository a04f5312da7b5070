//! What a shard sends to the fetch pool, and the handle it sends it through.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use cv_wire::msg::UfsRef;

use super::error::{FetchError, FetchErrorKind};

/// Bytes `offset..offset + len` of `object`, answered on `reply` in pieces, in order, as
/// they arrive: exactly `len` bytes in all, or an error that ends the answer.
#[derive(Debug)]
pub(crate) struct Fetch {
    pub(crate) object: UfsRef,
    pub(crate) offset: u64,
    pub(crate) len: u64,
    pub(crate) reply: flume::Sender<Result<Bytes, FetchError>>,
}

/// The answer to one fetch, piece by piece.
#[derive(Debug)]
pub(crate) struct FetchStream {
    rx: flume::Receiver<Result<Bytes, FetchError>>,
    /// Bytes not received yet.
    left: u64,
    _reader: Option<ReaderGuard>,
}

impl FetchStream {
    /// The next piece, in order; `None` once every byte came. After an error, `None`.
    pub(crate) async fn next(&mut self) -> Option<Result<Bytes, FetchError>> {
        if self.left == 0 {
            return None;
        }
        let got = self.rx.recv_async().await.unwrap_or_else(|_| Err(FetchError::stopped()));
        match got {
            Ok(b) if b.is_empty() || b.len() as u64 > self.left => {
                let msg = format!("the fetch pool sent a piece of {} bytes with {} left", b.len(), self.left);
                self.left = 0;
                Some(Err(FetchError::new(FetchErrorKind::Failed, msg)))
            }
            Ok(b) => {
                self.left -= b.len() as u64;
                Some(Ok(b))
            }
            Err(e) => {
                self.left = 0;
                Some(Err(e))
            }
        }
    }
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
#[derive(Debug)]
struct ReaderGuard(Arc<ReaderFetches>);

impl Drop for ReaderGuard {
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

    /// Fetches the range, whose pieces come as the store delivers them; never blocks the
    /// calling thread (the channels are unbounded). `for_reader`: a reader waits for these
    /// bytes (see [`Self::quiet_for`]); it counts until the answer is dropped.
    pub(crate) fn fetch(&self, object: UfsRef, offset: u64, len: u64, for_reader: bool) -> FetchStream {
        let reader = for_reader.then(|| {
            self.readers.in_flight.fetch_add(1, Ordering::Acquire);
            ReaderGuard(self.readers.clone())
        });
        let (reply, rx) = flume::unbounded();
        // A pool that is gone drops the request: the receiver then answers `stopped`.
        let _ = self.tx.send(Fetch { object, offset, len, reply });
        FetchStream { rx, left: len, _reader: reader }
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
