//! Filling a missing block from object storage: readers first, the whole block after, every
//! byte fetched once.
//!
//! The first reader of a block the store does not hold starts a *flight*. A reader's own
//! range is fetched first (a cold read costs what a direct ranged GET of it costs, not the
//! transfer of a whole block); a reader asking for most of the block, or a fill-only request
//! (`cvctl load`), fetches the whole block in one GET. Readers arriving meanwhile are
//! answered from what is held or being fetched, and fetch only the bytes nobody fetches yet,
//! so concurrent readers of one range share one GET. Bytes reach readers as the store
//! delivers them: a reader's reply starts with the first piece of its range, not after the
//! last. When no reader's fetch is left, the flight fetches the gaps, joins the block and
//! writes it into the store (unpinned, checksummed, committed atomically). The gaps wait (up
//! to [`MAX_DEFER`]) until no reader fetch is running anywhere in the worker and none ended
//! for [`QUIET`]: a query reads several column chunks at once or one right after another,
//! and a gap fill started in between would share the store's bandwidth with them. Readers
//! never wait for the disk; fill-only requests do. A failed fetch fails the whole flight and
//! leaves nothing in the store, so the next reader starts a new one.
//!
//! Everything here runs on the shard's thread: the flight table needs no lock. Fetch tasks
//! run inside the shard's gate and belong to no reader, so a reader that goes away cancels
//! nothing.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::ops::Range;
use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use cv_rt::Gate;
use cv_wire::ErrorCode;
use cv_wire::msg::BlockSource;

use super::codes::{fetch_code, store_code};
use super::pieces::Pieces;
use crate::fetch::Fetcher;
use crate::store::BlockStore;

/// A read of at least this share of a block (1/2) fetches the whole block at once: the
/// second GET for the rest would cost more than the bytes it saves.
const WHOLE_SHARE_DIV: u64 = 2;
/// Gap fills wait for this long without reader fetches (a sequential reader's next request
/// comes sooner)...
const QUIET: Duration = Duration::from_millis(5);
/// ...but never longer than this, so a busy worker still fills its blocks.
const MAX_DEFER: Duration = Duration::from_millis(200);
/// How often a deferred fill looks again.
const DEFER_POLL: Duration = Duration::from_millis(2);

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

/// What a caller waits for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Want {
    /// These bytes of the block (already clamped to its length).
    Range(Range<u64>),
    /// The whole block in the store (fill-only).
    Stored,
}

/// The next piece of a `Want::Range`, or nothing for `Want::Stored` once the block is stored.
type Outcome = Result<Bytes, FillError>;

#[derive(Debug)]
struct Waiter {
    want: Want,
    /// For a range: the offset of the first byte not yet sent.
    at: u64,
    tx: flume::Sender<Outcome>,
}

/// The bytes of a range being filled, as they arrive: exactly the range's length in all,
/// in order, unless an error ends them.
#[derive(Debug)]
pub(crate) struct Filling {
    rx: flume::Receiver<Outcome>,
    left: u64,
}

impl Filling {
    /// The next piece; `None` once every byte came (or after an error).
    pub(crate) async fn next(&mut self) -> Option<Outcome> {
        if self.left == 0 {
            return None;
        }
        match self.rx.recv_async().await {
            Ok(Ok(b)) => {
                // `Flight::advance` sends slices of the range only (`Pieces::run`).
                debug_assert!(
                    !b.is_empty() && b.len() as u64 <= self.left,
                    "piece {} with {} left",
                    b.len(),
                    self.left
                );
                self.left = self.left.saturating_sub(b.len() as u64);
                Some(Ok(b))
            }
            Ok(Err(e)) => {
                self.left = 0;
                Some(Err(e))
            }
            Err(_) => {
                self.left = 0;
                Some(Err(abandoned()))
            }
        }
    }

    /// Whether every byte came.
    pub(crate) fn is_done(&self) -> bool {
        self.left == 0
    }
}

/// One block being filled.
#[derive(Debug)]
struct Flight {
    /// Tells this flight's fetches from those of an earlier, failed flight of the block.
    id: u64,
    source: BlockSource,
    pieces: Pieces,
    /// Ranges (in block offsets) being fetched now.
    fetching: Vec<Range<u64>>,
    /// The gaps are being fetched (or the block stored): no reader starts a fetch any more.
    completing: bool,
    /// A gap fill waits for the readers to be quiet.
    deferred: bool,
    waiters: Vec<Waiter>,
    /// The span of the ranges readers asked for: read once already when the block is stored
    /// (`BlockStore::note_read`), so only a later read of those bytes makes it look hot.
    asked: (u64, u64),
}

