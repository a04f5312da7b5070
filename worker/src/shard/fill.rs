//! Filling a missing block from object storage, once however many readers ask for it.
//!
//! The first reader of a block the store does not hold starts a *flight*: a task (inside
//! the shard's gate, owned by no reader) that asks the fetch pool for the block's byte range,
//! hands the bytes to every reader that joined meanwhile, then writes them into the store
//! (unpinned, checksummed, committed atomically): readers do not wait for the disk, only
//! fill-only requests (`cvctl load`) and readers that arrive during the write do. Readers only
//! wait on a flume channel. A flight that fails leaves nothing in the store and is forgotten,
//! so the next reader starts a new one.
//!
//! Everything here runs on the shard's thread: the flight table needs no lock.

use std::cell::RefCell;
use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::rc::Rc;

use bytes::Bytes;
use cv_wire::ErrorCode;
use cv_wire::msg::BlockSource;
use glommio::sync::Gate;

use super::codes::{fetch_code, store_code};
use crate::store::BlockStore;
use crate::ufs::Fetcher;

/// Why a block could not be filled (cloned to every waiting reader).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FillError {
    pub(crate) code: ErrorCode,
    pub(crate) message: String,
}

impl FillError {
    fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self { code, message: message.into() }
    }
}

/// A finished flight: the block's bytes, and whether they are now in the store (only a
/// fill-only request looks: readers are answered from the bytes before the write).
#[derive(Debug, Clone)]
pub(crate) struct Filled {
    pub(crate) data: Bytes,
    pub(crate) stored: Result<(), FillError>,
}

type Outcome = Result<Filled, FillError>;
/// A reader waiting on a flight, and whether it needs the block stored first.
type Waiter = (flume::Sender<Outcome>, bool);

/// The shard's flights, by block id.
#[derive(Debug)]
pub(crate) struct Fills {
    store: BlockStore,
    fetcher: Option<Fetcher>,
    /// Waiters of each flight: their channel, and whether they need the block stored first.
    flights: RefCell<HashMap<u64, Vec<Waiter>>>,
}

impl Fills {
    pub(crate) fn new(store: BlockStore, fetcher: Option<Fetcher>) -> Self {
        Self { store, fetcher, flights: RefCell::new(HashMap::new()) }
    }

    /// Waits for block `block_id` to be fetched from `source` (and, with `need_stored`, to be
    /// in the store), joining the flight already under way or starting one.
    pub(crate) async fn fill(
        self: &Rc<Self>,
        gate: &Gate,
        block_id: u64,
        source: BlockSource,
        need_stored: bool,
    ) -> Outcome {
        let Some(fetcher) = self.fetcher.clone() else {
            return Err(FillError::new(
                ErrorCode::Unsupported,
                "this worker has no master configured, so it cannot resolve mounts to fetch blocks",
            ));
        };
        let (tx, rx) = flume::bounded(1);
        let lead = match self.flights.borrow_mut().entry(block_id) {
            Entry::Occupied(mut e) => {
                e.get_mut().push((tx, need_stored));
                false
            }
            Entry::Vacant(v) => {
                v.insert(vec![(tx, need_stored)]);
                true
            }
        };
        if lead {
            let flight = Flight { fills: self.clone(), block_id, outcome: None };
            if gate.spawn(flight.fly(fetcher, source)).map(|t| t.detach()).is_err() {
                // The future (and with it the flight) was dropped: waiters were told.
                return Err(FillError::new(ErrorCode::Unavailable, "the shard is shutting down"));
            }
        }
        rx.recv_async().await.unwrap_or_else(|_| Err(abandoned()))
    }
}

fn abandoned() -> FillError {
    FillError::new(ErrorCode::Unavailable, "the fetch of this block was abandoned (shutdown); try again")
}

/// One block being fetched. However it ends (even dropped unfinished), every waiter gets an
/// answer and the block id leaves the flight table.
struct Flight {
    fills: Rc<Fills>,
    block_id: u64,
    outcome: Option<Outcome>,
}

impl Flight {
    async fn fly(mut self, fetcher: Fetcher, source: BlockSource) {
        let fetched = fetcher.fetch(source.object, source.offset, source.len).await;
        let outcome = match fetched {
            Ok(data) if data.len() as u64 == source.len => {
                // Readers get their bytes now; the disk write follows.
                self.answer_readers(&data);
                let stored = store(&self.fills.store, self.block_id, &data).await;
                if let Err(e) = &stored {
                    tracing::warn!(block = self.block_id, error = %e.message, "fetched block not cached");
                }
                Ok(Filled { data, stored })
            }
            Ok(data) => Err(FillError::new(
                ErrorCode::Internal,
                format!("fetch returned {} bytes, {} expected", data.len(), source.len),
            )),
            Err(e) => {
                tracing::debug!(block = self.block_id, error = %e, "fetch failed");
                Err(FillError::new(fetch_code(&e), e.message()))
            }
        };
        self.outcome = Some(outcome);
    }
}

impl Flight {
    /// Answers, from the fetched bytes, every waiter that does not need the block stored.
    fn answer_readers(&self, data: &Bytes) {
        let readers: Vec<_> = {
            let mut flights = self.fills.flights.borrow_mut();
            let Some(waiters) = flights.get_mut(&self.block_id) else { return };
            let (readers, rest): (Vec<_>, Vec<_>) = waiters.drain(..).partition(|(_, need_stored)| !need_stored);
            *waiters = rest;
            readers
        };
        for (w, _) in readers {
            let _ = w.send(Ok(Filled { data: data.clone(), stored: Ok(()) }));
        }
    }
}

impl Drop for Flight {
    fn drop(&mut self) {
        let waiters = self.fills.flights.borrow_mut().remove(&self.block_id).unwrap_or_default();
        let outcome = self.outcome.take().unwrap_or_else(|| Err(abandoned()));
        for (w, _) in waiters {
            // A reader that went away needs no answer.
            let _ = w.send(outcome.clone());
        }
    }
}

impl std::fmt::Debug for Flight {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Flight").field("block_id", &self.block_id).finish()
    }
}

/// Writes the block into the store; any failure drops the writer, leaving nothing behind.
async fn store(store: &BlockStore, block_id: u64, data: &[u8]) -> Result<(), FillError> {
    let err = |e: crate::store::StoreError| FillError::new(store_code(&e), format!("caching block {block_id}: {e}"));
    let mut w = store.begin_write(block_id, data.len() as u64, false).await.map_err(err)?;
    w.append(data).await.map_err(err)?;
    w.commit().await.map(|_| ()).map_err(err)
}
