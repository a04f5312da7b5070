//! The bytes of the `tails` file (master/core/FORMAT.md, "Tails"): the tail cache and the times
//! paths under cache-mode mounts were last checked at their store, kept across a restart so a
//! restarted master neither HEADs every object again nor reads every footer again.
//!
//! Only encoding and decoding live here (the core does no I/O); the master writes and reads the
//! file. It is a cache: a damaged record ends the read, and what came before it is used.

use crate::error::{Error, ErrorKind, Result};
use crate::state::InodeId;
use std::io::Write;
use std::sync::Arc;

pub const MAGIC: [u8; 8] = *b"CVTAILS\0";
pub const VERSION: u16 = 1;
const HEADER: usize = 16;
const RECORD_HEADER: usize = 12;
/// The largest tail the master keeps (the server's `MAX_TAIL`) plus its fixed fields.
pub const MAX_BODY: usize = (16 << 20) + 32;
/// Longest path a fresh record may carry.
const MAX_PATH: usize = 64 << 10;

const KIND_TAIL: u8 = 1;
const KIND_FRESH: u8 = 2;
const KIND_END: u8 = 0xFF;
const FLAG_MAIN: u8 = 1;

/// One record of the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TailRecord {
    /// The bytes of file `file_id` at `version` from `offset` to its end; `main` if it was in the
    /// tail cache's main queue (read more than once).
    Tail { file_id: InodeId, version: u64, offset: u64, main: bool, bytes: Arc<[u8]> },
    /// `path` was last checked against its object store at `checked_at_ms` (Unix time, ms).
    Fresh { path: String, checked_at_ms: u64 },
}

/// What a read of the file found.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Decoded {
    pub records: Vec<TailRecord>,
    /// Where the first damaged or missing record starts, if the file does not end with its end
    /// record: everything before it is in `records`.
    pub damaged_at: Option<u64>,
}

/// The file holding `records`, in memory (tests, fixtures).
pub fn encode(records: &[TailRecord]) -> Vec<u8> {
    let mut out = Vec::new();
    write(&mut out, records).expect("a Vec takes every write");
    out
}

/// Writes the file holding `records` to `out` as it goes: the tails are the cache's own bytes
/// (shared, not copied), so saving a cache of any size needs no buffer of that size.
pub fn write(out: &mut impl Write, records: &[TailRecord]) -> std::io::Result<()> {
    let mut header = [0u8; HEADER];
    header[..8].copy_from_slice(&MAGIC);
    header[8..10].copy_from_slice(&VERSION.to_le_bytes());
    let crc = crc32fast::hash(&header[..12]);
    header[12..16].copy_from_slice(&crc.to_le_bytes());
    out.write_all(&header)?;
    for r in records {
        match r {
            TailRecord::Tail { file_id, version, offset, main, bytes } => {
                let mut fields = [0u8; 24];
                fields[..8].copy_from_slice(&file_id.to_le_bytes());
                fields[8..16].copy_from_slice(&version.to_le_bytes());
                fields[16..].copy_from_slice(&offset.to_le_bytes());
                write_record(out, KIND_TAIL, if *main { FLAG_MAIN } else { 0 }, &fields, bytes)?;
            }
            TailRecord::Fresh { path, checked_at_ms } => {
                write_record(out, KIND_FRESH, 0, &checked_at_ms.to_le_bytes(), path.as_bytes())?;
            }
        }
    }
    write_record(out, KIND_END, 0, &(records.len() as u64).to_le_bytes(), &[])
}

/// One record whose body is `fields` followed by `rest`.
fn write_record(out: &mut impl Write, kind: u8, flags: u8, fields: &[u8], rest: &[u8]) -> std::io::Result<()> {
    let mut head = [0u8; RECORD_HEADER];
    head[0] = kind;
    head[1] = flags;
    head[4..8].copy_from_slice(&((fields.len() + rest.len()) as u32).to_le_bytes());
    let mut crc = crc32fast::Hasher::new();
    crc.update(&head[..8]);
    crc.update(fields);
    crc.update(rest);
    head[8..12].copy_from_slice(&crc.finalize().to_le_bytes());
    out.write_all(&head)?;
    out.write_all(fields)?;
    out.write_all(rest)
}

