//! A FUSE mount of cv: every program that knows only files (DuckDB,
//! pyarrow, `cp`, fio) reads cv as a local directory.
//!
//! Reads go through the client SDK: `open` is the one-round-trip open whose
//! tail answers footer reads from memory; reads in a row switch to the
//! client's read-ahead; random reads go straight to the owning shard. The
//! kernel keeps a file's pages across opens while its version is unchanged.
//! Writes in order stream to cv's write-once files; any other edit (writes
//! at other offsets, truncation to any size) is made to a local staged
//! copy, published as a new version at flush, fsync and close.
//! fuse/README.md lists every POSIX operation cv does not offer and the
//! errno it gives.

mod attr;
mod attr_cache;
mod config;
mod data;
mod errno;
mod error;
mod fs;
mod inodes;
mod meta;
mod mount;
mod order;
mod pages;
mod paths;
mod process;
mod read;
mod recent;
mod session;
mod stage;
mod staging;
mod stats;
mod volume;
mod write;

pub use config::MountOptions;
pub use errno::errno_of;
pub use error::{FuseError, FuseErrorKind};
pub use mount::{Mounted, mount};
pub use session::{ask_kernel, session_config};
pub use stats::{FuseOp, FuseSnapshot, FuseStats};
