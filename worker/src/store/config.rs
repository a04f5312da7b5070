//! Typed configuration of one shard's block store.

use std::path::PathBuf;

use super::error::{ErrorKind, Result, StoreError};

/// One data directory and the bytes this store may use in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataDir {
    /// Directory that holds this store's data file (created if missing).
    pub path: PathBuf,
    /// Bytes of block data preallocated in this directory (rounded down to 4 KiB).
    pub capacity_bytes: u64,
}

/// Disk-use watermarks in percent of capacity: above `high_pct`, evict down to `low_pct`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Watermarks {
    /// Start evicting when used bytes exceed this percentage of capacity.
    pub high_pct: u8,
    /// Evict until used bytes are at or below this percentage.
    pub low_pct: u8,
}

impl Default for Watermarks {
    fn default() -> Self {
        Self { high_pct: 95, low_pct: 85 }
    }
}

/// Configuration of one shard's store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreConfig {
    /// File-name stem of this store's files (the worker's is `blocks`): `<dir>/<name>.data` in
    /// every data dir, `<dir0>/<name>.index` in the first.
    pub name: String,
    /// Data directories; the index lives in the first.
    pub data_dirs: Vec<DataDir>,
    /// Largest block, bytes; a multiple of `chunk_size`.
    pub block_size: u64,
    /// Checksum and memory-tier unit, bytes; a multiple of 4 KiB.
    pub chunk_size: u32,
    /// Bytes of hot chunks kept in memory (0 disables the memory tier).
    pub memory_tier_bytes: u64,
    /// Disk-use watermarks.
    pub watermarks: Watermarks,
    /// Compact the index log once it exceeds this many bytes and twice its live size.
    pub index_compact_bytes: u64,
    /// fdatasync block data before its index record (off only for tests and benchmarks).
    pub sync_data: bool,
}

impl StoreConfig {
    /// The data file in directory `d`: `<dir>/<name>.data`.
    pub fn data_path(&self, d: &DataDir) -> PathBuf {
        d.path.join(format!("{}.data", self.name))
    }

    /// Every data file, in directory order.
    pub fn data_paths(&self) -> Vec<PathBuf> {
        self.data_dirs.iter().map(|d| self.data_path(d)).collect()
    }

    /// Defaults: 4 MiB blocks, 64 KiB chunks, 64 MiB memory tier, 95/85 % watermarks.
    pub fn new(name: impl Into<String>, data_dirs: Vec<DataDir>) -> Self {
        Self {
            name: name.into(),
            data_dirs,
            block_size: 4 << 20,
            chunk_size: 64 << 10,
            memory_tier_bytes: 64 << 20,
            watermarks: Watermarks::default(),
            index_compact_bytes: 4 << 20,
            sync_data: true,
        }
    }

    /// Checks the values that would make the store misbehave.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(StoreError::new(ErrorKind::InvalidArgument, m));
        if self.name.is_empty() || !self.name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_') {
            return bad(format!("store name {:?} must be [A-Za-z0-9_-]+", self.name));
        }
        if self.data_dirs.is_empty() || self.data_dirs.len() > u16::MAX as usize {
            return bad("need 1..=65535 data directories".into());
        }
        if self.chunk_size == 0 || !self.chunk_size.is_multiple_of(4096) {
            return bad(format!("chunk_size {} must be a positive multiple of 4096", self.chunk_size));
        }
        if self.block_size == 0 || !self.block_size.is_multiple_of(u64::from(self.chunk_size)) {
            return bad(format!(
                "block_size {} must be a positive multiple of chunk_size {}",
                self.block_size, self.chunk_size
            ));
        }
        let w = self.watermarks;
        if w.low_pct > w.high_pct || w.high_pct > 100 {
            return bad(format!("watermarks need low {} <= high {} <= 100", w.low_pct, w.high_pct));
        }
        for d in &self.data_dirs {
            if d.capacity_bytes < 4096 {
                return bad(format!("capacity of {} is below 4096 bytes", d.path.display()));
            }
        }
        Ok(())
    }
}
