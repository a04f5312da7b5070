//! The masters' Raft group (master/HA.md): openraft 0.9 over the core's journal records.
//! Built so far: the type config, the bytes of the log and vote files (`codec`) and the
//! durable log store on them (`log_store`).

pub mod codec;
pub mod log_store;

use std::io::Cursor;
use std::sync::Arc;

/// One entry's payload: journal records laid end to end (`journal::encode_record` frames).
/// Shared, not owned: the log store hands out the same entry once per follower it replicates
/// to, and a clone must not copy the records.
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
