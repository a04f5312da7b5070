//! Byte formats of the index log and the data-file header (see worker/STORE-FORMAT.md).
//!
//! Pure encode/decode, no I/O, so the formats can be tested against checked-in fixtures.

use super::error::{ErrorKind, Result, StoreError};

/// First 8 bytes of an index log.
pub const INDEX_MAGIC: [u8; 8] = *b"CVINDEX\0";
/// Index log format version written by this code.
pub const INDEX_VERSION: u32 = 1;
/// Bytes of the index log header.
pub const INDEX_HEADER_LEN: usize = 28;
/// Bytes of a record frame before its payload (length, crc32).
pub const FRAME_LEN: usize = 8;
/// Upper bound of one record payload; larger lengths are a torn or foreign tail.
pub const MAX_PAYLOAD: usize = ADD_FIXED_LEN + 4 * (1 << 20);
/// Bytes of an ADD payload before its crc array.
pub const ADD_FIXED_LEN: usize = 44;

/// First 8 bytes of a data file.
pub const DATA_MAGIC: [u8; 8] = *b"CVBLOCKS";
/// Data file format version written by this code.
pub const DATA_VERSION: u32 = 1;
/// Bytes reserved at the start of a data file for its header; extents start here.
pub const DATA_HEADER_LEN: u64 = 4096;

const TAG_ADD: u8 = 1;
const TAG_REMOVE: u8 = 2;
const TAG_PIN: u8 = 3;

/// Where one committed block lives and how to verify it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockRecord {
    /// Block id.
    pub block_id: u64,
    /// Index of the data directory in the config.
    pub dir: u16,
    /// Byte offset of the extent in the data file (4 KiB aligned).
    pub offset: u64,
    /// Bytes of block data.
    pub len: u64,
    /// Bytes of the extent (len rounded up to 4 KiB).
    pub alloc_len: u64,
    /// Never evicted while set.
    pub pinned: bool,
    /// Bytes per checksummed chunk.
    pub chunk_size: u32,
    /// crc32 (IEEE) of each chunk; the last chunk may be short.
    pub crcs: Vec<u32>,
}

/// One entry of the append-only index log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IndexRecord {
    /// A block was committed (replaces an older block of the same id).
    Add(BlockRecord),
    /// A block was deleted or evicted.
    Remove {
        /// Block id.
        block_id: u64,
    },
    /// A block's pinned flag changed.
    Pin {
        /// Block id.
        block_id: u64,
        /// New flag.
        pinned: bool,
    },
}

/// The readable prefix of an index log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodedLog {
    /// Store id from the header.
    pub store_id: u64,
    /// Records in log order.
    pub records: Vec<IndexRecord>,
    /// Bytes of header plus whole, valid records; anything after is a torn tail.
    pub valid_len: u64,
}

/// The index log header for `store_id`.
pub fn encode_index_header(store_id: u64) -> [u8; INDEX_HEADER_LEN] {
    let mut h = [0u8; INDEX_HEADER_LEN];
    h[0..8].copy_from_slice(&INDEX_MAGIC);
    h[8..12].copy_from_slice(&INDEX_VERSION.to_le_bytes());
    // 12..16 reserved, zero.
    h[16..24].copy_from_slice(&store_id.to_le_bytes());
    let crc = crc32fast::hash(&h[0..24]);
    h[24..28].copy_from_slice(&crc.to_le_bytes());
    h
}

