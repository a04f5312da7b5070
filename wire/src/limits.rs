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

impl Default for Limits {
    fn default() -> Self {
        Limits::DEFAULT
    }
}
