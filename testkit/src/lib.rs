//! Test-only helpers: a real S3-compatible HTTP server in-process ([`S3Server`], s3s + s3s-fs behind a
//! hyper accept loop, SigV4 required) and a delaying TCP proxy ([`DelayProxy`]) to simulate the round-trip
//! time of a remote object store. Both run on their own thread with their own tokio runtime, so they work
//! from sync tests and from any runtime. And [`rig`]: several hosts on one machine (network namespaces on
//! a bridge) and a cv cluster on them through the real `cvctl` binary. See `README.md`.

mod bytes;
mod classify;
mod proxy;
pub mod rig;
mod rt;
mod s3;
mod shaped;

pub use bytes::random_bytes;
pub use proxy::DelayProxy;
pub use s3::{Fault, Op, Request, S3Server};
