//! What a shard counts for `/metrics` beyond its store: its QUIC connections (the live ones
//! are read at scrape time, a closed one leaves its counters behind) and the requests it is
//! serving now (its queue depth). Shard-local cells: one thread, no atomics.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;

use cv_net::quic_stats::QuicTotals;
use cv_rt::quic::Connection;

#[derive(Debug, Default)]
pub(crate) struct ShardCounters {
    live: RefCell<HashMap<usize, Connection>>,
    closed: Cell<QuicTotals>,
    streams: Cell<u64>,
    in_flight: Cell<u64>,
}

/// One request being served; counted out when dropped.
#[derive(Debug)]
pub(crate) struct InFlight<'a>(&'a ShardCounters);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.in_flight.set(self.0.in_flight.get().saturating_sub(1));
    }
}

impl ShardCounters {
    pub(crate) fn conn_opened(&self, c: &Connection) {
        let mut t = self.closed.get();
        t.connections_total += 1;
        self.closed.set(t);
        self.live.borrow_mut().insert(c.stable_id(), c.clone());
    }

    pub(crate) fn conn_closed(&self, c: &Connection) {
        if self.live.borrow_mut().remove(&c.stable_id()).is_some() {
            let mut t = self.closed.get();
            t.add_conn(&c.stats());
            self.closed.set(t);
        }
    }

    /// A request stream accepted; it is in flight until the guard drops.
    pub(crate) fn request(&self) -> InFlight<'_> {
        self.streams.set(self.streams.get() + 1);
        self.in_flight.set(self.in_flight.get() + 1);
        InFlight(self)
    }

    pub(crate) fn in_flight(&self) -> u64 {
        self.in_flight.get()
    }

    pub(crate) fn quic(&self) -> QuicTotals {
        let mut t = self.closed.get();
        let live = self.live.borrow();
        for c in live.values() {
            t.add_conn(&c.stats());
        }
        t.connections_open = live.len() as u64;
        t.streams_total = self.streams.get();
        t
    }
}
