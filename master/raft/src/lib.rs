//! The masters' Raft group (master/HA.md): openraft 0.9 over the core's journal records.
//! `RaftMaster` runs one master: its core is the state machine (`machine`), its records reach
//! the log through `raft_log`, the log and vote live in `log_store` (bytes in `codec`), the
//! snapshot in `snapshot`. The network between masters is injected.

mod batch;
pub mod codec;
mod fitness;
pub mod log_store;
mod machine;
mod node;
mod raft_log;
mod reach;
mod shared;
pub mod snapshot;
mod term_floor;

use std::io::Cursor;
use std::sync::Arc;

pub use node::{RaftMaster, RaftOptions, ReadMode};
pub use openraft;
pub use reach::Prober;
pub use term_floor::Refused;

/// One entry's payload (`batch.rs`): the leadership its records were built under, then journal
/// records laid end to end (`journal::encode_record` frames). Shared, not owned: the log store
/// hands out the same entry once per follower it replicates to, and a clone must not copy the
/// records.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Batch(pub Arc<[u8]>);

openraft::declare_raft_types!(
    /// cv's Raft types: u64 node ids, nodes named by their QUIC address.
    pub TypeConfig:
        D = Batch,
        R = u64,
        NodeId = u64,
        Node = openraft::BasicNode,
        Entry = openraft::Entry<TypeConfig>,
        SnapshotData = Cursor<Vec<u8>>,
);

pub type Entry = openraft::Entry<TypeConfig>;
pub type LogId = openraft::LogId<u64>;
pub type Vote = openraft::Vote<u64>;
