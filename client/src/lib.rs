//! The cv client SDK: applications embed it to open, read and write files.
//!
//! One QUIC connection per endpoint (the master, each worker shard), reused
//! and kept alive, many streams on it. `open` is one round trip that returns
//! the block map and the file's tail, so reading a footer costs nothing more.
//! Every call has a deadline and bounded retries for retryable errors.

mod block;
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
