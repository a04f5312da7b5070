//! An open file as its block reads see it: the block map the open returned, the object behind
//! it, and where blocks went since (a failover). Shared by every read of the file, borrowed by
//! each: a read clones neither a location nor the object's strings, and looks at the moved
//! blocks only after one has moved.

use crate::block::SourceRef;
use crate::call::Calls;
use crate::error::{Error, ErrorKind, Result};
use crate::local::ChunkMemo;
use cv_wire::msg::{BlockLoc, FileStatus, UfsRef};
use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// What an open returned, checked: the block map covers the file without holes and the tail
/// ends at its end.
#[derive(Debug)]
pub(crate) struct Opened {
    pub(crate) status: FileStatus,
    pub(crate) blocks: Vec<BlockLoc>,
    pub(crate) tail: Option<(u64, Vec<u8>)>,
    pub(crate) ufs: Option<UfsRef>,
}

impl Opened {
    pub(crate) fn new(
        status: FileStatus,
        blocks: Vec<BlockLoc>,
        tail: Option<(u64, Vec<u8>)>,
        ufs: Option<UfsRef>,
    ) -> Result<Opened> {
        let mut expect = 0;
        for b in &blocks {
            if b.offset != expect {
                return Err(Error::new(ErrorKind::Protocol, format!("block map has a hole at {expect}")));
            }
            expect += b.len;
        }
        if expect != status.length {
            return Err(Error::new(
                ErrorKind::Protocol,
                format!("block map covers {expect} bytes of a {}-byte file", status.length),
            ));
        }
        if let Some((off, bytes)) = &tail
            && off + bytes.len() as u64 != status.length
        {
            return Err(Error::new(ErrorKind::Protocol, "tail does not end at the file's end"));
        }
        Ok(Opened { status, blocks, tail, ufs })
    }
}

/// The blocks of one open file (see the module's doc).
#[derive(Debug)]
pub(crate) struct Blocks {
    status: FileStatus,
    list: Vec<BlockLoc>,
    /// The object behind a file cached from object storage.
    ufs: Option<UfsRef>,
    /// Blocks whose owner became unreachable after the open, where the master says they are
    /// now (by block id). Empty, and not locked, until a read fails over.
    moved: Mutex<HashMap<u64, BlockLoc>>,
    any_moved: AtomicBool,
    /// The chunks its last short-circuit reads ended in ([`ChunkMemo`]).
    memo: Arc<ChunkMemo>,
}

impl Blocks {
    pub(crate) fn new(status: FileStatus, list: Vec<BlockLoc>, ufs: Option<UfsRef>) -> Blocks {
        let (moved, any_moved) = (Mutex::new(HashMap::new()), AtomicBool::new(false));
        Blocks { status, list, ufs, moved, any_moved, memo: Arc::default() }
    }

    pub(crate) fn status(&self) -> &FileStatus {
        &self.status
    }

    /// The block map, as the open returned it.
    pub(crate) fn list(&self) -> &[BlockLoc] {
        &self.list
    }

    pub(crate) fn ufs(&self) -> Option<&UfsRef> {
        self.ufs.as_ref()
    }

    pub(crate) fn memo(&self) -> &Arc<ChunkMemo> {
        &self.memo
    }

    /// What a shard needs to fetch block `loc` if it lacks it, borrowed from the file.
    pub(crate) fn source(&self, loc: &BlockLoc) -> Option<SourceRef<'_>> {
        let object = self.ufs.as_ref()?;
        Some(SourceRef { object, offset: loc.offset, len: loc.len })
    }

    /// Where block `loc` is read now: where the open said (borrowed), or where a failover
    /// moved it.
    pub(crate) fn current<'a>(&self, loc: &'a BlockLoc) -> Cow<'a, BlockLoc> {
        if self.any_moved.load(Ordering::Acquire)
            && let Some(moved) = self.moved.lock().expect("moved lock").get(&loc.block_id)
        {
            return Cow::Owned(moved.clone());
        }
        Cow::Borrowed(loc)
    }

    /// Takes in the block map of the file opened again: every block that moved, not just the
    /// one a read looked for, so the file's other blocks on the same worker are read where
    /// they are now without each finding out for itself.
    pub(crate) fn moved_to(&self, again: &[BlockLoc]) {
        let mut moved = self.moved.lock().expect("moved lock");
        for (was, is) in self.list.iter().zip(again) {
            if was.block_id == is.block_id && (was.addr != is.addr || was.lost != is.lost) {
                moved.insert(is.block_id, is.clone());
            }
        }
        self.any_moved.store(!moved.is_empty(), Ordering::Release);
    }

    /// Reads of block `loc.block_id` go to `loc` from now on.
    pub(crate) fn remember(&self, loc: BlockLoc) {
        self.moved.lock().expect("moved lock").insert(loc.block_id, loc);
        self.any_moved.store(true, Ordering::Release);
    }

    /// Another worker to read block `loc` through when its owner is unreachable and the master
    /// cannot say where it is now: a shard of the same index (a block id names its shard
    /// index) on another worker this file's block map knows and that is not known to be down,
    /// chosen by the block id so every reader picks the same one. It fills the block from the
    /// object store (the read carries the source) and is adopted as its owner when it reports it.
    pub(crate) fn other_worker(&self, loc: &BlockLoc, calls: &Calls) -> Option<BlockLoc> {
        let shard = cv_wire::block_shard(loc.block_id);
        let mut others: Vec<&BlockLoc> = self
            .list
            .iter()
            .filter(|b| !b.lost && b.addr != loc.addr && cv_wire::block_shard(b.block_id) == shard)
            .filter(|b| calls.down_since(b.addr.socket_addr()).is_none())
            .collect();
        others.sort_by_key(|b| (b.addr.ip, b.addr.port));
        others.dedup_by_key(|b| b.addr);
        let pick =
            others.get((loc.block_id.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as usize % others.len().max(1))?;
        Some(BlockLoc { worker_id: pick.worker_id, shard: pick.shard, addr: pick.addr, ..loc.clone() })
    }

    /// Block `loc` read at its next copy: the first replica not known to be down (else the
    /// first), with the rest after it.
    pub(crate) fn next_copy(loc: &BlockLoc, calls: &Calls) -> BlockLoc {
        let mut rest = loc.replicas.clone();
        let i = rest.iter().position(|r| calls.down_since(r.addr.socket_addr()).is_none()).unwrap_or(0);
        let next = rest.remove(i);
        BlockLoc { worker_id: next.worker_id, addr: next.addr, replicas: rest, ..loc.clone() }
    }

    /// No copy of block `loc` can be reached now (retryable), naming the file and the block.
    pub(crate) fn unreachable(&self, loc: &BlockLoc, why: &str) -> Error {
        let (path, id, w) = (&self.status.path, loc.block_id, loc.worker_id);
        let range = format!("bytes {}..{}", loc.offset, loc.offset + loc.len);
        Error::new(ErrorKind::WorkerUnreachable, format!("{path}: block {id} ({range}), last on worker {w}: {why}"))
    }

    /// The error a read of block `loc` gets when its only copy is gone.
    pub(crate) fn data_loss(&self, loc: &BlockLoc, why: &str) -> Error {
        let (path, id, w) = (&self.status.path, loc.block_id, loc.worker_id);
        let range = format!("bytes {}..{}", loc.offset, loc.offset + loc.len);
        Error::new(ErrorKind::DataLoss, format!("{path}: block {id} ({range}) on worker {w}: {why}"))
    }
}
