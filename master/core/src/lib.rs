//! cv master core: namespace, journal, tail cache, placement, with no I/O of its own.
//!
//! [`state::State`] is a pure state machine changed only by [`state::Mutation`] values;
//! [`journal`] makes those values durable (group commit) and recovers them; [`core::MasterCore`]
//! ties state, journal, placement and the tail cache together for the server. Time
//! ([`config::Clock`]) and storage ([`journal::Storage`]) are injected, so a seeded simulation
//! drives all of it; the QUIC service around it lives in `cv-master`.

pub mod config;
pub mod core;
pub mod error;
pub mod journal;
pub mod latency;
pub mod path;
pub mod placement;
pub mod state;
pub mod tail_cache;
pub mod tail_file;

pub use config::MasterConfig;
pub use core::{MasterCore, OpenFile, OpenStep, Tail};
pub use error::{Error, ErrorKind, Result};
pub use path::{CvPath, PathError};
