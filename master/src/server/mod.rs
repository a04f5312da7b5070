//! The master served over QUIC: a [`MasterService`] that answers every master-side message of
//! the wire catalogue from a [`cv_master_core::MasterCore`], and a [`MasterServer`] that binds the
//! endpoint, runs the lost-worker tick and shuts everything down cleanly. It runs on the
//! caller's tokio runtime; journal fsyncs are awaited, never blocked on. The request handlers
//! are the `req_*.rs` files (the core's `namespace.rs`, `mounts.rs` and `workers.rs` are its
//! methods, the state's are its transitions).

mod config;
mod convert;
mod deletes;
mod errors;
mod export;
mod metrics;
mod mount_policy;
mod push_deletes;
mod raft;
mod raft_members;
mod replay;
mod req_mounts;
mod req_namespace;
mod req_rename;
mod req_revoke;
mod req_workers;
mod request;
mod run;
mod service;
mod tail_check;
mod tails;
mod ufs;

pub use config::{PeerConfig, RaftReads, ServerConfig};
pub use errors::{ServerError, ServerErrorKind, code_of};
pub use mount_policy::MountPolicy;
pub use run::MasterServer;
pub use service::MasterService;
