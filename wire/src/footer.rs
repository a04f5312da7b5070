//! Tail sizing: how many trailing bytes of a file hold its footer.
//!
//! The master caches each file's tail so that an engine's "open, read the footer" costs one round
//! trip. The tail must contain the whole footer of the columnar formats engines read; anything
//! else gets a configured default budget. Pure std, no allocation, never panics on garbage.

/// Bytes a caller should read from the end of a file before calling [`tail_len`]: large enough
/// that the footer itself is usually inside the same read, so a second read is rarely needed.
pub const PROBE_BYTES: u64 = 64 * 1024;

/// The fewest trailing bytes that always suffice to *decide* the tail length (ORC's postscript
/// is at most 255 bytes plus its one length byte; Parquet and StarRocks need 8 and 12).
pub const MIN_PROBE_BYTES: u64 = 256;

/// Parquet files end with the 4-byte magic `PAR1`.
pub const PARQUET_MAGIC: &[u8; 4] = b"PAR1";
/// StarRocks segment files end with the 4-byte magic `D0R1`.
pub const STARROCKS_MAGIC: &[u8; 4] = b"D0R1";
/// ORC postscripts carry the string "ORC" in protobuf field 8000.
pub const ORC_MAGIC: &[u8; 3] = b"ORC";

/// How many trailing bytes to read for a file of `file_len` bytes: `min(file_len, PROBE_BYTES)`.
pub fn probe_len(file_len: u64) -> u64 {
    file_len.min(PROBE_BYTES)
}

/// The file's tail length: Parquet → footer + 8, ORC → 1 + postscript + footer + metadata,
/// StarRocks segment → footer + 12, else `default_budget`. Always clamped to `file_len`.
///
/// `last` holds the final bytes of the file (at least [`MIN_PROBE_BYTES`], or the whole file if
/// smaller). A recognised trailer whose lengths exceed the file is treated as unknown.
pub fn tail_len(file_len: u64, last: &[u8], default_budget: u64) -> u64 {
    let known = parquet(last).or_else(|| starrocks(last)).or_else(|| orc(last)).filter(|&n| n <= file_len);
    known.unwrap_or(default_budget).min(file_len)
}

fn trailing<const N: usize>(last: &[u8], end_offset: usize) -> Option<[u8; N]> {
    let end = last.len().checked_sub(end_offset)?;
    let start = end.checked_sub(N)?;
    last.get(start..end)?.try_into().ok()
}

fn parquet(last: &[u8]) -> Option<u64> {
    if trailing::<4>(last, 0)? != *PARQUET_MAGIC {
        return None;
    }
    let footer = u32::from_le_bytes(trailing::<4>(last, 4)?);
    Some(u64::from(footer) + 8)
}

fn starrocks(last: &[u8]) -> Option<u64> {
    if trailing::<4>(last, 0)? != *STARROCKS_MAGIC {
        return None;
    }
    // Layout: footer | footer_len u32 LE | checksum u32 | "D0R1".
    let footer = u32::from_le_bytes(trailing::<4>(last, 8)?);
    Some(u64::from(footer) + 12)
}

fn orc(last: &[u8]) -> Option<u64> {
    let ps_len = usize::from(*last.last()?);
    if ps_len == 0 {
        return None;
    }
    let end = last.len() - 1;
    let ps = last.get(end.checked_sub(ps_len)?..end)?;
    let fields = OrcPostscript::parse(ps)?;
    if !fields.magic_ok {
        return None;
    }
    1u64.checked_add(ps_len as u64)?.checked_add(fields.footer_len)?.checked_add(fields.metadata_len)
}

#[derive(Debug, Default)]
struct OrcPostscript {
    footer_len: u64,
    metadata_len: u64,
    magic_ok: bool,
}

impl OrcPostscript {
    /// Walks the protobuf fields; unknown fields are skipped by wire type.
    fn parse(mut buf: &[u8]) -> Option<Self> {
        let mut out = Self::default();
        while !buf.is_empty() {
            let key = varint(&mut buf)?;
            let (field, wire) = (key >> 3, key & 7);
            match wire {
                0 => {
                    let v = varint(&mut buf)?;
                    match field {
                        1 => out.footer_len = v,
                        5 => out.metadata_len = v,
                        _ => {}
                    }
                }
                1 => buf = buf.get(8..)?,
                2 => {
                    let len = usize::try_from(varint(&mut buf)?).ok()?;
                    let bytes = buf.get(..len)?;
                    if field == 8000 {
                        out.magic_ok = bytes == ORC_MAGIC;
                    }
                    buf = &buf[len..];
                }
                5 => buf = buf.get(4..)?,
                _ => return None,
            }
        }
        Some(out)
    }
}

