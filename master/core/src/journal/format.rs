//! Journal bytes (see master/core/FORMAT.md): a segment header, then records of
//! `len u32 | crc32 u32 | seq u64 | version u16 | reserved u16 | rkyv(Mutation)`.

use rkyv::rancor::Error as RkyvError;
use rkyv::util::AlignedVec;

use crate::error::{Error, ErrorKind, Result};
use crate::state::Mutation;

pub const JOURNAL_MAGIC: [u8; 8] = *b"CVMJRNL\0";
pub const JOURNAL_FORMAT_VERSION: u16 = 1;
/// Records of versions 1 to 3 (master/core/FORMAT.md) are still read.
pub const RECORD_VERSION: u16 = 4;
pub const HEADER_LEN: usize = 24;
/// len + crc.
pub const FRAME_LEN: usize = 8;
/// seq + version + reserved, before the rkyv bytes.
pub const PAYLOAD_PREFIX: usize = 12;
/// Larger records are refused when written and treated as corrupt when read.
pub const MAX_RECORD: usize = 64 << 20;

pub fn encode_header(first_seq: u64) -> [u8; HEADER_LEN] {
    let mut h = [0u8; HEADER_LEN];
    h[0..8].copy_from_slice(&JOURNAL_MAGIC);
    h[8..10].copy_from_slice(&JOURNAL_FORMAT_VERSION.to_le_bytes());
    h[12..20].copy_from_slice(&first_seq.to_le_bytes());
    let crc = crc32fast::hash(&h[0..20]);
    h[20..24].copy_from_slice(&crc.to_le_bytes());
    h
}

/// The header's first sequence number; typed errors for bad magic, version or checksum.
pub fn decode_header(bytes: &[u8]) -> Result<u64> {
    let Some(h) = bytes.get(..HEADER_LEN) else {
        return Err(Error::corrupt(format!("journal shorter than its header ({} bytes)", bytes.len())));
    };
    if h[0..8] != JOURNAL_MAGIC {
        return Err(Error::corrupt("journal magic mismatch"));
    }
    let version = u16::from_le_bytes([h[8], h[9]]);
    if version != JOURNAL_FORMAT_VERSION {
        return Err(Error::new(
            ErrorKind::UnsupportedVersion,
            format!("journal format version {version}, this build reads {JOURNAL_FORMAT_VERSION}"),
        ));
    }
    let crc = u32::from_le_bytes([h[20], h[21], h[22], h[23]]);
    if crc != crc32fast::hash(&h[0..20]) {
        return Err(Error::corrupt("journal header checksum mismatch"));
    }
    Ok(u64::from_le_bytes(h[12..20].try_into().unwrap_or_default()))
}

/// One framed record, ready to append.
pub fn encode_record(seq: u64, m: &Mutation) -> Result<Vec<u8>> {
    let body = rkyv::to_bytes::<RkyvError>(m)
        .map_err(|e| Error::new(ErrorKind::InvalidArgument, format!("encode mutation: {e}")))?;
    let payload_len = PAYLOAD_PREFIX + body.len();
    if payload_len > MAX_RECORD {
        return Err(Error::new(ErrorKind::InvalidArgument, "mutation too large for the journal"));
    }
    let mut out = Vec::with_capacity(FRAME_LEN + payload_len);
    out.extend_from_slice(&(payload_len as u32).to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&seq.to_le_bytes());
    out.extend_from_slice(&RECORD_VERSION.to_le_bytes());
    out.extend_from_slice(&[0; 2]);
    out.extend_from_slice(&body);
    let crc = frame_crc(&out[0..4], &out[FRAME_LEN..]);
    out[4..8].copy_from_slice(&crc.to_le_bytes());
    Ok(out)
}

/// The checksum of a `len u32 | crc32 u32 | payload` frame: over the length bytes and the
/// payload. The Raft log's frames (`cv-master-raft`) use the same rule.
pub fn frame_crc(len: &[u8], payload: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(len);
    h.update(payload);
    h.finalize()
}

/// A record whose frame and checksum are intact.
struct Framed<'a> {
    seq: u64,
    version: u16,
    body: &'a [u8],
    end: usize,
}

