//! Limits checked on every frame before any allocation or deserialization.

/// Size and count limits for decoding. Peers may configure tighter ones.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Largest rkyv body accepted, in bytes.
    pub max_body: u32,
    /// Largest raw payload accepted, in bytes (a block or a tail).
    pub max_payload: u32,
    /// Longest path, in bytes.
    pub max_path: u32,
    /// Longest other string (names, hosts, urls, option values), in bytes.
    pub max_string: u32,
    /// Most entries in one list (directory page, block map, block report, options).
    pub max_list: u32,
}

impl Limits {
    /// Defaults: 16 MiB bodies (a block map of ~200k blocks), 64 MiB payloads,
    /// 4 KiB paths, 1M list entries.
    pub const DEFAULT: Limits =
        Limits { max_body: 16 << 20, max_payload: 64 << 20, max_path: 4096, max_string: 4096, max_list: 1 << 20 };
}

impl Limits {
    /// Bytes on the wire of the largest frame these limits admit: header, body, payload and
    /// the payload's trailing crc. A server lets one connection's unfinished requests buffer
    /// at most this much (see [`crate::FrameHeader::frame_len`]).
    pub const fn max_frame_len(&self) -> u64 {
        (crate::frame::HEADER_LEN + crate::frame::TRAILER_LEN) as u64 + self.max_body as u64 + self.max_payload as u64
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits::DEFAULT
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_largest_admitted_frame_fits_max_frame_len() {
        let l = Limits { max_body: 100, max_payload: 1000, ..Limits::DEFAULT };
        assert_eq!(l.max_frame_len(), 32 + 100 + 1000 + 4);
        assert_eq!(Limits::DEFAULT.max_frame_len(), (80 << 20) + 36);
    }
}