/// Appends the framed encoding of `rec` to `out`.
pub fn encode_record(rec: &IndexRecord, out: &mut Vec<u8>) {
    let start = out.len();
    out.extend_from_slice(&[0u8; FRAME_LEN]);
    match rec {
        IndexRecord::Add(b) => {
            out.push(TAG_ADD);
            out.extend_from_slice(&b.block_id.to_le_bytes());
            out.extend_from_slice(&b.dir.to_le_bytes());
            out.extend_from_slice(&b.offset.to_le_bytes());
            out.extend_from_slice(&b.len.to_le_bytes());
            out.extend_from_slice(&b.alloc_len.to_le_bytes());
            out.push(u8::from(b.pinned));
            out.extend_from_slice(&b.chunk_size.to_le_bytes());
            out.extend_from_slice(&(b.crcs.len() as u32).to_le_bytes());
            for c in &b.crcs {
                out.extend_from_slice(&c.to_le_bytes());
            }
        }
        IndexRecord::Remove { block_id } => {
            out.push(TAG_REMOVE);
            out.extend_from_slice(&block_id.to_le_bytes());
        }
        IndexRecord::Pin { block_id, pinned } => {
            out.push(TAG_PIN);
            out.extend_from_slice(&block_id.to_le_bytes());
            out.push(u8::from(*pinned));
        }
    }
    let payload_len = (out.len() - start - FRAME_LEN) as u32;
    let crc = crc32fast::hash(&out[start + FRAME_LEN..]);
    out[start..start + 4].copy_from_slice(&payload_len.to_le_bytes());
    out[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
}

/// Decodes an index log; stops at the first record that is short, oversized, fails its
/// crc or does not parse (a torn tail), reporting how far the log is valid.
pub fn decode_index(bytes: &[u8]) -> Result<DecodedLog> {
    let store_id = decode_index_header(bytes)?;
    let mut pos = INDEX_HEADER_LEN;
    let mut records = Vec::new();
    while let Some((rec, next)) = decode_one(bytes, pos) {
        records.push(rec);
        pos = next;
    }
    Ok(DecodedLog { store_id, records, valid_len: pos as u64 })
}

fn decode_index_header(bytes: &[u8]) -> Result<u64> {
    let h = bytes.get(..INDEX_HEADER_LEN).ok_or_else(|| {
        StoreError::new(ErrorKind::Corrupt, format!("index log of {} bytes has no header", bytes.len()))
    })?;
    if h[0..8] != INDEX_MAGIC {
        return Err(StoreError::new(ErrorKind::Incompatible, "not a cv index log (bad magic)"));
    }
    if crc32fast::hash(&h[0..24]) != le_u32(&h[24..28]) {
        return Err(StoreError::new(ErrorKind::Corrupt, "index log header checksum mismatch"));
    }
    let version = le_u32(&h[8..12]);
    if version != INDEX_VERSION {
        return Err(StoreError::new(
            ErrorKind::Incompatible,
            format!("index log version {version}, this build reads {INDEX_VERSION}"),
        ));
    }
    Ok(le_u64(&h[16..24]))
}

fn decode_one(bytes: &[u8], pos: usize) -> Option<(IndexRecord, usize)> {
    let frame = bytes.get(pos..pos + FRAME_LEN)?;
    let len = le_u32(&frame[0..4]) as usize;
    if len == 0 || len > MAX_PAYLOAD {
        return None;
    }
    let payload = bytes.get(pos + FRAME_LEN..pos + FRAME_LEN + len)?;
    if crc32fast::hash(payload) != le_u32(&frame[4..8]) {
        return None;
    }
    let rec = parse_payload(payload)?;
    Some((rec, pos + FRAME_LEN + len))
}

fn parse_payload(p: &[u8]) -> Option<IndexRecord> {
    let mut r = Reader(p);
    let rec = match r.u8()? {
        TAG_ADD => {
            let block_id = r.u64()?;
            let dir = u16::from_le_bytes(r.take(2)?.try_into().ok()?);
            let offset = r.u64()?;
            let len = r.u64()?;
            let alloc_len = r.u64()?;
            let pinned = r.flag()?;
            let chunk_size = r.u32()?;
            let n = r.u32()? as usize;
            let crcs = (0..n).map(|_| r.u32()).collect::<Option<Vec<u32>>>()?;
            let b = BlockRecord { block_id, dir, offset, len, alloc_len, pinned, chunk_size, crcs };
            if !block_record_is_sane(&b) {
                return None;
            }
            IndexRecord::Add(b)
        }
        TAG_REMOVE => IndexRecord::Remove { block_id: r.u64()? },
        TAG_PIN => IndexRecord::Pin { block_id: r.u64()?, pinned: r.flag()? },
        _ => return None,
    };
    r.0.is_empty().then_some(rec)
}

/// Geometry checks that a crc cannot give: aligned extent that holds the data, one crc per chunk.
pub(crate) fn block_record_is_sane(b: &BlockRecord) -> bool {
    let cs = u64::from(b.chunk_size);
    cs != 0
        && cs.is_multiple_of(4096)
        && b.offset.is_multiple_of(4096)
        && b.alloc_len.is_multiple_of(4096)
        && b.alloc_len >= b.len
        && b.offset.checked_add(b.alloc_len).is_some()
        && b.crcs.len() as u64 == b.len.div_ceil(cs)
}

/// A data-file header: which store and directory slot it belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataHeader {
    /// Store id shared with the index log.
    pub store_id: u64,
    /// Index of the directory in the config.
    pub dir: u32,
    /// Bytes of extent space after the header.
    pub capacity: u64,
}

/// Encodes a data-file header (the first 36 of [`DATA_HEADER_LEN`] bytes; the rest is zero).
pub fn encode_data_header(h: &DataHeader) -> [u8; 36] {
    let mut b = [0u8; 36];
    b[0..8].copy_from_slice(&DATA_MAGIC);
    b[8..12].copy_from_slice(&DATA_VERSION.to_le_bytes());
    b[12..16].copy_from_slice(&h.dir.to_le_bytes());
    b[16..24].copy_from_slice(&h.store_id.to_le_bytes());
    b[24..32].copy_from_slice(&h.capacity.to_le_bytes());
    let crc = crc32fast::hash(&b[0..32]);
    b[32..36].copy_from_slice(&crc.to_le_bytes());
    b
}

