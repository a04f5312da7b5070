//! Bytes of the Raft log and vote files (master/HA.md). Every frame carries a crc32; a torn
//! last frame is cut, a damaged frame with intact ones after it is an error.
//!
//! Log file: header `magic "CVMRLOG\0" | version u16 | reserved u16 | purged: flag u32,
//! term u64, node u64, index u64 | crc32 u32` (44 bytes), then frames
//! `len u32 | crc32 u32 | index u64 | term u64 | node u64 | kind u8 | reserved [7] | payload`
//! with `len` counting from `index`, and the crc over `len` and those bytes. Kinds: 0 blank,
//! 1 normal (payload: journal records), 2 membership (payload below).

use std::collections::{BTreeMap, BTreeSet};

use cv_master_core::journal::frame_crc;
use openraft::{BasicNode, CommittedLeaderId, EntryPayload, Membership};

use crate::{Batch, Entry, LogId, Vote};

pub const LOG_MAGIC: [u8; 8] = *b"CVMRLOG\0";
pub const VOTE_MAGIC: [u8; 8] = *b"CVMVOTE\0";
pub const VERSION: u16 = 1;
pub const HEADER_LEN: usize = 44;
const FRAME_FIXED: usize = 8 + 8 + 8 + 8 + 8;
/// Larger entries are refused when written and are corrupt when read.
pub const MAX_ENTRY: usize = 64 << 20;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodecError(pub String);

impl std::fmt::Display for CodecError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CodecError {}

fn bad(msg: impl Into<String>) -> CodecError {
    CodecError(msg.into())
}

pub(crate) fn put_log_id(out: &mut Vec<u8>, id: Option<&LogId>) {
    out.extend_from_slice(&u32::from(id.is_some()).to_le_bytes());
    let (t, n, i) = id.map_or((0, 0, 0), |l| (l.leader_id.term, l.leader_id.node_id, l.index));
    for v in [t, n, i] {
        out.extend_from_slice(&v.to_le_bytes());
    }
}

pub(crate) fn u64_at(b: &[u8], at: usize) -> u64 {
    b.get(at..at + 8).and_then(|s| s.try_into().ok()).map_or(0, u64::from_le_bytes)
}

pub(crate) fn u32_at(b: &[u8], at: usize) -> u32 {
    b.get(at..at + 4).and_then(|s| s.try_into().ok()).map_or(0, u32::from_le_bytes)
}

pub(crate) fn log_id(term: u64, node: u64, index: u64) -> LogId {
    LogId::new(CommittedLeaderId::new(term, node), index)
}

pub fn encode_header(purged: Option<&LogId>) -> Vec<u8> {
    let mut h = Vec::with_capacity(HEADER_LEN);
    h.extend_from_slice(&LOG_MAGIC);
    h.extend_from_slice(&VERSION.to_le_bytes());
    h.extend_from_slice(&[0; 2]);
    put_log_id(&mut h, purged);
    let crc = crc32fast::hash(&h);
    h.extend_from_slice(&crc.to_le_bytes());
    h
}

/// The purged log id the header records.
pub fn decode_header(b: &[u8]) -> Result<Option<LogId>, CodecError> {
    let h = b.get(..HEADER_LEN).ok_or_else(|| bad(format!("raft log shorter than its header ({} bytes)", b.len())))?;
    if h[..8] != LOG_MAGIC {
        return Err(bad("raft log magic mismatch"));
    }
    let version = u16::from_le_bytes([h[8], h[9]]);
    if version != VERSION {
        return Err(bad(format!("raft log format version {version}, this build reads {VERSION}")));
    }
    if u32_at(h, 40) != crc32fast::hash(&h[..40]) {
        return Err(bad("raft log header checksum mismatch"));
    }
    Ok((u32_at(h, 12) == 1).then(|| log_id(u64_at(h, 16), u64_at(h, 24), u64_at(h, 32))))
}

pub fn encode_membership(m: &Membership<u64, BasicNode>) -> Vec<u8> {
    let mut out = Vec::new();
    let configs = m.get_joint_config();
    out.extend_from_slice(&(configs.len() as u32).to_le_bytes());
    for c in configs {
        out.extend_from_slice(&(c.len() as u32).to_le_bytes());
        for id in c {
            out.extend_from_slice(&id.to_le_bytes());
        }
    }
    let nodes: Vec<_> = m.nodes().collect();
    out.extend_from_slice(&(nodes.len() as u32).to_le_bytes());
    for (id, n) in nodes {
        out.extend_from_slice(&id.to_le_bytes());
        out.extend_from_slice(&(n.addr.len() as u32).to_le_bytes());
        out.extend_from_slice(n.addr.as_bytes());
    }
    out
}

pub fn decode_membership(b: &[u8]) -> Result<Membership<u64, BasicNode>, CodecError> {
    let short = || bad("membership entry cut short");
    let mut at = 0;
    let mut take = |n: usize| -> Result<&[u8], CodecError> {
        let s = b.get(at..at + n).ok_or_else(short)?;
        at += n;
        Ok(s)
    };
    let count = |s: &[u8]| u32_at(s, 0) as usize;
    let n_configs = count(take(4)?);
    let mut configs = Vec::new();
    for _ in 0..n_configs.min(16) {
        let n = count(take(4)?);
        let mut set = BTreeSet::new();
        for _ in 0..n.min(1024) {
            set.insert(u64_at(take(8)?, 0));
        }
        configs.push(set);
    }
    let n_nodes = count(take(4)?);
    let mut nodes = BTreeMap::new();
    for _ in 0..n_nodes.min(1024) {
        let id = u64_at(take(8)?, 0);
        let len = count(take(4)?);
        let addr = std::str::from_utf8(take(len)?).map_err(|_| bad("membership address is not UTF-8"))?;
        nodes.insert(id, BasicNode::new(addr));
    }
    Ok(Membership::new(configs, nodes))
}

