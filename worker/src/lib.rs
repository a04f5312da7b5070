//! cv worker: shard-per-core block storage served over QUIC.
//!
//! Each shard is one pinned thread running one executor ([`cv_rt`]) that does both
//! its network I/O ([`cv_rt::quic`]) and its disk I/O ([`store`]). A small control-plane
//! thread registers the worker with the master and heartbeats; it reaches the
//! shards only by messages. A small tokio pool beside the shards fetches blocks the
//! shards do not hold from object storage. [`WorkerServer::start`] runs it all.

pub mod config;
#[allow(
    clippy::disallowed_types,
    clippy::disallowed_methods,
    reason = "the control plane runs on its own tokio thread, never a shard (clippy.toml bans tokio elsewhere)"
)]
mod control;
pub mod cores;
mod error;
#[allow(
    clippy::disallowed_types,
    clippy::disallowed_methods,
    reason = "the fetch pool runs on its own tokio threads beside the shards (OpenDAL needs tokio)"
)]
mod fetch;
mod keys;
mod local;
mod server;
mod shard;
pub mod store;
pub mod trace;

pub use config::{DataDirSettings, WatermarkSettings, WorkerSettings};
pub use error::{Result, WorkerError, WorkerErrorKind};
pub(crate) use keys::lock_keys;
pub use keys::{Keys, merge_keys};
pub use server::{WorkerHandle, WorkerServer};
