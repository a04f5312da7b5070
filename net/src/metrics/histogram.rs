//! Histograms whose buckets were counted elsewhere (atomics in a crate that does not depend
//! on prometheus-client), encoded through prometheus-client's own histogram encoding.

use prometheus_client::encoding::{EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;

/// One histogram's counts: `counts[i]` observations fell at or below `bounds[i]` (and above
/// the bound before it); `counts` may have one more entry, for those above the last bound.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Buckets {
    /// Upper bounds, ascending (seconds, for latencies).
    pub bounds: Vec<f64>,
    /// Observations per bucket (not cumulative).
    pub counts: Vec<u64>,
    /// Sum of all observations.
    pub sum: f64,
}

impl Buckets {
    fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    fn pairs(&self) -> Vec<(f64, u64)> {
        (0..self.counts.len()).map(|i| (self.bounds.get(i).copied().unwrap_or(f64::INFINITY), self.counts[i])).collect()
    }
}

impl EncodeMetric for Buckets {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        encoder.encode_histogram::<NoLabelSet>(self.sum, self.count(), &self.pairs(), None)
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}

/// Several histograms of one metric, told apart by labels (e.g. object-store request kind).
#[derive(Clone, Debug, Default)]
pub struct LabeledHistograms(pub Vec<(Vec<(String, String)>, Buckets)>);

impl EncodeMetric for LabeledHistograms {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        for (labels, h) in &self.0 {
            h.encode(encoder.encode_family(labels)?)?;
        }
        Ok(())
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}