/// Decodes a data-file header.
pub fn decode_data_header(b: &[u8]) -> Result<DataHeader> {
    let b = b.get(..36).ok_or_else(|| StoreError::new(ErrorKind::Corrupt, "data file header is short"))?;
    if b[0..8] != DATA_MAGIC {
        return Err(StoreError::new(ErrorKind::Incompatible, "not a cv data file (bad magic)"));
    }
    if crc32fast::hash(&b[0..32]) != le_u32(&b[32..36]) {
        return Err(StoreError::new(ErrorKind::Corrupt, "data file header checksum mismatch"));
    }
    let version = le_u32(&b[8..12]);
    if version != DATA_VERSION {
        return Err(StoreError::new(
            ErrorKind::Incompatible,
            format!("data file version {version}, this build reads {DATA_VERSION}"),
        ));
    }
    Ok(DataHeader { dir: le_u32(&b[12..16]), store_id: le_u64(&b[16..24]), capacity: le_u64(&b[24..32]) })
}

fn le_u32(b: &[u8]) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[..4]);
    u32::from_le_bytes(a)
}

fn le_u64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_le_bytes(a)
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Some(a)
    }
    fn u8(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }
    fn flag(&mut self) -> Option<bool> {
        match self.u8()? {
            0 => Some(false),
            1 => Some(true),
            _ => None,
        }
    }
    fn u32(&mut self) -> Option<u32> {
        Some(le_u32(self.take(4)?))
    }
    fn u64(&mut self) -> Option<u64> {
        Some(le_u64(self.take(8)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn add(id: u64) -> IndexRecord {
        IndexRecord::Add(BlockRecord {
            block_id: id,
            dir: 1,
            offset: 8192,
            len: 70000,
            alloc_len: 73728,
            pinned: true,
            chunk_size: 65536,
            crcs: vec![7, 9],
        })
    }

    #[test]
    fn roundtrip_and_torn_tail() {
        let mut log = encode_index_header(42).to_vec();
        let recs = vec![add(5), IndexRecord::Pin { block_id: 5, pinned: false }, IndexRecord::Remove { block_id: 5 }];
        for r in &recs {
            encode_record(r, &mut log);
        }
        let full = log.len() as u64;
        let d = decode_index(&log).unwrap();
        assert_eq!((d.store_id, d.valid_len), (42, full));
        assert_eq!(d.records, recs);
        // Cut inside the last record: it is dropped, the rest stays.
        let d = decode_index(&log[..log.len() - 3]).unwrap();
        assert_eq!(d.records, recs[..2]);
        // Flip a payload byte of the second record: it and everything after are dropped.
        let second = INDEX_HEADER_LEN + FRAME_LEN + ADD_FIXED_LEN + 8;
        log[second + 9] ^= 1;
        let d = decode_index(&log).unwrap();
        assert_eq!(d.records, recs[..1]);
        assert_eq!(d.valid_len as usize, second);
    }

    #[test]
    fn header_errors_are_typed() {
        let mut h = encode_index_header(1).to_vec();
        h[9] = 2;
        assert_eq!(decode_index(&h).unwrap_err().kind(), ErrorKind::Corrupt);
        assert_eq!(decode_index(b"garbage-garbage-garbage-garb").unwrap_err().kind(), ErrorKind::Incompatible);
        let mut v2 = encode_index_header(1);
        v2[8] = 2;
        let crc = crc32fast::hash(&v2[0..24]);
        v2[24..28].copy_from_slice(&crc.to_le_bytes());
        assert_eq!(decode_index(&v2).unwrap_err().kind(), ErrorKind::Incompatible);
    }

    #[test]
    fn insane_geometry_is_rejected() {
        let mut log = encode_index_header(1).to_vec();
        let IndexRecord::Add(mut b) = add(1) else { unreachable!() };
        b.crcs.push(1); // 3 crcs for 2 chunks
        encode_record(&IndexRecord::Add(b), &mut log);
        assert!(decode_index(&log).unwrap().records.is_empty());
    }

    #[test]
    fn data_header_roundtrip() {
        let h = DataHeader { store_id: 9, dir: 3, capacity: 1 << 30 };
        assert_eq!(decode_data_header(&encode_data_header(&h)).unwrap(), h);
        let mut b = encode_data_header(&h);
        b[20] ^= 0x10;
        assert_eq!(decode_data_header(&b).unwrap_err().kind(), ErrorKind::Corrupt);
    }
}
