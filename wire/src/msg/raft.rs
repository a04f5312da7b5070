//! Raft between masters (master/HA.md): openraft's three RPCs, master → master. Log entries
//! and snapshot bytes travel in the frame's raw payload (checksummed by the frame): entries
//! framed as in the Raft log file (`master/raft/src/codec.rs`), a snapshot chunk as its bytes.
//! Only a peer whose hello says `Master` may send these.

use super::check_str;
use crate::error::WireError;
use crate::kinds::CheckLimits;
use crate::limits::Limits;
use rkyv::{Archive, Deserialize, Serialize};

/// A log position: the leader (term, node) that wrote it and its index.
#[derive(Archive, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct RaftLogId {
    pub term: u64,
    pub node: u64,
    pub index: u64,
}

/// A vote: the term, the candidate or leader, and whether a quorum granted it.
#[derive(Archive, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct RaftVote {
    pub term: u64,
    pub node: u64,
    pub committed: bool,
}

/// AppendEntries; payload: `entries` framed log entries, end to end.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct RaftAppend {
    pub vote: RaftVote,
    pub prev: Option<RaftLogId>,
    pub commit: Option<RaftLogId>,
    pub entries: u32,
}

/// Reply to [`RaftAppend`]. `outcome`: 0 success, 1 partial success up to `matched`, 2 conflict
/// at `prev`, 3 a higher vote (`vote`) seen.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct RaftAppendOk {
    pub outcome: u8,
    pub matched: Option<RaftLogId>,
    pub vote: Option<RaftVote>,
}

/// RequestVote.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct RaftVoteReq {
    pub vote: RaftVote,
    pub last: Option<RaftLogId>,
}

/// Reply to [`RaftVoteReq`].
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct RaftVoteOk {
    pub vote: RaftVote,
    pub granted: bool,
    pub last: Option<RaftLogId>,
}

/// One chunk of a snapshot, at `offset`; payload: the chunk's bytes. `membership` is the
/// snapshot's membership as the Raft log frames it.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct RaftSnapshot {
    pub vote: RaftVote,
    pub last: Option<RaftLogId>,
    pub membership_log: Option<RaftLogId>,
    pub membership: Vec<u8>,
    pub snapshot_id: String,
    pub offset: u64,
    pub done: bool,
}

/// Reply to [`RaftSnapshot`].
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct RaftSnapshotOk {
    pub vote: RaftVote,
}

macro_rules! no_limits {
    ($($t:ty),*) => {$(
        impl CheckLimits for $t {
            fn check_limits(&self, _: &Limits) -> Result<(), WireError> {
                Ok(())
            }
        }
    )*};
}

no_limits!(ArchivedRaftAppend, ArchivedRaftAppendOk, ArchivedRaftVoteReq, ArchivedRaftVoteOk, ArchivedRaftSnapshotOk);

impl CheckLimits for ArchivedRaftSnapshot {
    fn check_limits(&self, l: &Limits) -> Result<(), WireError> {
        check_str(&self.snapshot_id, l, "raft_snapshot.snapshot_id")
    }
}
