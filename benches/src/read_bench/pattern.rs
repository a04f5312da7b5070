//! Verifiable bytes: every 8-byte word of a data set is a hash of its seed
//! and position, so any range can be regenerated and compared without
//! keeping a copy, and a read from the wrong place never matches.

/// splitmix64: cheap and well mixed, so neighbouring words differ.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Calls `f(dst_range, word_bytes)` for each 8-byte word overlapping
/// `[offset, offset + len)`, with the part of the word inside the range.
fn for_each_word(seed: u64, offset: u64, len: usize, mut f: impl FnMut(usize, &[u8]) -> bool) -> Option<usize> {
    let mut pos = 0;
    let key = mix(seed);
    while pos < len {
        let abs = offset + pos as u64;
        let word = mix(key ^ (abs / 8)).to_le_bytes();
        let start = (abs % 8) as usize;
        let n = (8 - start).min(len - pos);
        if !f(pos, &word[start..start + n]) {
            return Some(pos);
        }
        pos += n;
    }
    None
}

/// Fills `buf` with the bytes at `offset` of the data set `seed`.
pub fn fill(seed: u64, offset: u64, buf: &mut [u8]) {
    let len = buf.len();
    for_each_word(seed, offset, len, |pos, w| {
        buf[pos..pos + w.len()].copy_from_slice(w);
        true
    });
}

/// Position (within `buf`) of the first 8-byte word that differs from the
/// data set `seed` at `offset`, or `None` if `buf` is exactly those bytes.
pub fn first_mismatch(seed: u64, offset: u64, buf: &[u8]) -> Option<usize> {
    for_each_word(seed, offset, buf.len(), |pos, w| buf[pos..pos + w.len()] == *w)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unaligned_ranges_agree_with_the_whole() {
        let mut whole = vec![0u8; 1000];
        fill(7, 0, &mut whole);
        for (off, len) in [(0, 1), (3, 5), (5, 100), (8, 8), (997, 3), (1, 999)] {
            let mut part = vec![0u8; len];
            fill(7, off as u64, &mut part);
            assert_eq!(part, whole[off..off + len], "range {off}+{len}");
            assert_eq!(first_mismatch(7, off as u64, &part), None);
        }
    }

    #[test]
    fn wrong_place_seed_or_byte_is_caught() {
        let mut buf = vec![0u8; 4096];
        fill(1, 65536, &mut buf);
        assert_eq!(first_mismatch(1, 65536, &buf), None);
        assert_eq!(first_mismatch(2, 65536, &buf), Some(0), "other seed");
        assert_eq!(first_mismatch(1, 0, &buf), Some(0), "other offset");
        buf[1234] ^= 1;
        assert_eq!(first_mismatch(1, 65536, &buf), Some(1232), "flipped byte, word start");
    }
}
