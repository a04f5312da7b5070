//! The Prometheus `/metrics` endpoint every cv process serves (feature `metrics`).
//!
//! Metrics are gathered at scrape time: a process keeps the plain counters and atomics it
//! already has (the master core, the shards, the object store client), and each scrape turns
//! a snapshot of them into a fresh [`Scrape`], which prometheus-client encodes in the
//! Prometheus text format. So nothing on a hot path touches a registry, and the exposition is
//! never formatted by hand. [`serve`] answers `GET /metrics` over HTTP/1.1.

mod histogram;
mod scrape;
mod server;

pub use histogram::{Buckets, LabeledHistograms};
pub use prometheus_client;
pub use scrape::{Labels, RequestSeries, Scrape, labels};
pub use server::{Gather, MetricsServer, serve};