fn record_crc(head: &[u8], body: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(head);
    h.update(body);
    h.finalize()
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// Reads the file. A wrong magic, version or header checksum is an error (nothing in it can be
/// trusted); a damaged record ends the read with `damaged_at` set.
pub fn decode(bytes: &[u8]) -> Result<Decoded> {
    if bytes.len() < HEADER || bytes[..8] != MAGIC {
        return Err(Error::new(ErrorKind::CorruptData, "tails file: no CVTAILS header"));
    }
    if u32::from_le_bytes(bytes[12..16].try_into().expect("4 bytes")) != crc32fast::hash(&bytes[..12]) {
        return Err(Error::new(ErrorKind::CorruptData, "tails file: header checksum mismatch"));
    }
    let version = u16::from_le_bytes([bytes[8], bytes[9]]);
    if version != VERSION {
        return Err(Error::new(
            ErrorKind::UnsupportedVersion,
            format!("tails file version {version}; this build reads {VERSION}"),
        ));
    }
    let mut out = Decoded::default();
    let mut at = HEADER;
    while let Some(head) = bytes.get(at..at + RECORD_HEADER) {
        let len = u32::from_le_bytes(head[4..8].try_into().expect("4 bytes")) as usize;
        if len > MAX_BODY {
            break;
        }
        let Some(body) = bytes.get(at + RECORD_HEADER..at + RECORD_HEADER + len) else { break };
        if u32::from_le_bytes(head[8..12].try_into().expect("4 bytes")) != record_crc(&head[..8], body) {
            break;
        }
        let record = match head[0] {
            KIND_TAIL if len >= 24 => TailRecord::Tail {
                file_id: u64_at(body, 0),
                version: u64_at(body, 8),
                offset: u64_at(body, 16),
                main: head[1] & FLAG_MAIN != 0,
                bytes: body[24..].into(),
            },
            KIND_FRESH if len >= 8 && len - 8 <= MAX_PATH => match std::str::from_utf8(&body[8..]) {
                Ok(path) => TailRecord::Fresh { path: path.to_owned(), checked_at_ms: u64_at(body, 0) },
                Err(_) => break,
            },
            KIND_END
                if len == 8 && u64_at(body, 0) == out.records.len() as u64 && at + RECORD_HEADER + 8 == bytes.len() =>
            {
                return Ok(out);
            }
            _ => break,
        };
        out.records.push(record);
        at += RECORD_HEADER + len;
    }
    out.damaged_at = Some(at as u64);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<TailRecord> {
        vec![
            TailRecord::Tail { file_id: 7, version: 3, offset: 100, main: true, bytes: b"PAR1footer"[..].into() },
            TailRecord::Tail { file_id: 9, version: 1, offset: 0, main: false, bytes: Arc::from(&[][..]) },
            TailRecord::Fresh { path: "/lake/t/a.parquet".into(), checked_at_ms: 1_780_000_000_000 },
        ]
    }

    #[test]
    fn round_trip() {
        let d = decode(&encode(&sample())).unwrap();
        assert_eq!(d, Decoded { records: sample(), damaged_at: None });
        assert_eq!(decode(&encode(&[])).unwrap(), Decoded::default());
    }

    #[test]
    fn a_damaged_record_keeps_what_came_before_it() {
        let bytes = encode(&sample());
        // Flip a byte of the second record's body: the first record survives.
        let second = HEADER + RECORD_HEADER + 24 + 10;
        let mut bad = bytes.clone();
        bad[second + RECORD_HEADER + 3] ^= 0x40;
        let d = decode(&bad).unwrap();
        assert_eq!(d.records, sample()[..1]);
        assert_eq!(d.damaged_at, Some(second as u64));
        // Cut anywhere: a prefix of the records, never an invented one.
        for cut in HEADER..bytes.len() {
            let d = decode(&bytes[..cut]).unwrap();
            assert!(d.damaged_at.is_some(), "cut at {cut}");
            assert_eq!(d.records[..], sample()[..d.records.len()], "cut at {cut}");
        }
        // Bytes after the end record are damage too.
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(decode(&longer).unwrap().damaged_at.is_some());
    }

    #[test]
    fn a_bad_header_or_another_version_is_refused() {
        let bytes = encode(&sample());
        let mut bad = bytes.clone();
        bad[0] = b'X';
        assert_eq!(decode(&bad).unwrap_err().kind(), ErrorKind::CorruptData);
        let mut other = bytes.clone();
        other[8] = 2;
        let crc = crc32fast::hash(&other[..12]);
        other[12..16].copy_from_slice(&crc.to_le_bytes());
        assert_eq!(decode(&other).unwrap_err().kind(), ErrorKind::UnsupportedVersion);
        let mut crc_bad = bytes;
        crc_bad[13] ^= 1;
        assert_eq!(decode(&crc_bad).unwrap_err().kind(), ErrorKind::CorruptData);
    }
}
