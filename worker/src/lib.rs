//! cv worker: shard-per-core block storage served over QUIC.
//!
//! Each shard is one pinned thread running one executor ([`cv_rt`]) that does both
//! its network I/O ([`cv_rt::quic`]) and its disk I/O ([`store`]). A small control-plane
//! thread registers the worker with the master and heartbeats; it reaches the
//! shards only by messages. A small tokio pool beside the shards fetches blocks the
//! shards do not hold from object storage. [`WorkerServer::start`] runs it all.

pub mod config;
mod control;
pub mod cores;
mod error;
mod server;
mod shard;
pub mod store;
mod ufs;

pub use config::{DataDirSettings, WatermarkSettings, WorkerSettings};
pub use error::{Result, WorkerError, WorkerErrorKind};
pub use server::{WorkerHandle, WorkerServer};
