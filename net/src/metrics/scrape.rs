//! One scrape's metrics: a fresh prometheus-client registry filled from snapshots.

use super::histogram::{Buckets, LabeledHistograms};
use crate::quic_stats::QuicTotals;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Metric, Registry};
use std::sync::atomic::AtomicU64;

/// Labels of one series: `[("tier", "memory")]`.
pub type Labels = Vec<(String, String)>;

/// The metrics of one scrape, every name under the `cv_` prefix. Counters are set to the
/// totals a snapshot holds (a fresh counter incremented once by its value); the encoding adds
/// `_total` to counter names.
#[derive(Debug)]
pub struct Scrape {
    registry: Registry,
}

impl Default for Scrape {
    fn default() -> Self {
        Scrape { registry: Registry::with_prefix("cv") }
    }
}

impl Scrape {
    /// An empty scrape.
    pub fn new() -> Self {
        Scrape::default()
    }

    /// A counter with one value.
    pub fn counter(&mut self, name: &str, help: &str, v: u64) {
        let c: Counter<u64, AtomicU64> = Counter::default();
        c.inc_by(v);
        self.registry.register(name, help, c);
    }

    /// A gauge with one value.
    pub fn gauge(&mut self, name: &str, help: &str, v: i64) {
        let g: Gauge = Gauge::default();
        g.set(v);
        self.registry.register(name, help, g);
    }

    /// A gauge with a fractional value (a ratio).
    pub fn gauge_f64(&mut self, name: &str, help: &str, v: f64) {
        let g: Gauge<f64, AtomicU64> = Gauge::default();
        g.set(v);
        self.registry.register(name, help, g);
    }

    /// A counter with one series per label set.
    pub fn counters(&mut self, name: &str, help: &str, series: impl IntoIterator<Item = (Labels, u64)>) {
        let f: Family<Labels, Counter<u64, AtomicU64>> = Family::default();
        for (labels, v) in series {
            f.get_or_create(&labels).inc_by(v);
        }
        self.registry.register(name, help, f);
    }

    /// A gauge with one series per label set.
    pub fn gauges(&mut self, name: &str, help: &str, series: impl IntoIterator<Item = (Labels, i64)>) {
        let f: Family<Labels, Gauge> = Family::default();
        for (labels, v) in series {
            f.get_or_create(&labels).set(v);
        }
        self.registry.register(name, help, f);
    }

    /// A histogram counted elsewhere.
    pub fn histogram(&mut self, name: &str, help: &str, h: Buckets) {
        self.registry.register(name, help, h);
    }

    /// A histogram with one series per label set.
    pub fn histograms(&mut self, name: &str, help: &str, series: Vec<(Labels, Buckets)>) {
        self.registry.register(name, help, LabeledHistograms(series));
    }

    /// Any prometheus-client metric, e.g. a live `Histogram` the process observes into (a
    /// clone shares its counts).
    pub fn register(&mut self, name: &str, help: &str, metric: impl Metric) {
        self.registry.register(name, help, metric);
    }

    /// Requests told apart by `label`, with their latency: `cv_<name>_requests_total`,
    /// `cv_<name>_errors_total` and the histogram `cv_<name>_request_seconds`.
    /// [`Self::requests`] for counts kept as the object-store client keeps them: buckets
    /// bounded in ms, latencies summed in µs; `series` is (label value, counts, errors, µs).
    pub fn requests_ms<'a>(
        &mut self,
        name: &str,
        what: &str,
        label: &str,
        bounds_ms: &[u64],
        series: impl IntoIterator<Item = (&'a str, Vec<u64>, u64, u64)>,
    ) {
        let series: Vec<RequestSeries> = series
            .into_iter()
            .map(|(value, counts, errors, sum_us)| RequestSeries {
                value: value.to_owned(),
                counts,
                errors,
                sum_s: sum_us as f64 / 1e6,
            })
            .collect();
        let bounds: Vec<f64> = bounds_ms.iter().map(|&ms| ms as f64 / 1e3).collect();
        self.requests(name, what, label, &bounds, &series);
    }

    pub fn requests(&mut self, name: &str, what: &str, label: &str, bounds_s: &[f64], series: &[RequestSeries]) {
        let l = |s: &RequestSeries| labels(&[(label, &s.value)]);
        self.counters(
            &format!("{name}_requests"),
            &format!("{what} requests, by {label}"),
            series.iter().map(|s| (l(s), s.counts.iter().sum())),
        );
        self.counters(
            &format!("{name}_errors"),
            &format!("{what} requests that failed, by {label}"),
            series.iter().map(|s| (l(s), s.errors)),
        );
        let hists = series
            .iter()
            .map(|s| (l(s), Buckets { bounds: bounds_s.to_vec(), counts: s.counts.clone(), sum: s.sum_s }))
            .collect();
        self.histograms(&format!("{name}_request_seconds"), &format!("{what} request latency, by {label}"), hists);
    }

    /// The QUIC series of a server's connections, named `cv_quic_…`.
    pub fn quic(&mut self, t: &QuicTotals) {
        self.gauge("quic_connections", "QUIC connections open now", t.connections_open as i64);
        self.counter("quic_connections_accepted", "QUIC connections accepted", t.connections_total);
        self.counter("quic_streams", "Request streams the peers opened", t.streams_total);
        self.counter("quic_sent_packets", "UDP packets sent on QUIC connections", t.sent_packets);
        self.counter("quic_lost_packets", "QUIC packets declared lost", t.lost_packets);
        self.counter("quic_lost_bytes", "Bytes in lost QUIC packets", t.lost_bytes);
        self.counter("quic_congestion_events", "QUIC congestion window reductions", t.congestion_events);
        self.counter(
            "quic_retries",
            "QUIC Retry packets sent (many handshakes: new peers prove their address)",
            t.retries_total,
        );
    }

    /// The Prometheus text exposition (format 0.0.4).
    pub fn encode(&self) -> Result<String, std::fmt::Error> {
        let mut out = String::new();
        prometheus_client::encoding::prometheus_text::encode(&mut out, &self.registry)?;
        Ok(out)
    }
}

/// `[(key, value)]` as owned labels.
pub fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
}

/// One label value's requests for [`Scrape::requests`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RequestSeries {
    /// The label's value (e.g. `read`).
    pub value: String,
    /// Requests per latency bucket (not cumulative; one more than the bounds, for above).
    pub counts: Vec<u64>,
    /// Of those, failed.
    pub errors: u64,
    /// Sum of their latencies, in seconds.
    pub sum_s: f64,
}
