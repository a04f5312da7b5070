//! What a shard sends to the fetch pool, and the handle it sends it through.

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

/// A shard's way into the pool: cheap to clone, usable from any executor.
#[derive(Debug, Clone)]
pub(crate) struct Fetcher {
    tx: flume::Sender<Fetch>,
}

impl Fetcher {
    pub(crate) fn new(tx: flume::Sender<Fetch>) -> Self {
        Self { tx }
    }

    /// Fetches the range; never blocks the calling thread (the channel is unbounded and the
    /// answer is awaited).
    pub(crate) async fn fetch(&self, object: UfsRef, offset: u64, len: u64) -> Result<Bytes, FetchError> {
        let (reply, answer) = flume::bounded(1);
        if self.tx.send(Fetch { object, offset, len, reply }).is_err() {
            return Err(FetchError::stopped());
        }
        answer.recv_async().await.unwrap_or_else(|_| Err(FetchError::stopped()))
    }
}
