//! The UFS fetch pool: a small tokio runtime on its own threads, beside the shards, that
//! fetches byte ranges of objects for blocks a shard does not hold.
//!
//! Shards never run tokio and never block: they hand a [`Fetch`] to the pool through a flume
//! channel ([`Fetcher::fetch`]) and await the answer with `recv_async`. The pool resolves a
//! mount point to a [`cv_ufs::Ufs`] by asking the master (`GetMount`, as a node), caches it
//! per mount (`mounts.rs`), and reads the range with the object's version.
//!
//! Files: `request.rs` what travels over the channel; `error.rs` fetch errors; `master.rs`
//! the pool's connection to the master; `mounts.rs` the mount cache; `pool.rs` the runtime.

mod error;
mod master;
mod mounts;
mod pool;
mod request;

pub(crate) use error::{FetchError, FetchErrorKind};
pub(crate) use master::MasterSpec;
pub(crate) use pool::{FetchPool, PoolSpec};
pub(crate) use request::Fetcher;
