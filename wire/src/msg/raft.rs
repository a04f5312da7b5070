//! Raft between masters (master/HA.md): openraft's three RPCs, master → master. Log entries
//! and snapshot bytes travel in the frame's raw payload (checksummed by the frame): entries
//! framed as in the Raft log file (`master/raft/src/codec.rs`), a snapshot chunk as its bytes.
//! Only a peer whose hello says `Master` may send these.

use super::{check_count, check_str};
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

/// A master's probe of another's client-facing address (master/HA.md, "A leader clients
/// cannot reach"): `from` counts this master as one that reached the answering one. Masters
/// only; it grants nothing.
#[derive(Archive, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct RaftProbe {
    pub from: u64,
}

/// Reply to [`RaftProbe`]: the answering master's id.
#[derive(Archive, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct RaftProbeOk {
    pub this: u64,
}

super::no_limits!(
    ArchivedRaftAppend,
    ArchivedRaftProbe,
    ArchivedRaftProbeOk,
    ArchivedRaftAppendOk,
    ArchivedRaftVoteReq,
    ArchivedRaftVoteOk,
    ArchivedRaftSnapshotOk
);

impl CheckLimits for ArchivedRaftSnapshot {
    fn check_limits(&self, l: &Limits) -> Result<(), WireError> {
        check_str(&self.snapshot_id, l, "raft_snapshot.snapshot_id")
    }
}

/// Changes the group of masters (`cvctl master add|remove`, admin only, on the leader): adds
/// master `id` at `addr` (as a learner until it has caught up, then a voter), or removes it.
/// Answered by `Done` once the new membership is committed.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct ChangeMasters {
    pub add: bool,
    pub id: u64,
    /// `host:port` of the added master (empty for a removal).
    pub addr: String,
}

/// Asks a master for the group as it knows it (`cvctl master list`).
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct ListMasters {}

/// One master of the group.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct MasterMember {
    pub id: u64,
    pub addr: String,
    /// A voter, or a learner still catching up.
    pub voter: bool,
}

/// Reply to [`ListMasters`]: the answering master, the leader it knows, every member.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct ListMastersOk {
    pub this: u64,
    pub leader: Option<u64>,
    pub members: Vec<MasterMember>,
    /// The last log index the answering master has applied (a master catching up after
    /// starting without files waits for the leader's).
    pub applied: Option<u64>,
}

super::no_limits!(ArchivedListMasters);

impl CheckLimits for ArchivedChangeMasters {
    fn check_limits(&self, l: &Limits) -> Result<(), WireError> {
        check_str(&self.addr, l, "change_masters.addr")
    }
}

impl CheckLimits for ArchivedListMastersOk {
    fn check_limits(&self, l: &Limits) -> Result<(), WireError> {
        check_count(self.members.len(), l, "list_masters_ok.members")?;
        for m in self.members.iter() {
            check_str(&m.addr, l, "list_masters_ok.members.addr")?;
        }
        Ok(())
    }
}
