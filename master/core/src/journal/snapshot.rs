//! Snapshot bytes (see master/core/FORMAT.md): a 32-byte header then rkyv(StateData).

use rkyv::rancor::Error as RkyvError;
use rkyv::util::AlignedVec;

use crate::error::{Error, ErrorKind, Result};
use crate::state::StateData;

pub const SNAPSHOT_MAGIC: [u8; 8] = *b"CVMSNAP\0";
/// Snapshots of versions 1 to 4 (master/core/FORMAT.md) are still read.
pub const SNAPSHOT_FORMAT_VERSION: u16 = 5;
pub const SNAPSHOT_HEADER_LEN: usize = 32;

/// `seq` is the last journal sequence number the state includes.
pub fn encode_snapshot(seq: u64, data: &StateData) -> Result<Vec<u8>> {
    let body = rkyv::to_bytes::<RkyvError>(data)
        .map_err(|e| Error::new(ErrorKind::InvalidArgument, format!("encode snapshot: {e}")))?;
    let mut out = Vec::with_capacity(SNAPSHOT_HEADER_LEN + body.len());
    out.extend_from_slice(&SNAPSHOT_MAGIC);
    out.extend_from_slice(&SNAPSHOT_FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&[0; 2]);
    out.extend_from_slice(&seq.to_le_bytes());
    out.extend_from_slice(&(body.len() as u64).to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&body);
    let crc = snapshot_crc(&out);
    out[28..32].copy_from_slice(&crc.to_le_bytes());
    Ok(out)
}

fn snapshot_crc(bytes: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&bytes[0..28]);
    h.update(&bytes[SNAPSHOT_HEADER_LEN..]);
    h.finalize()
}

/// Decodes a snapshot: `Ok(None)` when there is none (empty), typed errors otherwise.
pub fn decode_snapshot(bytes: &[u8]) -> Result<Option<(u64, StateData)>> {
    if bytes.is_empty() {
        return Ok(None);
    }
    if bytes.len() < SNAPSHOT_HEADER_LEN {
        return Err(Error::corrupt(format!("snapshot of {} bytes has no header", bytes.len())));
    }
    if bytes[0..8] != SNAPSHOT_MAGIC {
        return Err(Error::corrupt("snapshot magic mismatch"));
    }
    let version = u16::from_le_bytes([bytes[8], bytes[9]]);
    if !(1..=SNAPSHOT_FORMAT_VERSION).contains(&version) {
        return Err(Error::new(
            ErrorKind::UnsupportedVersion,
            format!("snapshot format version {version}, this build reads {SNAPSHOT_FORMAT_VERSION}"),
        ));
    }
    let word = |r: std::ops::Range<usize>| u64::from_le_bytes(bytes[r].try_into().unwrap_or_default());
    let seq = word(12..20);
    let len = word(20..28);
    if len != (bytes.len() - SNAPSHOT_HEADER_LEN) as u64 {
        return Err(Error::corrupt(format!("snapshot length {len} does not match the file")));
    }
    let crc = u32::from_le_bytes(bytes[28..32].try_into().unwrap_or_default());
    if crc != snapshot_crc(bytes) {
        return Err(Error::corrupt("snapshot checksum mismatch"));
    }
    let mut aligned = AlignedVec::<16>::with_capacity(bytes.len() - SNAPSHOT_HEADER_LEN);
    aligned.extend_from_slice(&bytes[SNAPSHOT_HEADER_LEN..]);
    let bad = |e: RkyvError| Error::corrupt(format!("snapshot (v{version}) does not decode: {e}"));
    use crate::state::{v1, v2, v3, v4};
    let from_v3 = |d: v3::StateData| StateData::from(v4::StateData::from(d));
    let data = if version == 1 {
        rkyv::from_bytes::<v1::StateData, RkyvError>(&aligned).map(|d| from_v3(d.into())).map_err(bad)?
    } else if version == 2 {
        rkyv::from_bytes::<v2::StateData, RkyvError>(&aligned).map(|d| from_v3(d.into())).map_err(bad)?
    } else if version == 3 {
        rkyv::from_bytes::<v3::StateData, RkyvError>(&aligned).map(from_v3).map_err(bad)?
    } else if version == 4 {
        rkyv::from_bytes::<v4::StateData, RkyvError>(&aligned).map(Into::into).map_err(bad)?
    } else {
        rkyv::from_bytes::<StateData, RkyvError>(&aligned).map_err(bad)?
    };
    Ok(Some((seq, data)))
}