/// Checks the frame at `at`; `None` if it is cut short or its checksum fails.
fn frame_at(bytes: &[u8], at: usize) -> Option<Framed<'_>> {
    let len = u32::from_le_bytes(bytes.get(at..at + 4)?.try_into().ok()?) as usize;
    if !(PAYLOAD_PREFIX..=MAX_RECORD).contains(&len) {
        return None;
    }
    let crc = u32::from_le_bytes(bytes.get(at + 4..at + 8)?.try_into().ok()?);
    let payload = bytes.get(at + FRAME_LEN..at + FRAME_LEN + len)?;
    if crc != frame_crc(&bytes[at..at + 4], payload) {
        return None;
    }
    Some(Framed {
        seq: u64::from_le_bytes(payload[0..8].try_into().ok()?),
        version: u16::from_le_bytes([payload[8], payload[9]]),
        body: &payload[PAYLOAD_PREFIX..],
        end: at + FRAME_LEN + len,
    })
}

/// The records of a journal, in order, and where the valid bytes end.
#[derive(Debug)]
pub struct Scan {
    pub first_seq: u64,
    pub records: Vec<(u64, Mutation)>,
    /// Bytes up to the end of the last good record; anything after is a torn tail to cut.
    pub valid_len: usize,
    /// Bytes cut off after `valid_len`.
    pub cut: usize,
}

/// Reads a whole journal. A bad record with no intact record after it is a torn tail: cut off
/// (the caller truncates) with a warning. A bad record followed by intact ones means
/// acknowledged records would be lost, so that is a typed error instead.
pub fn scan(bytes: &[u8]) -> Result<Scan> {
    let first_seq = decode_header(bytes)?;
    let mut records = Vec::new();
    let mut at = HEADER_LEN;
    let mut expect = first_seq;
    while at < bytes.len() {
        let Some(f) = frame_at(bytes, at).filter(|f| f.seq == expect) else {
            if let Some(later) = (at + 1..bytes.len()).find(|&i| frame_at(bytes, i).is_some()) {
                return Err(Error::corrupt(format!(
                    "journal record at byte {at} (seq {expect}) is damaged but an intact record \
                     follows at byte {later}"
                )));
            }
            tracing::warn!(
                offset = at,
                cut_bytes = bytes.len() - at,
                next_seq = expect,
                "journal: torn or corrupt tail cut off"
            );
            break;
        };
        if !(1..=RECORD_VERSION).contains(&f.version) {
            return Err(Error::new(
                ErrorKind::UnsupportedVersion,
                format!("journal record version {} at seq {}", f.version, f.seq),
            ));
        }
        records.push((f.seq, decode_body(f.body, f.seq, f.version)?));
        expect += 1;
        at = f.end;
    }
    let valid_len = at.min(bytes.len());
    Ok(Scan { first_seq, records, valid_len, cut: bytes.len() - valid_len })
}

fn decode_body(body: &[u8], seq: u64, version: u16) -> Result<Mutation> {
    let mut aligned = AlignedVec::<16>::with_capacity(body.len());
    aligned.extend_from_slice(body);
    let bad = |e: RkyvError| Error::corrupt(format!("journal record seq {seq} (v{version}) does not decode: {e}"));
    if version == 1 {
        return rkyv::from_bytes::<crate::state::v1::Mutation, RkyvError>(&aligned).map(Into::into).map_err(bad);
    }
    if version == 2 {
        return rkyv::from_bytes::<crate::state::v2::Mutation, RkyvError>(&aligned).map(Into::into).map_err(bad);
    }
    if version == 3 {
        return rkyv::from_bytes::<crate::state::v3::Mutation, RkyvError>(&aligned).map(Into::into).map_err(bad);
    }
    rkyv::from_bytes::<Mutation, RkyvError>(&aligned).map_err(bad)
}

/// Records laid end to end with no segment header (a replicated log entry's payload, which
/// carries its own checksum too): every byte must belong to an intact record.
pub fn decode_records(bytes: &[u8]) -> Result<Vec<(u64, Mutation)>> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let Some(f) = frame_at(bytes, at) else {
            return Err(Error::corrupt(format!("record at byte {at} of a {}-byte batch is damaged", bytes.len())));
        };
        if !(1..=RECORD_VERSION).contains(&f.version) {
            return Err(Error::new(
                ErrorKind::UnsupportedVersion,
                format!("journal record version {} at seq {}", f.version, f.seq),
            ));
        }
        out.push((f.seq, decode_body(f.body, f.seq, f.version)?));
        at = f.end;
    }
    Ok(out)
}
