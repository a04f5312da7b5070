//! QUIC totals of a quinn server ([`crate::rpc::serve_counted`]): the live connections are held
//! here so a scrape reads their counters; a closed one leaves its counters behind.

use crate::quic_stats::QuicTotals;
use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// The connections of one served endpoint.
#[derive(Debug, Default)]
pub struct ConnStats {
    inner: Mutex<Inner>,
    /// Counted apart from the lock: one per request.
    streams: AtomicU64,
    retries: AtomicU64,
}

#[derive(Debug, Default)]
struct Inner {
    live: HashMap<usize, quinn::Connection>,
    closed: QuicTotals,
}

impl ConnStats {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn opened(&self, c: &quinn::Connection) {
        let mut g = self.lock();
        g.closed.connections_total += 1;
        g.live.insert(c.stable_id(), c.clone());
    }

    pub(crate) fn retried(&self) {
        self.retries.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn stream(&self) {
        self.streams.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn closed(&self, c: &quinn::Connection) {
        let mut g = self.lock();
        if g.live.remove(&c.stable_id()).is_some() {
            g.closed.add_conn(&c.stats());
        }
    }

    /// Totals over the closed connections and the live ones now.
    pub fn totals(&self) -> QuicTotals {
        let g = self.lock();
        let mut t = g.closed;
        for c in g.live.values() {
            t.add_conn(&c.stats());
        }
        t.connections_open = g.live.len() as u64;
        t.streams_total = self.streams.load(Ordering::Relaxed);
        t.retries_total = self.retries.load(Ordering::Relaxed);
        t
    }
}
