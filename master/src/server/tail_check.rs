//! The tail a writer sends with `complete` is what every open of the file then returns as its
//! last bytes, beside blocks read from the workers: if the two differed, two readers of one
//! version would see two contents. So the tail is kept only once it was read back from the
//! file's own blocks (each chunk checked by its shard against the crc stored when it was
//! written) and found the same. That runs after the completion, off the writer's path; an open
//! that comes in between waits for it (a few hundred microseconds, at most `READ_BACK`), so the
//! first open of a file just written still gets its footer in the same round trip. A tail that
//! differs is never kept, logged and counted (`cv_master_tails_refused`).

use super::export::Exporter;
use cv_master_core::MasterCore;
use cv_master_core::state::{FileState, InodeBody, State};
use cv_wire::msg::ReadBlock;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;

/// How long reading the tail back may take before it is given up (and the tail not kept).
const READ_BACK: Duration = Duration::from_secs(2);

/// What reading a tail back found.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    /// The blocks hold these bytes: keep it.
    Same,
    /// The blocks hold other bytes (where): never keep it.
    Differs(String),
    /// It could not be read back (why): do not keep it.
    Unread(String),
}

/// One piece of the tail: `len` bytes at `offset` of block `block_id` on the shard at `addr`.
struct Piece {
    block_id: u64,
    offset: u64,
    len: u64,
    addr: Option<SocketAddr>,
}

/// The read-backs under way, by file id, and what they found.
#[derive(Debug, Default)]
pub(super) struct TailChecks {
    /// Closed (the sender dropped) when the file's check is done.
    under_way: Mutex<HashMap<u64, watch::Receiver<()>>>,
    /// Tails that differed from their blocks, never kept.
    pub(super) refused: AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl TailChecks {
    /// After file `file_id` was completed at `version` (`length` long): reads back the bytes
    /// its writer sent as the tail (`tail`, from `tail_offset` on) and keeps the tail in the
    /// cache only if the blocks hold the same bytes.
    pub(super) fn start(
        self: &Arc<Self>,
        core: Arc<MasterCore>,
        exporter: Arc<Exporter>,
        (file_id, version, length): (u64, u64, u64),
        tail_offset: u64,
        tail: Vec<u8>,
    ) {
        let (done, rx) = watch::channel(());
        lock(&self.under_way).insert(file_id, rx);
        let me = self.clone();
        tokio::spawn(async move {
            match check(&core, &exporter, file_id, version, tail_offset, &tail).await {
                Verdict::Same => core.put_tail(file_id, version, length, &tail),
                Verdict::Differs(why) => {
                    me.refused.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(file = file_id, version, %why, "a writer's tail differs from its blocks; not kept");
                }
                Verdict::Unread(why) => {
                    tracing::info!(file = file_id, version, %why, "a tail not read back is not kept")
                }
            }
            lock(&me.under_way).remove(&file_id);
            drop(done);
        });
    }

    /// Waits, at most [`READ_BACK`], for the read-back of file `file_id`'s tail if one is under
    /// way; whether there was one.
    pub(super) async fn wait(&self, file_id: u64) -> bool {
        let Some(mut rx) = lock(&self.under_way).get(&file_id).cloned() else { return false };
        // Resolves (with an error) once the check drops its sender.
        let _ = tokio::time::timeout(READ_BACK, rx.changed()).await;
        true
    }
}

/// Compares `tail`, the bytes of file `file_id` at `version` from `tail_offset` on, with what
/// its blocks hold.
async fn check(
    core: &MasterCore,
    exporter: &Exporter,
    file_id: u64,
    version: u64,
    tail_offset: u64,
    tail: &[u8],
) -> Verdict {
    let Some(pieces) = core.inspect(|st| pieces(st, file_id, version, tail_offset, tail.len() as u64)) else {
        return Verdict::Unread(format!("file {file_id} is no longer complete at version {version}"));
    };
    let mut at = 0usize;
    for p in pieces {
        let Some(addr) = p.addr else { return Verdict::Unread(format!("block {} has no live copy", p.block_id)) };
        let req = ReadBlock {
            block_id: p.block_id,
            offset: p.offset,
            len: p.len,
            source: None,
            fill_only: false,
            verify: true,
            // A master's certificate is its right to read: no capability.
            cap: Default::default(),
        };
        let bytes = match tokio::time::timeout(READ_BACK, exporter.read(addr, &req)).await {
            Ok(Ok(b)) => b,
            Ok(Err(f)) => return Verdict::Unread(f.message),
            Err(_) => return Verdict::Unread(format!("block {} from {addr}: over {READ_BACK:?}", p.block_id)),
        };
        let want = &tail[at..at + p.len as usize];
        if bytes.len() != want.len() {
            return Verdict::Unread(format!("block {} gave {} bytes of {}", p.block_id, bytes.len(), p.len));
        }
        // One memcmp; the offset is looked for only when they differ.
        if bytes.as_ref() != want
            && let Some(i) = bytes.iter().zip(want).position(|(a, b)| a != b)
        {
            let off = tail_offset + (at + i) as u64;
            return Verdict::Differs(format!("the tail sent differs from block {} at file offset {off}", p.block_id));
        }
        at += p.len as usize;
    }
    Verdict::Same
}

/// The pieces of blocks that hold `[from, from + len)` of file `file_id`; `None` unless it is
/// complete at `version` and that range ends at its end.
fn pieces(st: &State, file_id: u64, version: u64, from: u64, len: u64) -> Option<Vec<Piece>> {
    let InodeBody::File(f) = &st.data().inodes.get(&file_id)?.body else { return None };
    if (f.state, f.version) != (FileState::Complete, version) || from.checked_add(len)? != f.length {
        return None;
    }
    let (end, mut start) = (from + len, 0u64);
    let mut out = Vec::new();
    for &block_id in &f.blocks {
        let info = st.data().blocks.get(&block_id)?;
        let (lo, hi) = (from.max(start), end.min(start + info.len));
        if lo < hi {
            let live = info.copies().find(|&w| st.worker(w).is_some_and(|w| w.live));
            let addr = live.and_then(|w| st.worker(w)?.shard_addr(info.shard));
            out.push(Piece { block_id, offset: lo - start, len: hi - lo, addr });
        }
        start += info.len;
    }
    Some(out)
}
