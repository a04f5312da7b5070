//! Transport pieces shared by the client, the master and the worker:
//! mutual-TLS identities under a cluster CA ([`tls`]) and the role a peer's certificate grants
//! ([`identity`]), the revoked certificates ([`revoked`]), QUIC transport settings
//! ([`quic`]), typed configuration values ([`config`]), per-request timeline marks
//! ([`timeline`]), totals over QUIC connections ([`quic_stats`]), and — behind the
//! `tokio` feature — request/response helpers over quinn streams ([`rpc`]) and dialing within
//! a deadline ([`dial`]); behind `metrics`,
//! the Prometheus `/metrics` endpoint every process serves ([`metrics`]).
//!
//! No async runtime is needed for anything but [`rpc`].

pub mod capability;
pub mod config;
#[cfg(feature = "tokio")]
pub mod conn_stats;
#[cfg(feature = "tokio")]
pub mod dial;
mod error;
pub mod identity;
pub mod local;
pub mod masters;
#[cfg(feature = "tokio")]
pub mod peers;
pub mod quic;
pub mod quic_stats;
pub mod revoked;
pub mod timeline;
pub mod tls;

#[cfg(feature = "metrics")]
pub mod metrics;
#[cfg(feature = "tokio")]
pub mod rpc;
#[cfg(feature = "tokio")]
mod udp;

pub use error::{NetError, NetErrorKind};