impl Flight {
    /// Ranges to start fetching so that `want` will be served.
    fn plan(&mut self, want: &Want) -> Vec<Range<u64>> {
        let len = self.pieces.len();
        let idle = self.fetching.is_empty() && self.pieces.is_empty();
        let ranges = match want {
            _ if self.completing => Vec::new(),
            Want::Stored if idle => std::iter::once(0..len).collect(),
            Want::Stored => Vec::new(),
            Want::Range(r) if idle && (r.end - r.start) * WHOLE_SHARE_DIV >= len => std::iter::once(0..len).collect(),
            Want::Range(r) => self.pieces.missing(r.clone(), &self.fetching),
        };
        self.fetching.extend(ranges.iter().cloned());
        ranges
    }

    /// Sends every range waiter the bytes held right after those it has; a waiter that has
    /// all of its range, or went away, leaves.
    fn advance(&mut self) {
        let pieces = &self.pieces;
        self.waiters.retain_mut(|w| {
            let Want::Range(r) = &w.want else { return true };
            while w.at < r.end {
                let Some(b) = pieces.run(w.at, r.end) else { return true };
                w.at += b.len() as u64;
                if w.tx.send(Ok(b)).is_err() {
                    return false;
                }
            }
            false
        });
    }
}

/// The shard's flights, by block id.
#[derive(Debug)]
pub(crate) struct Fills {
    store: BlockStore,
    fetcher: Option<Fetcher>,
    flights: RefCell<HashMap<u64, Flight>>,
    next_id: Cell<u64>,
    /// Waiters that joined a flight already under way (single flight saved their fetch).
    joined: Cell<u64>,
}

impl Fills {
    pub(crate) fn new(store: BlockStore, fetcher: Option<Fetcher>) -> Self {
        Self { store, fetcher, flights: RefCell::new(HashMap::new()), next_id: Cell::new(0), joined: Cell::new(0) }
    }

    /// Fills started (flights, one per block fetched at a time), waiters that joined one
    /// already under way, and flights under way now.
    pub(crate) fn counts(&self) -> (u64, u64, u64) {
        (self.next_id.get(), self.joined.get(), self.flights.borrow().len() as u64)
    }

    /// The bytes `r` of block `block_id` (already cut by `store::clamp`), filled from `source`
    /// if needed, as they arrive.
    pub(crate) fn read(
        self: &Rc<Self>,
        gate: &Gate,
        block_id: u64,
        source: BlockSource,
        r: Range<u64>,
    ) -> Result<Filling, FillError> {
        let left = r.end - r.start;
        let rx = if left == 0 { flume::bounded(1).1 } else { self.join(gate, block_id, source, Want::Range(r))? };
        Ok(Filling { rx, left })
    }

    /// Waits until block `block_id` is in the store, filling it from `source` (`cvctl load`).
    pub(crate) async fn load(
        self: &Rc<Self>,
        gate: &Gate,
        block_id: u64,
        source: BlockSource,
    ) -> Result<(), FillError> {
        let rx = self.join(gate, block_id, source, Want::Stored)?;
        rx.recv_async().await.unwrap_or_else(|_| Err(abandoned())).map(|_| ())
    }

    /// Joins the flight of block `block_id` already under way, or starts one, as a waiter for
    /// `want`; its answers come on the returned channel.
    fn join(
        self: &Rc<Self>,
        gate: &Gate,
        block_id: u64,
        source: BlockSource,
        want: Want,
    ) -> Result<flume::Receiver<Outcome>, FillError> {
        let Some(fetcher) = self.fetcher.clone() else {
            return Err(FillError::new(
                ErrorCode::Unsupported,
                "this worker has no master configured, so it cannot resolve mounts to fetch blocks",
            ));
        };
        let (tx, rx) = flume::unbounded();
        let for_reader = matches!(want, Want::Range(_));
        let (id, start, now) = {
            let mut flights = self.flights.borrow_mut();
            if flights.contains_key(&block_id) {
                self.joined.set(self.joined.get() + 1);
            }
            let flight = flights.entry(block_id).or_insert_with(|| Flight {
                id: self.next_id.replace(self.next_id.get() + 1),
                pieces: Pieces::new(source.len),
                source,
                fetching: Vec::new(),
                completing: false,
                deferred: false,
                waiters: Vec::new(),
                asked: (u64::MAX, 0),
            });
            if let Want::Range(r) = &want {
                flight.asked = (flight.asked.0.min(r.start), flight.asked.1.max(r.end));
            }
            let start = flight.plan(&want);
            // A fill-only request does not wait for a deferred gap fill's turn.
            let now = (want == Want::Stored && flight.deferred && flight.fetching.is_empty() && !flight.completing)
                .then(|| flight.complete());
            let at = match &want {
                Want::Range(r) => r.start,
                Want::Stored => 0,
            };
            flight.waiters.push(Waiter { want, at, tx });
            // What is held already goes out now.
            flight.advance();
            (flight.id, start, now)
        };
        // Spawned after the borrow ends: a new task may run at once.
        for r in start {
            self.spawn_fetch(gate, &fetcher, block_id, id, r, for_reader);
        }
        if let Some(next) = now {
            self.run_next(gate, &fetcher, block_id, id, next);
        }
        Ok(rx)
    }

