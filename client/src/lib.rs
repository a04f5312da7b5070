//! The cv client SDK: applications embed it to open, read and write files.
//!
//! One QUIC connection per endpoint (the master, each worker shard), reused
//! and kept alive, many streams on it. `open` is one round trip that returns
//! the block map and the file's tail, so reading a footer costs nothing more.
//! Every call has a deadline and bounded retries for retryable errors.
//!
//! Modules, bottom-up; each uses only those below it (`tests/layers.rs` checks it):
//!
//! - `error`, `config`, `config_file`, `hint`: the error type, settings, the leader hint file.
//! - `retry`: a call's deadline and bounded retries.
//! - `pool`: one connection per address, and which addresses were unreachable.
//! - `block`: one block read on one connection (and the borrowed `ReadBlock` it sends).
//! - `leader`: asking the masters at once which one leads.
//! - `call`: every call to a master or a shard, under one request id with its retries.
//! - `local`: short-circuit reads of this host's workers (their hellos and leases are calls).
//! - `route`: the one path `File`, `Writer` and `Client` take: calls, and a block read that
//!   tries the local copy, then QUIC, then fails over to other copies or the object store.
//! - `file`, `writer`: an open file's reads, a new file's writes, over the route.
//! - `reader`: sequential reads of a `File`.
//! - `client`: the public handle and namespace operations; it owns the route.
//! - `heartbeats`: waiting, through a `Client`, until the workers have heard the master.
//!
//! See `client/README.md`.

mod block;
mod call;
mod client;
mod config;
mod config_file;
mod error;
mod file;
mod heartbeats;
mod hint;
mod leader;
mod local;
mod pool;
mod reader;
mod retry;
mod route;
mod writer;

pub use client::Client;
pub use config::ClientSettings;
pub use config_file::{ClientConfig, toml_error};
pub use cv_wire::msg::{Expect, FileKind, FileStatus, FreeOk, MountInfo, MountMode, UfsRef};
pub use error::{Error, ErrorKind, Result};
pub use file::File;
pub use heartbeats::wait_for_heartbeats;
pub use hint::LeaderHint;
pub use local::{LocalRead, LocalStats};
pub use reader::SequentialReader;
pub use writer::Writer;