fn varint(buf: &mut &[u8]) -> Option<u64> {
    let mut v: u64 = 0;
    for i in 0..10 {
        let (&b, rest) = buf.split_first()?;
        *buf = rest;
        v |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEFAULT: u64 = 64 * 1024;

    fn put_varint(out: &mut Vec<u8>, mut v: u64) {
        while v >= 0x80 {
            out.push((v as u8) | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }

    /// A file shaped like a real Parquet file: "PAR1", data pages, thrift footer, len, "PAR1".
    fn parquet_file(data: usize, footer: usize) -> Vec<u8> {
        let mut f = b"PAR1".to_vec();
        f.extend(std::iter::repeat_n(0xAB, data));
        f.extend((0..footer).map(|i| (i % 251) as u8));
        f.extend((footer as u32).to_le_bytes());
        f.extend(b"PAR1");
        f
    }

    /// ORC: "ORC" header, stripes, metadata, footer, postscript protobuf, postscript length byte.
    fn orc_file(data: usize, metadata: u64, footer: u64) -> Vec<u8> {
        let mut ps = Vec::new();
        put_varint(&mut ps, 1 << 3);
        put_varint(&mut ps, footer);
        put_varint(&mut ps, 2 << 3); // compression = ZLIB
        put_varint(&mut ps, 1);
        put_varint(&mut ps, 3 << 3); // compressionBlockSize
        put_varint(&mut ps, 262_144);
        put_varint(&mut ps, (4 << 3) | 2); // version, packed [0, 12]
        put_varint(&mut ps, 2);
        ps.extend([0, 12]);
        put_varint(&mut ps, 5 << 3);
        put_varint(&mut ps, metadata);
        put_varint(&mut ps, 6 << 3); // writerVersion
        put_varint(&mut ps, 9);
        put_varint(&mut ps, (8000 << 3) | 2);
        put_varint(&mut ps, 3);
        ps.extend(b"ORC");
        let mut f = b"ORC".to_vec();
        f.extend(std::iter::repeat_n(7, data + (metadata + footer) as usize));
        f.extend(&ps);
        f.push(ps.len() as u8);
        f
    }

    fn starrocks_file(data: usize, footer: usize) -> Vec<u8> {
        let mut f = vec![1u8; data];
        f.extend(std::iter::repeat_n(9, footer));
        f.extend((footer as u32).to_le_bytes());
        f.extend(0xDEAD_BEEFu32.to_le_bytes());
        f.extend(b"D0R1");
        f
    }

    fn last(f: &[u8], n: usize) -> &[u8] {
        &f[f.len().saturating_sub(n)..]
    }

    #[test]
    fn parquet_tail_is_footer_plus_eight() {
        let f = parquet_file(100_000, 3_000);
        assert_eq!(tail_len(f.len() as u64, last(&f, 16 * 1024), DEFAULT), 3_008);
        // A footer larger than the probe still reports its full length.
        let f = parquet_file(200_000, 40_000);
        assert_eq!(tail_len(f.len() as u64, last(&f, 256), DEFAULT), 40_008);
    }

    #[test]
    fn orc_tail_is_postscript_footer_metadata() {
        let f = orc_file(50_000, 700, 1_234);
        let ps_len = u64::from(*f.last().unwrap());
        let got = tail_len(f.len() as u64, last(&f, 16 * 1024), DEFAULT);
        assert_eq!(got, 1 + ps_len + 1_234 + 700);
    }

    #[test]
    fn orc_without_magic_is_unknown() {
        let mut f = orc_file(100_000, 10, 20);
        let n = f.len();
        f[n - 2] = b'X'; // corrupts the "ORC" string at the end of the postscript
        assert_eq!(tail_len(n as u64, last(&f, 16 * 1024), DEFAULT), DEFAULT);
    }

    #[test]
    fn starrocks_tail_is_footer_plus_twelve() {
        let f = starrocks_file(300_000, 5_000);
        assert_eq!(tail_len(f.len() as u64, last(&f, 16 * 1024), DEFAULT), 5_012);
    }

    #[test]
    fn unknown_format_gets_default_clamped() {
        let f = vec![0x55u8; 1_000_000];
        assert_eq!(tail_len(f.len() as u64, last(&f, 16 * 1024), DEFAULT), DEFAULT);
        let small = vec![0x55u8; 100];
        assert_eq!(tail_len(100, &small, DEFAULT), 100);
        assert_eq!(tail_len(0, &[], DEFAULT), 0);
    }

    #[test]
    fn small_whole_file_is_clamped() {
        let f = parquet_file(10, 20);
        assert_eq!(tail_len(f.len() as u64, &f, DEFAULT), 28);
        assert!(28 <= f.len());
    }

    #[test]
    fn lying_footer_length_falls_back() {
        let mut f = parquet_file(10, 20);
        let n = f.len();
        f[n - 8..n - 4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(tail_len(n as u64, &f, DEFAULT), n as u64);
        assert_eq!(tail_len(n as u64, &f, 16), 16);
    }

    #[test]
    fn garbage_never_panics() {
        // Deterministic pseudo-random garbage, including short and magic-suffixed buffers.
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for len in 0..2_000usize {
            let mut buf = Vec::with_capacity(len);
            for _ in 0..len {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                buf.push(x as u8);
            }
            for magic in [&b""[..], b"PAR1", b"D0R1", b"\x05", b"\xff"] {
                let mut b = buf.clone();
                b.extend_from_slice(magic);
                let file_len = x % 10_000;
                let t = tail_len(file_len, &b, DEFAULT);
                assert!(t <= file_len);
            }
        }
    }

    #[test]
    fn probe_len_is_bounded() {
        assert_eq!(probe_len(10), 10);
        assert_eq!(probe_len(10 << 20), PROBE_BYTES);
        const { assert!(MIN_PROBE_BYTES <= PROBE_BYTES) };
    }
}