    fn spawn_fetch(
        self: &Rc<Self>,
        gate: &Gate,
        fetcher: &Fetcher,
        block_id: u64,
        id: u64,
        r: Range<u64>,
        for_reader: bool,
    ) {
        let fetch =
            Fetch { fills: self.clone(), gate: gate.clone(), block_id, id, range: r, for_reader, landed: false };
        if gate.spawn(fetch.run(fetcher.clone())).map(|t| t.detach()).is_err() {
            // The future was dropped unrun: its drop failed the flight, waiters were told.
        }
    }

    /// A piece of a fetch came, `at` bytes into the block: keep it and send it on to the
    /// readers it serves. False if the flight is gone (failed), so the fetch can stop.
    fn arrived(&self, fetch: &Fetch, at: u64, data: Bytes) -> bool {
        let mut flights = self.flights.borrow_mut();
        let Some(flight) = flights.get_mut(&fetch.block_id).filter(|f| f.id == fetch.id) else { return false };
        flight.pieces.insert(at, data);
        flight.advance();
        true
    }

    /// A fetch of `r` ended (its bytes already arrived): fetch the gaps (soon, see the module
    /// docs) or, with the block whole, store it. A failure fails the flight.
    fn landed(self: &Rc<Self>, fetch: &Fetch, fetcher: &Fetcher, got: Result<(), FillError>) {
        let (block_id, id, r) = (fetch.block_id, fetch.id, fetch.range.clone());
        let next = {
            let mut flights = self.flights.borrow_mut();
            let Some(flight) = flights.get_mut(&block_id) else { return };
            if flight.id != id {
                return; // a fetch of a flight that failed; a new one has started since
            }
            flight.fetching.retain(|f| *f != r);
            if let Err(e) = got {
                fail(&mut flights, block_id, id, e);
                return;
            }
            if !flight.fetching.is_empty() {
                return;
            }
            // A fill-only request (`cvctl load`) wants the block now.
            let loading = flight.waiters.iter().any(|w| w.want == Want::Stored);
            if loading || flight.pieces.is_whole() {
                flight.complete()
            } else if flight.deferred {
                return;
            } else {
                flight.deferred = true;
                Next::Defer
            }
        };
        self.run_next(&fetch.gate, fetcher, block_id, id, next);
    }

    /// A deferred gap fill's turn: unless a reader's fetch started meanwhile (its landing
    /// defers again), fetch the gaps.
    fn start_gaps(self: &Rc<Self>, gate: &Gate, fetcher: &Fetcher, block_id: u64, id: u64) {
        let next = {
            let mut flights = self.flights.borrow_mut();
            let Some(flight) = flights.get_mut(&block_id).filter(|f| f.id == id) else { return };
            flight.deferred = false;
            if !flight.fetching.is_empty() || flight.completing {
                return;
            }
            flight.complete()
        };
        self.run_next(gate, fetcher, block_id, id, next);
    }

