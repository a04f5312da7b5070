//! The block access trace file (worker/TRACE-FORMAT.md): what shards record when `[worker]
//! trace` is on, what `cvctl trace sim` replays. All integers little-endian.
//!
//! Header, 16 bytes: magic `CVTRACE\0` | version u16 = 1 | reserved u16 | CRC-32 of bytes
//! 0..12. Then chunks: `count u32 | crc u32` (CRC-32 of the records' bytes) and `count`
//! records of [`RECORD_LEN`] bytes. A chunk cut short at the end of the file (a crash while it
//! was written) ends the trace there; a chunk whose CRC does not match is an error.

use std::io::{self, Read, Write};

/// The file's first 8 bytes.
pub const MAGIC: [u8; 8] = *b"CVTRACE\0";
/// The format this build writes and reads.
pub const VERSION: u16 = 1;
/// Bytes of the header.
pub const HEADER_LEN: usize = 16;
/// Bytes of one record.
pub const RECORD_LEN: usize = 32;
/// Records in a chunk at most (a reader's bound on one allocation).
pub const MAX_CHUNK: u32 = 1 << 16;

/// What happened to one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Access {
    /// Read, served from the memory tier.
    MemoryHit = 1,
    /// Read, served from the disk tier.
    DiskHit = 2,
    /// Read of a block the shard did not hold: filled from object storage.
    Miss = 3,
    /// A block written through cv (its only copy until exported).
    Write = 4,
}

impl Access {
    fn from_u8(b: u8) -> Option<Access> {
        Some(match b {
            1 => Access::MemoryHit,
            2 => Access::DiskHit,
            3 => Access::Miss,
            4 => Access::Write,
            _ => return None,
        })
    }

    /// Whether the request was a read.
    pub fn is_read(self) -> bool {
        self != Access::Write
    }
}

/// One request at a shard.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record {
    /// Microseconds since the trace began.
    pub time_us: u64,
    /// The block.
    pub block: u64,
    /// The range asked for within it.
    pub offset: u32,
    pub len: u32,
    /// The block's length (what a whole-block fill fetches).
    pub block_len: u32,
    /// The shard that served it.
    pub shard: u16,
    pub access: Access,
}

impl Record {
    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.time_us.to_le_bytes());
        out.extend_from_slice(&self.block.to_le_bytes());
        out.extend_from_slice(&self.offset.to_le_bytes());
        out.extend_from_slice(&self.len.to_le_bytes());
        out.extend_from_slice(&self.block_len.to_le_bytes());
        out.extend_from_slice(&self.shard.to_le_bytes());
        out.push(self.access as u8);
        out.push(0);
    }

    fn decode(b: &[u8]) -> io::Result<Record> {
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap_or_default());
        let access = Access::from_u8(b[30]).ok_or_else(|| bad(format!("record kind {}", b[30])))?;
        Ok(Record {
            time_us: u64_at(0),
            block: u64_at(8),
            offset: u32_at(16),
            len: u32_at(20),
            block_len: u32_at(24),
            shard: u16::from_le_bytes([b[28], b[29]]),
            access,
        })
    }
}

fn bad(what: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("trace: {what}"))
}

/// The header of a new trace file.
pub fn header() -> [u8; HEADER_LEN] {
    let mut h = [0u8; HEADER_LEN];
    h[..8].copy_from_slice(&MAGIC);
    h[8..10].copy_from_slice(&VERSION.to_le_bytes());
    let crc = crc32fast::hash(&h[..12]);
    h[12..].copy_from_slice(&crc.to_le_bytes());
    h
}

/// Writes `records` as one chunk (at most [`MAX_CHUNK`] of them).
pub fn write_chunk(out: &mut impl Write, records: &[Record]) -> io::Result<()> {
    debug_assert!(records.len() <= MAX_CHUNK as usize);
    let mut body = Vec::with_capacity(records.len() * RECORD_LEN);
    records.iter().for_each(|r| r.encode(&mut body));
    out.write_all(&(records.len() as u32).to_le_bytes())?;
    out.write_all(&crc32fast::hash(&body).to_le_bytes())?;
    out.write_all(&body)
}

/// Reads a whole trace: the records of every complete chunk, in order.
pub fn read_all(mut input: impl Read) -> io::Result<Vec<Record>> {
    let mut h = [0u8; HEADER_LEN];
    input.read_exact(&mut h).map_err(|e| bad(format!("header: {e}")))?;
    if h[..8] != MAGIC {
        return Err(bad("not a cv trace (magic)".into()));
    }
    if u32::from_le_bytes([h[12], h[13], h[14], h[15]]) != crc32fast::hash(&h[..12]) {
        return Err(bad("header checksum".into()));
    }
    let version = u16::from_le_bytes([h[8], h[9]]);
    if version != VERSION {
        return Err(bad(format!("format version {version}; this build reads {VERSION}")));
    }
    let mut out = Vec::new();
    loop {
        let mut head = [0u8; 8];
        match read_full(&mut input, &mut head)? {
            0 => return Ok(out),
            8 => {}
            _ => return Ok(out), // a chunk header cut short: the writer stopped there
        }
        let count = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
        if count > MAX_CHUNK {
            return Err(bad(format!("chunk of {count} records")));
        }
        let mut body = vec![0u8; count as usize * RECORD_LEN];
        if read_full(&mut input, &mut body)? < body.len() {
            return Ok(out); // cut short
        }
        if crc32fast::hash(&body) != u32::from_le_bytes([head[4], head[5], head[6], head[7]]) {
            return Err(bad(format!("chunk checksum after {} records", out.len())));
        }
        for r in body.chunks_exact(RECORD_LEN) {
            out.push(Record::decode(r)?);
        }
    }
}

/// Reads until `buf` is full or the input ends; how much was read.
fn read_full(input: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match input.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(i: u64, access: Access) -> Record {
        Record { time_us: i * 10, block: i % 7, offset: 4096, len: 8192, block_len: 4 << 20, shard: 1, access }
    }

    #[test]
    fn records_round_trip_and_a_torn_tail_is_cut() {
        let mut f = header().to_vec();
        let a: Vec<Record> = (0..5).map(|i| rec(i, Access::DiskHit)).collect();
        let b: Vec<Record> = (5..8).map(|i| rec(i, Access::Miss)).collect();
        write_chunk(&mut f, &a).unwrap();
        write_chunk(&mut f, &b).unwrap();
        assert_eq!(read_all(&f[..]).unwrap(), [a.clone(), b].concat());
        // Cut mid-chunk: the complete chunks are read.
        assert_eq!(read_all(&f[..f.len() - 5]).unwrap(), a);
        // A flipped byte in a complete chunk is an error, not a wrong record.
        let mut bad = f.clone();
        bad[HEADER_LEN + 8 + 3] ^= 1;
        assert!(read_all(&bad[..]).unwrap_err().to_string().contains("checksum"));
        let mut other = f;
        other[8] = 9;
        assert!(read_all(&other[..]).is_err());
    }
}
