//! The Raft snapshot file (`raft-snapshot`) and the bytes sent to a follower in chunks: a
//! small frame naming what the snapshot covers, then the core's own snapshot format
//! (`journal::encode_snapshot`, which carries its own magic, version and checksum).
//!
//! `magic "CVMRSNAP" | version u16 | reserved u16 | meta_len u32 | meta | crc32 u32`, the crc
//! over everything before it; meta = `last_log_id (flag u32, term, node, index u64)
//! | membership log id (same) | membership (codec.rs)`.

use cv_master_core::journal::{decode_snapshot, encode_snapshot};
use cv_master_core::state::StateData;
use openraft::{BasicNode, SnapshotMeta, StoredMembership};

use crate::LogId;
use crate::codec::{CodecError, decode_membership, encode_membership, log_id, put_log_id, u32_at, u64_at};

pub const SNAPSHOT_MAGIC: [u8; 8] = *b"CVMRSNAP";
pub const SNAPSHOT_VERSION: u16 = 1;
const HEAD: usize = 16;
const LOG_ID_LEN: usize = 28;

pub type Meta = SnapshotMeta<u64, BasicNode>;

fn bad(msg: impl Into<String>) -> CodecError {
    CodecError(msg.into())
}

/// A snapshot id derived from what it covers (openraft only compares them for equality).
pub fn snapshot_id(last: Option<&LogId>) -> String {
    last.map_or_else(|| "empty".into(), |l| format!("{}-{}-{}", l.leader_id.term, l.leader_id.node_id, l.index))
}

/// The file's bytes for the state at record `seq`, covering the log up to `meta.last_log_id`.
pub fn encode(meta: &Meta, seq: u64, data: &StateData) -> Result<Vec<u8>, CodecError> {
    let mut m = Vec::new();
    put_log_id(&mut m, meta.last_log_id.as_ref());
    put_log_id(&mut m, meta.last_membership.log_id().as_ref());
    m.extend_from_slice(&encode_membership(meta.last_membership.membership()));
    let mut out = Vec::with_capacity(HEAD + m.len() + 4);
    out.extend_from_slice(&SNAPSHOT_MAGIC);
    out.extend_from_slice(&SNAPSHOT_VERSION.to_le_bytes());
    out.extend_from_slice(&[0; 2]);
    out.extend_from_slice(&(m.len() as u32).to_le_bytes());
    out.extend_from_slice(&m);
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    let core = encode_snapshot(seq, data).map_err(|e| bad(format!("encoding the core snapshot: {e}")))?;
    out.extend_from_slice(&core);
    Ok(out)
}

fn read_log_id(b: &[u8]) -> Option<LogId> {
    (u32_at(b, 0) == 1).then(|| log_id(u64_at(b, 4), u64_at(b, 12), u64_at(b, 20)))
}

/// The meta, the record seq and the state a snapshot file holds; any damage is an error.
pub fn decode(b: &[u8]) -> Result<(Meta, u64, StateData), CodecError> {
    let h =
        b.get(..HEAD).ok_or_else(|| bad(format!("raft snapshot of {} bytes is shorter than its header", b.len())))?;
    if h[..8] != SNAPSHOT_MAGIC {
        return Err(bad("raft snapshot magic mismatch"));
    }
    let version = u16::from_le_bytes([h[8], h[9]]);
    if version != SNAPSHOT_VERSION {
        return Err(bad(format!("raft snapshot format version {version}, this build reads {SNAPSHOT_VERSION}")));
    }
    let meta_len = u32_at(h, 12) as usize;
    let end = HEAD.checked_add(meta_len).filter(|&e| e + 4 <= b.len()).ok_or_else(|| bad("raft snapshot cut short"))?;
    if u32_at(b, end) != crc32fast::hash(&b[..end]) {
        return Err(bad("raft snapshot header checksum mismatch"));
    }
    let m = &b[HEAD..end];
    if m.len() < 2 * LOG_ID_LEN {
        return Err(bad("raft snapshot meta cut short"));
    }
    let last = read_log_id(&m[..LOG_ID_LEN]);
    let membership_id = read_log_id(&m[LOG_ID_LEN..2 * LOG_ID_LEN]);
    let membership = decode_membership(&m[2 * LOG_ID_LEN..])?;
    let (seq, data) = decode_snapshot(&b[end + 4..])
        .map_err(|e| bad(format!("raft snapshot's core part: {e}")))?
        .ok_or_else(|| bad("raft snapshot has no core part"))?;
    let meta = Meta {
        snapshot_id: snapshot_id(last.as_ref()),
        last_log_id: last,
        last_membership: StoredMembership::new(membership_id, membership),
    };
    Ok((meta, seq, data))
}
