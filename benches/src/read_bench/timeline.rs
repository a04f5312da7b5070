//! Where a cv block read's time goes. The client and the shards mark every block request
//! (`cv_net::timeline`); a `tracing` layer keeps the marks while armed, and a series' marks
//! are joined by (shard port, request id) into four stages that add up to the request:
//!
//! ```text
//! issue ──to shard──► arrived ──at shard──► ready ──to first byte──► first ──transfer──► done
//!  client              shard     (lookup,    shard    (reply queued,   client   (the rest of
//!                                disk read)           packets, wake)            the payload)
//! ```
//!
//! All marks are `Instant`s taken by the collector on the thread that emitted them, so
//! client and shard marks compare directly (one process: the embedded cluster).

use serde::Serialize;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::Layer;
use tracing_subscriber::filter::filter_fn;
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;

/// Marks kept per series at most (about 40 MB): the first ~200k requests of a series.
const MAX_MARKS: usize = 1 << 20;

/// The stages of one request, in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    Issue,
    Arrived,
    Ready,
    First,
    Done,
}

impl Stage {
    fn parse(s: &str) -> Option<Stage> {
        use cv_net::timeline as t;
        Some(match s {
            t::ISSUE => Stage::Issue,
            t::ARRIVED => Stage::Arrived,
            t::READY => Stage::Ready,
            t::FIRST => Stage::First,
            t::DONE => Stage::Done,
            _ => return None,
        })
    }
}

#[derive(Clone, Copy, Debug)]
struct Mark {
    at: Instant,
    stage: Stage,
    port: u16,
    req: u64,
}

#[derive(Debug, Default)]
struct Inner {
    armed: AtomicBool,
    marks: Mutex<Vec<Mark>>,
}

/// The collector's handle: arm it before a series, take the stages after it.
#[derive(Clone, Debug, Default)]
pub struct Timeline {
    inner: Arc<Inner>,
}

/// Median and mean of one stage, in microseconds.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Spread {
    pub p50_us: f64,
    pub mean_us: f64,
}

/// Where a series' block requests spent their time.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Stages {
    /// Requests with all five marks (the stages below are over these).
    pub requests: u64,
    /// Request sent → its frame read by the shard.
    pub to_shard: Spread,
    /// → the reply ready: lookup and, for a stored block, the disk read.
    pub at_shard: Spread,
    /// → the reply's header at the client: queued behind other replies, packets, wake-ups.
    pub to_first_byte: Spread,
    /// → the last byte received and checked.
    pub transfer: Spread,
    /// Issue → done.
    pub total: Spread,
}

impl Timeline {
    /// A collector that keeps nothing until armed.
    pub fn new() -> Timeline {
        Timeline::default()
    }

    /// The layer to install in the global subscriber: it sees only timeline marks.
    pub fn layer<S: Subscriber + for<'a> LookupSpan<'a>>(&self) -> impl Layer<S> + Send + Sync + 'static {
        Collector(self.inner.clone()).with_filter(filter_fn(|m| m.target() == cv_net::timeline::TARGET))
    }

    /// Forgets earlier marks and keeps the coming ones.
    pub fn arm(&self) {
        self.inner.marks.lock().unwrap_or_else(PoisonError::into_inner).clear();
        self.inner.armed.store(true, Ordering::SeqCst);
    }

    /// Stops keeping marks and joins those kept into stages; `None` if no request has all
    /// five marks (for example when the worker runs in another process).
    pub fn take(&self) -> Option<Stages> {
        self.inner.armed.store(false, Ordering::SeqCst);
        let marks = std::mem::take(&mut *self.inner.marks.lock().unwrap_or_else(PoisonError::into_inner));
        stages(&marks)
    }
}

