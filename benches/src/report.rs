//! Side-by-side tables: every benchmark prints a baseline row, a cv row and
//! the ratio, as text or JSON.

use hdrhistogram::Histogram;
use serde::Serialize;

/// Latency summary of one series, in microseconds.
#[derive(Clone, Debug, Serialize)]
pub struct Latency {
    /// What was measured.
    pub name: String,
    /// Samples.
    pub count: u64,
    /// Percentiles in µs.
    pub p50_us: f64,
    /// 90th percentile.
    pub p90_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// 99.9th percentile.
    pub p999_us: f64,
    /// Largest sample.
    pub max_us: f64,
}

/// A histogram of nanosecond samples, 3 significant digits, up to 60 s.
pub fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("static histogram bounds")
}

impl Latency {
    /// Summarizes a histogram of nanosecond samples.
    pub fn from_hist(name: &str, h: &Histogram<u64>) -> Latency {
        let us = |q: f64| h.value_at_quantile(q) as f64 / 1000.0;
        Latency {
            name: name.into(),
            count: h.len(),
            p50_us: us(0.5),
            p90_us: us(0.9),
            p99_us: us(0.99),
            p999_us: us(0.999),
            max_us: h.max() as f64 / 1000.0,
        }
    }
}

/// Prints latency rows with each row's p50/p99 ratio to the first (baseline) row.
pub fn print_latency_table(title: &str, rows: &[Latency]) {
    println!("{title}");
    println!(
        "{:<34} {:>8} {:>10} {:>10} {:>10} {:>10} {:>10} {:>9} {:>9}",
        "series", "count", "p50 µs", "p90 µs", "p99 µs", "p999 µs", "max µs", "p50 ×", "p99 ×"
    );
    let base = rows.first().cloned();
    for r in rows {
        let (r50, r99) = match &base {
            Some(b) => (r.p50_us / b.p50_us.max(1e-9), r.p99_us / b.p99_us.max(1e-9)),
            None => (1.0, 1.0),
        };
        println!(
            "{:<34} {:>8} {:>10.1} {:>10.1} {:>10.1} {:>10.1} {:>10.1} {:>9.2} {:>9.2}",
            r.name, r.count, r.p50_us, r.p90_us, r.p99_us, r.p999_us, r.max_us, r50, r99
        );
    }
    println!("(× = ratio to the first row, measured in the same run)");
}