    fn run_next(self: &Rc<Self>, gate: &Gate, fetcher: &Fetcher, block_id: u64, id: u64, next: Next) {
        match next {
            Next::Fetch(gaps) => gaps.into_iter().for_each(|g| self.spawn_fetch(gate, fetcher, block_id, id, g, false)),
            Next::Defer => {
                let (fills, gate2, fetcher) = (self.clone(), gate.clone(), fetcher.clone());
                let task = async move {
                    let started = Instant::now();
                    while !fetcher.quiet_for(QUIET) && started.elapsed() < MAX_DEFER {
                        cv_rt::sleep(DEFER_POLL).await;
                    }
                    fills.start_gaps(&gate2, &fetcher, block_id, id);
                };
                if gate.spawn(task).map(|t| t.detach()).is_err() {
                    fail(&mut self.flights.borrow_mut(), block_id, id, abandoned());
                }
            }
            Next::Store(block) => {
                let fills = self.clone();
                let task = async move {
                    let stored = store(&fills.store, block_id, &block).await;
                    if let Err(e) = &stored {
                        tracing::warn!(block = block_id, error = %e.message, "fetched block not cached");
                    }
                    let flight = fills.flights.borrow_mut().remove(&block_id);
                    if let Some(f) = flight.as_ref().filter(|f| f.asked.0 < f.asked.1 && stored.is_ok()) {
                        fills.store.note_read(block_id, f.asked.0, f.asked.1);
                    }
                    // Range waiters have all their bytes already (the block is whole).
                    for w in flight.map(|f| f.waiters).unwrap_or_default() {
                        let _ = w.tx.send(stored.clone().map(|()| Bytes::new()));
                    }
                };
                if gate.spawn(task).map(|t| t.detach()).is_err() {
                    fail(&mut self.flights.borrow_mut(), block_id, id, abandoned());
                }
            }
        }
    }
}

impl Flight {
    /// No reader fetch is left: store the block if whole, else fetch all its gaps now.
    fn complete(&mut self) -> Next {
        self.completing = true;
        match self.pieces.whole() {
            Some(block) => Next::Store(block),
            None => {
                let gaps = self.pieces.missing(0..self.pieces.len(), &[]);
                self.fetching.extend(gaps.iter().cloned());
                Next::Fetch(gaps)
            }
        }
    }
}

enum Next {
    Fetch(Vec<Range<u64>>),
    /// Fetch the gaps once the readers are quiet.
    Defer,
    Store(Bytes),
}

/// Ends flight `id` of the block (if still under way): every waiter gets `e`, and the next
/// reader starts afresh.
fn fail(flights: &mut HashMap<u64, Flight>, block_id: u64, id: u64, e: FillError) {
    if flights.get(&block_id).is_some_and(|f| f.id == id)
        && let Some(flight) = flights.remove(&block_id)
    {
        for w in flight.waiters {
            let _ = w.tx.send(Err(e.clone()));
        }
    }
}

fn abandoned() -> FillError {
    FillError::new(ErrorCode::Unavailable, "the fetch of this block was abandoned (shutdown); try again")
}

/// One ranged GET of a flight. However it ends (even dropped unfinished at shutdown), the
/// flight hears of it.
struct Fetch {
    fills: Rc<Fills>,
    gate: Gate,
    block_id: u64,
    id: u64,
    range: Range<u64>,
    /// A reader waits for these bytes (not a gap fill).
    for_reader: bool,
    landed: bool,
}

impl Fetch {
    async fn run(mut self, fetcher: Fetcher) {
        let source = match self.fills.flights.borrow().get(&self.block_id) {
            Some(f) if f.id == self.id => f.source.clone(),
            _ => {
                self.landed = true;
                return;
            }
        };
        let r = self.range.clone();
        let mut pieces = fetcher.fetch(source.object, source.offset + r.start, r.end - r.start, self.for_reader);
        let mut at = r.start;
        let mut got = Ok(());
        while let Some(piece) = pieces.next().await {
            match piece {
                Ok(b) => {
                    let n = b.len() as u64;
                    if !self.fills.arrived(&self, at, b) {
                        break; // the flight failed meanwhile: nobody needs the rest
                    }
                    at += n;
                }
                Err(e) => {
                    tracing::debug!(block = self.block_id, error = %e, "fetch failed");
                    got = Err(FillError::new(fetch_code(&e), e.message()));
                    break;
                }
            }
        }
        drop(pieces); // a reader fetch counts until here (see `Fetcher::quiet_for`)
        self.landed = true;
        self.fills.landed(&self, &fetcher, got);
    }
}

impl Drop for Fetch {
    fn drop(&mut self) {
        if !self.landed {
            fail(&mut self.fills.flights.borrow_mut(), self.block_id, self.id, abandoned());
        }
    }
}

/// Writes the block into the store; any failure drops the writer, leaving nothing behind.
async fn store(store: &BlockStore, block_id: u64, data: &[u8]) -> Result<(), FillError> {
    let err = |e: crate::store::StoreError| FillError::new(store_code(&e), format!("caching block {block_id}: {e}"));
    let mut w = store.begin_write(block_id, data.len() as u64, false).await.map_err(err)?;
    w.append(data).await.map_err(err)?;
    w.commit().await.map(|_| ()).map_err(err)
}