/// Joins marks by (port, request id) into stage durations.
fn stages(marks: &[Mark]) -> Option<Stages> {
    let mut by_req: HashMap<(u16, u64), [Option<Instant>; 5]> = HashMap::new();
    for m in marks {
        by_req.entry((m.port, m.req)).or_default()[m.stage as usize] = Some(m.at);
    }
    let mut cols: [Vec<f64>; 5] = Default::default();
    for t in by_req.values() {
        let [Some(issue), Some(arrived), Some(ready), Some(first), Some(done)] = *t else { continue };
        let us = |a: Instant, b: Instant| b.saturating_duration_since(a).as_secs_f64() * 1e6;
        let row = [us(issue, arrived), us(arrived, ready), us(ready, first), us(first, done), us(issue, done)];
        for (c, v) in cols.iter_mut().zip(row) {
            c.push(v);
        }
    }
    if cols[0].is_empty() {
        return None;
    }
    let spread = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        Spread { p50_us: v[v.len() / 2], mean_us: v.iter().sum::<f64>() / v.len() as f64 }
    };
    let [mut a, mut b, mut c, mut d, mut e] = cols;
    Some(Stages {
        requests: a.len() as u64,
        to_shard: spread(&mut a),
        at_shard: spread(&mut b),
        to_first_byte: spread(&mut c),
        transfer: spread(&mut d),
        total: spread(&mut e),
    })
}

struct Collector(Arc<Inner>);

#[derive(Default)]
struct Fields {
    stage: Option<Stage>,
    port: Option<u16>,
    req: Option<u64>,
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "stage" {
            self.stage = Stage::parse(value);
        }
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        match field.name() {
            "port" => self.port = u16::try_from(value).ok(),
            "req" => self.req = Some(value),
            _ => {}
        }
    }

    fn record_debug(&mut self, _: &Field, _: &dyn std::fmt::Debug) {}
}

impl<S: Subscriber> Layer<S> for Collector {
    fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
        if !self.0.armed.load(Ordering::Relaxed) {
            return;
        }
        let at = Instant::now();
        let mut f = Fields::default();
        event.record(&mut f);
        let (Some(stage), Some(port), Some(req)) = (f.stage, f.port, f.req) else { return };
        let mut marks = self.0.marks.lock().unwrap_or_else(PoisonError::into_inner);
        if marks.len() < MAX_MARKS {
            marks.push(Mark { at, stage, port, req });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tracing_subscriber::layer::SubscriberExt;

    #[test]
    fn marks_are_joined_per_request_and_incomplete_ones_left_out() {
        let t0 = Instant::now();
        let at = |us: u64| t0 + Duration::from_micros(us);
        let mark = |us, stage, port, req| Mark { at: at(us), stage, port, req };
        let mut marks = Vec::new();
        // Two requests with the same id on different shards, and one without a shard mark.
        for (port, base, disk) in [(7000u16, 0u64, 100u64), (7001, 10, 300)] {
            marks.push(mark(base, Stage::Issue, port, 1));
            marks.push(mark(base + 20, Stage::Arrived, port, 1));
            marks.push(mark(base + 20 + disk, Stage::Ready, port, 1));
            marks.push(mark(base + 60 + disk, Stage::First, port, 1));
            marks.push(mark(base + 100 + disk, Stage::Done, port, 1));
        }
        marks.push(mark(0, Stage::Issue, 7000, 2));
        marks.push(mark(900, Stage::Done, 7000, 2));
        let s = stages(&marks).unwrap();
        assert_eq!(s.requests, 2);
        assert_eq!(s.to_shard, Spread { p50_us: 20.0, mean_us: 20.0 });
        assert_eq!((s.at_shard.mean_us, s.at_shard.p50_us), (200.0, 300.0));
        assert_eq!((s.to_first_byte.p50_us, s.transfer.p50_us), (40.0, 40.0));
        assert_eq!(s.total.mean_us, 300.0);
        assert_eq!(stages(&marks[10..]), None);
    }

    #[test]
    fn the_layer_keeps_marks_only_while_armed() {
        let t = Timeline::new();
        let sub = tracing_subscriber::registry().with(t.layer());
        tracing::subscriber::with_default(sub, || {
            let all = |req: u64| {
                for stage in [
                    cv_net::timeline::ISSUE,
                    cv_net::timeline::ARRIVED,
                    cv_net::timeline::READY,
                    cv_net::timeline::FIRST,
                    cv_net::timeline::DONE,
                ] {
                    cv_net::timeline_mark!(stage, 7000u16, req);
                }
            };
            all(1);
            t.arm();
            all(2);
            all(3);
            // Other targets are not marks.
            tracing::trace!(stage = cv_net::timeline::ISSUE, port = 7000u16, req = 4u64);
            let s = t.take().unwrap();
            assert_eq!(s.requests, 2);
            all(5);
            assert_eq!(t.take(), None, "disarmed by take");
        });
    }
}
