//! Test data: bytes that differ per seed and at every offset, so a misplaced or stale range
//! never compares equal by accident.

/// `len` pseudo-random bytes (xorshift64*), the same for the same seed.
pub fn random_bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        out.extend_from_slice(&x.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes());
    }
    out.truncate(len);
    out
}

#[cfg(test)]
mod tests {
    use super::random_bytes;

    #[test]
    fn seeds_and_lengths_give_their_own_bytes() {
        assert_eq!(random_bytes(100, 1), random_bytes(100, 1));
        assert_ne!(random_bytes(100, 1), random_bytes(100, 2));
        assert_eq!(random_bytes(13, 5), random_bytes(100, 5)[..13]);
        assert!(random_bytes(0, 1).is_empty());
    }
}
