//! cv worker: shard-per-core block storage served over QUIC.
//!
//! Each shard is one pinned thread running one glommio executor that does both
//! its network I/O ([`quic`]) and its disk I/O ([`store`]).

pub mod quic;
pub mod store;
