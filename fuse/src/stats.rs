//! Requests the kernel sent the mount, counted by kind, and the bytes it asked to read and
//! write: plain atomics the serving process (`cvctl fuse`) reads for `/metrics`.

use std::sync::atomic::{AtomicU64, Ordering};

/// What a request asked (the kinds that carry cv's work; the rest count as `other`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FuseOp {
    Lookup,
    Getattr,
    Setattr,
    Open,
    Read,
    Write,
    Flush,
    Release,
    Fsync,
    Readdir,
    Create,
    Mkdir,
    Remove,
    Rename,
    Other,
}

impl FuseOp {
    /// Every kind, in the order of [`FuseStats::snapshot`].
    pub const ALL: [FuseOp; 15] = [
        FuseOp::Lookup,
        FuseOp::Getattr,
        FuseOp::Setattr,
        FuseOp::Open,
        FuseOp::Read,
        FuseOp::Write,
        FuseOp::Flush,
        FuseOp::Release,
        FuseOp::Fsync,
        FuseOp::Readdir,
        FuseOp::Create,
        FuseOp::Mkdir,
        FuseOp::Remove,
        FuseOp::Rename,
        FuseOp::Other,
    ];

    /// Its name as a metric label.
    pub fn name(self) -> &'static str {
        match self {
            FuseOp::Lookup => "lookup",
            FuseOp::Getattr => "getattr",
            FuseOp::Setattr => "setattr",
            FuseOp::Open => "open",
            FuseOp::Read => "read",
            FuseOp::Write => "write",
            FuseOp::Flush => "flush",
            FuseOp::Release => "release",
            FuseOp::Fsync => "fsync",
            FuseOp::Readdir => "readdir",
            FuseOp::Create => "create",
            FuseOp::Mkdir => "mkdir",
            FuseOp::Remove => "remove",
            FuseOp::Rename => "rename",
            FuseOp::Other => "other",
        }
    }
}

/// The mount's counters.
#[derive(Debug, Default)]
pub struct FuseStats {
    ops: [AtomicU64; FuseOp::ALL.len()],
    read_bytes: AtomicU64,
    write_bytes: AtomicU64,
    attr_hits: AtomicU64,
    reads_at_once: AtomicU64,
    reused: AtomicU64,
    stale_reads: AtomicU64,
}

/// A copy of [`FuseStats`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FuseSnapshot {
    /// Requests per kind, as `(name, count)`.
    pub ops: Vec<(&'static str, u64)>,
    /// Bytes the kernel asked to read.
    pub read_bytes: u64,
    /// Bytes the kernel handed to write.
    pub write_bytes: u64,
    /// GETATTRs answered from attributes kept in memory ([`crate::attr_cache`]).
    pub attr_hits: u64,
    /// READs answered at once from a local worker's files, on the kernel's thread or the
    /// client's io thread, without the runtime ([`crate::read`]).
    pub reads_at_once: u64,
    /// Opens, opendirs and lookups answered from what the master said within `open_ttl`
    /// ([`crate::recent`]).
    pub reused: u64,
    /// READs refused with ESTALE: the version the descriptor reads was replaced or removed
    /// since its open (its blocks are gone, or an open here got a newer version).
    pub stale_reads: u64,
}

impl FuseStats {
    pub(crate) fn count(&self, op: FuseOp) {
        self.ops[op as usize].fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn read(&self, bytes: u64) {
        self.count(FuseOp::Read);
        self.read_bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    pub(crate) fn write(&self, bytes: u64) {
        self.count(FuseOp::Write);
        self.write_bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    pub(crate) fn attr_hit(&self) {
        self.attr_hits.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn read_at_once(&self) {
        self.reads_at_once.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn reused(&self) {
        self.reused.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn stale_read(&self) {
        self.stale_reads.fetch_add(1, Ordering::Relaxed);
    }

    /// The counters now.
    pub fn snapshot(&self) -> FuseSnapshot {
        FuseSnapshot {
            ops: FuseOp::ALL.iter().map(|&op| (op.name(), self.ops[op as usize].load(Ordering::Relaxed))).collect(),
            read_bytes: self.read_bytes.load(Ordering::Relaxed),
            write_bytes: self.write_bytes.load(Ordering::Relaxed),
            attr_hits: self.attr_hits.load(Ordering::Relaxed),
            reads_at_once: self.reads_at_once.load(Ordering::Relaxed),
            reused: self.reused.load(Ordering::Relaxed),
            stale_reads: self.stale_reads.load(Ordering::Relaxed),
        }
    }
}
