//! The master served over QUIC: a [`MasterService`] that answers every master-side message of
//! the wire catalogue from a [`cv_master_core::MasterCore`], and a [`MasterServer`] that binds the
//! endpoint, runs the lost-worker tick and shuts everything down cleanly. It runs on the
//! caller's tokio runtime; journal fsyncs are awaited, never blocked on.

mod config;
mod convert;
mod deletes;
mod errors;
mod export;
mod metrics;
mod mounts;
mod namespace;
mod push_deletes;
mod raft;
mod rename;
mod replay;
mod request;
mod run;
mod service;
mod tail_check;
mod tails;
mod ufs;
mod workers;

pub use config::{PeerConfig, RaftReads, ServerConfig};
pub use errors::{ServerError, ServerErrorKind, code_of};
pub use run::MasterServer;
pub use service::MasterService;
