//! Transport pieces shared by the client, the master and the worker:
//! mutual-TLS identities under a cluster CA ([`tls`]), QUIC transport settings
//! ([`quic`]), typed configuration values ([`config`]), per-request timeline marks
//! ([`timeline`]), and — behind the
//! `tokio` feature — request/response helpers over quinn streams ([`rpc`]).
//!
//! No async runtime is needed for anything but [`rpc`].

pub mod config;
mod error;
pub mod local;
pub mod masters;
pub mod quic;
pub mod timeline;
pub mod tls;

#[cfg(feature = "tokio")]
pub mod rpc;
#[cfg(feature = "tokio")]
mod udp;

pub use error::{NetError, NetErrorKind};
