//! cv master: the QUIC service around [`cv_master_core::MasterCore`].
//!
//! The state machine, journal and tail cache are `cv-master-core`, which does no I/O;
//! this crate adds the network (`server/`), object storage under mounts, the exporter and
//! the delete queue's drain, all on the caller's tokio runtime.

pub mod server;