/// One framed entry, ready to append.
pub fn encode_entry(e: &Entry) -> Result<Vec<u8>, CodecError> {
    let (kind, payload): (u8, std::borrow::Cow<'_, [u8]>) = match &e.payload {
        EntryPayload::Blank => (0, (&[][..]).into()),
        EntryPayload::Normal(b) => (1, (&b.0[..]).into()),
        EntryPayload::Membership(m) => (2, encode_membership(m).into()),
    };
    let len = FRAME_FIXED - 8 + payload.len();
    if len > MAX_ENTRY {
        return Err(bad(format!("raft entry {} is {len} bytes, over the limit", e.log_id.index)));
    }
    let mut out = Vec::with_capacity(8 + len);
    out.extend_from_slice(&(len as u32).to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    for v in [e.log_id.index, e.log_id.leader_id.term, e.log_id.leader_id.node_id] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out.push(kind);
    out.extend_from_slice(&[0; 7]);
    out.extend_from_slice(&payload);
    let crc = frame_crc(&out[..4], &out[8..]);
    out[4..8].copy_from_slice(&crc.to_le_bytes());
    Ok(out)
}

/// The entry framed at `at` and where it ends; `None` if cut short or its checksum fails.
fn frame_at(b: &[u8], at: usize) -> Option<(Result<Entry, CodecError>, usize)> {
    let len = u32_at(b.get(at..at + 4)?, 0) as usize;
    if !(FRAME_FIXED - 8..=MAX_ENTRY).contains(&len) {
        return None;
    }
    let body = b.get(at + 8..at + 8 + len)?;
    if u32_at(b, at + 4) != frame_crc(&b[at..at + 4], body) {
        return None;
    }
    let id = log_id(u64_at(body, 8), u64_at(body, 16), u64_at(body, 0));
    let payload = &body[32..];
    let payload = match body[24] {
        0 => Ok(EntryPayload::Blank),
        1 => Ok(EntryPayload::Normal(Batch(payload.into()))),
        2 => decode_membership(payload).map(EntryPayload::Membership),
        k => Err(bad(format!("raft entry {} has unknown kind {k}", id.index))),
    };
    Some((payload.map(|payload| Entry { log_id: id, payload }), at + 8 + len))
}

/// Entries framed end to end for the network (a `RaftAppend` payload): exactly `count`
/// intact frames, nothing after them; anything else is an error.
pub fn decode_entries(b: &[u8], count: usize) -> Result<Vec<Entry>, CodecError> {
    let mut out = Vec::with_capacity(count.min(4096));
    let mut at = 0;
    while at < b.len() {
        let (entry, end) = frame_at(b, at).ok_or_else(|| bad(format!("raft entry frame at byte {at} is damaged")))?;
        out.push(entry?);
        at = end;
    }
    if out.len() != count {
        return Err(bad(format!("{} raft entries where {count} were announced", out.len())));
    }
    Ok(out)
}

/// What a log file holds: the purged id, the entries with their byte offsets, where the valid
/// bytes end.
#[derive(Debug)]
pub struct Scanned {
    pub purged: Option<LogId>,
    pub entries: Vec<(usize, Entry)>,
    pub valid_len: usize,
}

pub fn scan(b: &[u8]) -> Result<Scanned, CodecError> {
    let purged = decode_header(b)?;
    let mut entries: Vec<(usize, Entry)> = Vec::new();
    let mut at = HEADER_LEN;
    while at < b.len() {
        let Some((entry, end)) = frame_at(b, at) else {
            if (at + 1..b.len()).any(|i| frame_at(b, i).is_some()) {
                return Err(bad(format!("raft log frame at byte {at} is damaged but an intact one follows")));
            }
            tracing::warn!(offset = at, cut_bytes = b.len() - at, "raft log: torn tail cut off");
            break;
        };
        let entry = entry?;
        if let Some((_, prev)) = entries.last()
            && entry.log_id.index != prev.log_id.index + 1
        {
            return Err(bad(format!("raft log entry {} follows entry {}", entry.log_id.index, prev.log_id.index)));
        }
        entries.push((at, entry));
        at = end;
    }
    Ok(Scanned { purged, entries, valid_len: at.min(b.len()) })
}

/// The vote file: `magic "CVMVOTE\0" | version u16 | reserved u16 | term u64 | node u64 |
/// committed u32 | crc32 u32` (36 bytes).
pub fn encode_vote(v: &Vote) -> Vec<u8> {
    let mut out = Vec::with_capacity(36);
    out.extend_from_slice(&VOTE_MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&[0; 2]);
    out.extend_from_slice(&v.leader_id.term.to_le_bytes());
    out.extend_from_slice(&v.leader_id.node_id.to_le_bytes());
    out.extend_from_slice(&u32::from(v.committed).to_le_bytes());
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

pub fn decode_vote(b: &[u8]) -> Result<Option<Vote>, CodecError> {
    if b.is_empty() {
        return Ok(None);
    }
    if b.len() != 36 || b[..8] != VOTE_MAGIC || u32_at(b, 32) != crc32fast::hash(&b[..32]) {
        return Err(bad("raft vote file is damaged"));
    }
    let mut v = Vote::new(u64_at(b, 12), u64_at(b, 20));
    v.committed = u32_at(b, 28) == 1;
    Ok(Some(v))
}
