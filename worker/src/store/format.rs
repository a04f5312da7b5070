//! Byte formats of the index log and the data-file header (see worker/STORE-FORMAT.md).
//!
//! Pure encode/decode, no I/O, so the formats can be tested against checked-in fixtures.

use super::damage::{IndexDamage, RecordFault};
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
/// Bytes of a REMOVE payload (tag, block id).
const REMOVE_LEN: usize = 9;
/// Bytes of a PIN payload (tag, block id, flag).
const PIN_LEN: usize = 10;

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

/// An index log up to its torn tail, if it has one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodedLog {
    /// Store id from the header.
    pub store_id: u64,
    /// Records in log order.
    pub records: Vec<IndexRecord>,
    /// Bytes of header plus whole, valid records; anything after is a torn tail.
    pub valid_len: u64,
    /// What is wrong with the first record of the torn tail, when there is one.
    pub torn: Option<RecordFault>,
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

/// Decodes an index log (STORE-FORMAT.md, "Reading"). The first record that does not read
/// ends the log: it is a torn tail, reported in `torn` and left for the caller to cut, only if
/// a crash can have left it (`RecordFault::torn_write_can_leave`) and no intact record starts
/// at any byte after it. Anything else is [`ErrorKind::Damaged`], naming the record's offset.
pub fn decode_index(bytes: &[u8]) -> Result<DecodedLog> {
    let store_id = decode_index_header(bytes)?;
    let mut pos = INDEX_HEADER_LEN;
    let mut records = Vec::new();
    let mut torn = None;
    while pos < bytes.len() {
        match decode_at(bytes, pos) {
            Ok((rec, next)) => {
                records.push(rec);
                pos = next;
            }
            Err(fault) => {
                let next_intact = next_intact(bytes, pos);
                if next_intact.is_some() || !fault.torn_write_can_leave() {
                    let next_intact = next_intact.map(|n| n as u64);
                    return Err(StoreError::damaged(IndexDamage {
                        file: None,
                        offset: pos as u64,
                        fault,
                        next_intact,
                    }));
                }
                torn = Some(fault);
                break;
            }
        }
    }
    Ok(DecodedLog { store_id, records, valid_len: pos as u64, torn })
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

/// The record whose frame starts at `pos` and where the next one starts, or what is wrong.
fn decode_at(bytes: &[u8], pos: usize) -> std::result::Result<(IndexRecord, usize), RecordFault> {
    let left = bytes.len() - pos;
    let Some(frame) = bytes.get(pos..pos + FRAME_LEN) else {
        return Err(RecordFault::ShortFrame { left: left as u64 });
    };
    let len32 = le_u32(&frame[0..4]);
    let len = len32 as usize;
    if len == 0 || len > MAX_PAYLOAD {
        return Err(RecordFault::BadLength { len: len32 });
    }
    let Some(payload) = bytes.get(pos + FRAME_LEN..pos + FRAME_LEN + len) else {
        return Err(RecordFault::PastEnd { len: len32, left: (left - FRAME_LEN) as u64 });
    };
    let (stored, computed) = (le_u32(&frame[4..8]), crc32fast::hash(payload));
    if stored != computed {
        return Err(RecordFault::BadCrc { stored, computed });
    }
    Ok((parse_payload(payload)?, pos + FRAME_LEN + len))
}

/// The first byte offset after `bad` at which an intact record starts. Every offset is tried,
/// since a bad length gives no next boundary; a frame whose tag and length disagree is passed
/// over before its crc32 is computed, so a long garbage tail costs little.
fn next_intact(bytes: &[u8], bad: usize) -> Option<usize> {
    (bad + 1..bytes.len()).find(|&at| shape_fits(bytes, at) && decode_at(bytes, at).is_ok())
}

/// Whether the frame at `at` has a known tag and a length that fits it (necessary, not enough).
fn shape_fits(bytes: &[u8], at: usize) -> bool {
    let Some(head) = bytes.get(at..at + FRAME_LEN + 1) else { return false };
    let len = le_u32(&head[0..4]) as usize;
    match head[FRAME_LEN] {
        TAG_REMOVE => len == REMOVE_LEN,
        TAG_PIN => len == PIN_LEN,
        TAG_ADD => {
            let k = at + FRAME_LEN + ADD_FIXED_LEN - 4;
            bytes.get(k..k + 4).is_some_and(|k| len == ADD_FIXED_LEN + 4 * le_u32(k) as usize)
        }
        _ => false,
    }
}

fn parse_payload(p: &[u8]) -> std::result::Result<IndexRecord, RecordFault> {
    let tag = p[0];
    let size = RecordFault::BadSize { tag, len: p.len() as u32 };
    let mut r = Reader(&p[1..]);
    let rec = match tag {
        TAG_ADD => {
            let (mut b, pinned) = parse_add(&mut r).ok_or(size)?;
            b.pinned = flag(pinned)?;
            if !block_record_is_sane(&b) {
                return Err(RecordFault::BadGeometry);
            }
            IndexRecord::Add(b)
        }
        TAG_REMOVE => IndexRecord::Remove { block_id: r.u64().ok_or(size)? },
        TAG_PIN => {
            let block_id = r.u64().ok_or(size)?;
            IndexRecord::Pin { block_id, pinned: flag(r.u8().ok_or(size)?)? }
        }
        _ => return Err(RecordFault::BadKind { tag }),
    };
    if r.0.is_empty() { Ok(rec) } else { Err(size) }
}

/// An ADD's fields after its tag, and its pinned byte (checked by the caller, to name it).
fn parse_add(r: &mut Reader<'_>) -> Option<(BlockRecord, u8)> {
    let block_id = r.u64()?;
    let dir = u16::from_le_bytes(r.take(2)?.try_into().ok()?);
    let offset = r.u64()?;
    let len = r.u64()?;
    let alloc_len = r.u64()?;
    let pinned = r.u8()?;
    let chunk_size = r.u32()?;
    let n = r.u32()? as usize;
    let crcs = (0..n).map(|_| r.u32()).collect::<Option<Vec<u32>>>()?;
    Some((BlockRecord { block_id, dir, offset, len, alloc_len, pinned: false, chunk_size, crcs }, pinned))
}

fn flag(value: u8) -> std::result::Result<bool, RecordFault> {
    match value {
        0 => Ok(false),
        1 => Ok(true),
        _ => Err(RecordFault::BadFlag { value }),
    }
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

    fn log_of(recs: &[IndexRecord]) -> Vec<u8> {
        let mut log = encode_index_header(42).to_vec();
        for r in recs {
            encode_record(r, &mut log);
        }
        log
    }

    fn three() -> Vec<IndexRecord> {
        vec![add(5), IndexRecord::Pin { block_id: 5, pinned: false }, IndexRecord::Remove { block_id: 5 }]
    }

    /// Offset of the second record of `three()` (after the header and the ADD of 2 crcs).
    const SECOND: usize = INDEX_HEADER_LEN + FRAME_LEN + ADD_FIXED_LEN + 8;
    /// Offset of the third record (after the PIN).
    const THIRD: usize = SECOND + FRAME_LEN + PIN_LEN;

    fn damage(bytes: &[u8]) -> IndexDamage {
        let e = decode_index(bytes).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Damaged, "{e}");
        assert!(!e.retryable());
        e.index_damage().expect("damage detail").clone()
    }

    #[test]
    fn roundtrip() {
        let recs = three();
        let log = log_of(&recs);
        let d = decode_index(&log).unwrap();
        assert_eq!((d.store_id, d.valid_len, d.torn), (42, log.len() as u64, None));
        assert_eq!(d.records, recs);
    }

    #[test]
    fn partial_last_record_is_a_torn_tail() {
        let recs = three();
        let log = log_of(&recs);
        for cut in [1, 3, FRAME_LEN, FRAME_LEN + REMOVE_LEN - 1] {
            let d = decode_index(&log[..log.len() - cut]).unwrap();
            assert_eq!(d.records, recs[..2], "cut {cut}");
            assert_eq!(d.valid_len as usize, THIRD);
            assert!(d.torn.is_some_and(RecordFault::torn_write_can_leave));
        }
    }

    #[test]
    fn flipped_byte_in_the_last_record_is_a_torn_tail() {
        let recs = three();
        // Every byte of the last record: length, crc and payload alike.
        for at in THIRD..THIRD + FRAME_LEN + REMOVE_LEN {
            let mut log = log_of(&recs);
            log[at] ^= 0x40;
            let d = decode_index(&log).unwrap_or_else(|e| panic!("byte {at}: {e}"));
            assert_eq!(d.records, recs[..2], "byte {at}");
            assert_eq!(d.valid_len as usize, THIRD);
        }
    }

    #[test]
    fn flipped_byte_before_intact_records_is_damage() {
        let recs = three();
        // Every byte of the middle record, and of the first, has intact records after it.
        for at in INDEX_HEADER_LEN..THIRD {
            let mut log = log_of(&recs);
            log[at] ^= 0x40;
            let d = damage(&log);
            let rec = if at < SECOND { INDEX_HEADER_LEN } else { SECOND };
            assert_eq!(d.offset as usize, rec, "byte {at}");
            assert!(d.next_intact.is_some_and(|n| n as usize > rec && n as usize <= THIRD), "byte {at}: {d:?}");
        }
        // What was wrong is named.
        let mut log = log_of(&recs);
        log[SECOND + FRAME_LEN + 3] ^= 1;
        assert!(matches!(damage(&log).fault, RecordFault::BadCrc { .. }));
        let mut log = log_of(&recs);
        log[SECOND..SECOND + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(damage(&log).fault, RecordFault::BadLength { len: u32::MAX });
        let mut log = log_of(&recs);
        log[SECOND..SECOND + 4].copy_from_slice(&1000u32.to_le_bytes());
        assert!(matches!(damage(&log).fault, RecordFault::PastEnd { len: 1000, .. }));
    }

    #[test]
    fn garbage_after_a_torn_record_is_still_torn() {
        let recs = three();
        let mut log = log_of(&recs[..2]);
        let whole = log.len();
        // A torn append: a frame, then zeros and noise where its payload would be.
        log.extend_from_slice(&300u32.to_le_bytes());
        log.extend_from_slice(&[0xAB; 4]);
        log.extend((0..200u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8));
        log.extend_from_slice(&[0; 64]);
        let d = decode_index(&log).unwrap();
        assert_eq!((d.records.as_slice(), d.valid_len as usize), (&recs[..2], whole));
    }

    /// A record whose crc32 matches was written so: no crash leaves it, even at the end.
    fn with_payload(payload: &[u8]) -> Vec<u8> {
        let mut log = log_of(&three()[..1]);
        log.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        log.extend_from_slice(&crc32fast::hash(payload).to_le_bytes());
        log.extend_from_slice(payload);
        log
    }

    #[test]
    fn wrong_record_with_a_good_crc_is_damage_even_last() {
        assert_eq!(damage(&with_payload(&[9, 1, 2])).fault, RecordFault::BadKind { tag: 9 });
        assert_eq!(damage(&with_payload(&[TAG_REMOVE, 1, 2])).fault, RecordFault::BadSize { tag: 2, len: 3 });
        assert_eq!(damage(&with_payload(&[TAG_REMOVE; 10])).fault, RecordFault::BadSize { tag: 2, len: 10 });
        let mut pin = vec![TAG_PIN];
        pin.extend_from_slice(&5u64.to_le_bytes());
        pin.push(2);
        assert_eq!(damage(&with_payload(&pin)).fault, RecordFault::BadFlag { value: 2 });
        let d = damage(&with_payload(&[9]));
        assert_eq!((d.offset as usize, d.next_intact), (SECOND, None));
    }

    #[test]
    fn damage_names_the_file_offset_and_fault() {
        let mut log = log_of(&three());
        log[SECOND + FRAME_LEN + 3] ^= 1;
        let e = decode_index(&log).unwrap_err().in_file(std::path::Path::new("/d/shard-0/blocks.index"));
        let d = e.index_damage().unwrap();
        assert_eq!(d.file.as_deref(), Some(std::path::Path::new("/d/shard-0/blocks.index")));
        let text = e.to_string();
        for part in ["damaged", "/d/shard-0/blocks.index", &format!("byte {SECOND}"), "bad crc"] {
            assert!(text.contains(part), "{text:?} lacks {part:?}");
        }
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
    fn insane_geometry_is_damage() {
        let mut log = encode_index_header(1).to_vec();
        let IndexRecord::Add(mut b) = add(1) else { unreachable!() };
        b.crcs.push(1); // 3 crcs for 2 chunks
        encode_record(&IndexRecord::Add(b), &mut log);
        assert_eq!(damage(&log).fault, RecordFault::BadGeometry);
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
