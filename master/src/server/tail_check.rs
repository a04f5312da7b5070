//! The tail a writer sends with `complete` is what every open of the file then returns as its
//! last bytes, beside blocks read from the workers: if the two differed, two readers of one
//! version would see two contents. So before the file is completed the master reads that range
//! back from the file's own blocks (each chunk checked by its shard against the crc stored when
//! it was written) and refuses a completion whose tail differs. A shard that cannot be read in
//! time does not fail the write: the tail is then not kept, and readers read the footer from
//! the blocks, as after an eviction.

use super::errors::Fail;
use super::service::MasterService;
use cv_master_core::state::{InodeBody, State};
use cv_wire::ErrorCode;
use cv_wire::msg::ReadBlock;
use std::net::SocketAddr;
use std::time::Duration;

/// How long reading the tail back may take before it is given up (and not kept).
const READ_BACK: Duration = Duration::from_secs(2);

/// What to do with a tail sent with a completion.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Verdict {
    /// The blocks hold these bytes: keep it.
    Keep,
    /// It could not be read back (why): complete the file, but do not keep the tail.
    Drop(String),
}

/// One piece of the tail: `len` bytes at `offset` of block `block_id` on the shard at `addr`.
struct Piece {
    block_id: u64,
    offset: u64,
    len: u64,
    addr: Option<SocketAddr>,
}

/// Checks `tail`, the bytes of file `file_id` from `tail_offset` on, against its blocks of
/// lengths `lens` (in file order, as the completion states them). Refuses (`InvalidArgument`) a
/// tail that differs from what the blocks hold.
pub(super) async fn check(
    s: &MasterService,
    file_id: u64,
    lens: &[u64],
    tail_offset: u64,
    tail: &[u8],
) -> Result<Verdict, Fail> {
    let pieces = s.core.inspect(|st| pieces(st, file_id, lens, tail_offset, tail.len() as u64));
    let Some(pieces) = pieces else {
        // Not a file being written with these blocks: the completion itself says why.
        return Ok(Verdict::Drop("the file's blocks do not match the completion".into()));
    };
    let mut at = 0usize;
    for p in pieces {
        let Some(addr) = p.addr else { return Ok(Verdict::Drop(format!("block {} has no address", p.block_id))) };
        let req = ReadBlock {
            block_id: p.block_id,
            offset: p.offset,
            len: p.len,
            source: None,
            fill_only: false,
            verify: true,
        };
        let bytes = match tokio::time::timeout(READ_BACK, s.exporter.read(addr, &req)).await {
            Ok(Ok(b)) => b,
            Ok(Err(f)) => return Ok(Verdict::Drop(f.message)),
            Err(_) => {
                return Ok(Verdict::Drop(format!("reading block {} from {addr} took over {READ_BACK:?}", p.block_id)));
            }
        };
        let want = &tail[at..at + p.len as usize];
        if bytes.len() != want.len() {
            return Ok(Verdict::Drop(format!("block {} gave {} bytes of {}", p.block_id, bytes.len(), p.len)));
        }
        if let Some(i) = bytes.iter().zip(want).position(|(a, b)| a != b) {
            let off = tail_offset + (at + i) as u64;
            let msg = format!(
                "complete of file {file_id}: the tail sent differs from the file's block {} at file offset {off}",
                p.block_id
            );
            return Err(Fail::new(ErrorCode::InvalidArgument, msg));
        }
        at += p.len as usize;
    }
    Ok(Verdict::Keep)
}

/// The pieces of blocks that hold `[from, from + len)` of file `file_id`, whose blocks have
/// `lens`; `None` if the file is not being written with that many blocks of that length.
fn pieces(st: &State, file_id: u64, lens: &[u64], from: u64, len: u64) -> Option<Vec<Piece>> {
    let InodeBody::File(f) = &st.data().inodes.get(&file_id)?.body else { return None };
    if f.blocks.len() != lens.len() || from.checked_add(len)? != lens.iter().sum::<u64>() {
        return None;
    }
    let (end, mut start) = (from + len, 0u64);
    let mut out = Vec::new();
    for (&block_id, &blen) in f.blocks.iter().zip(lens) {
        let (lo, hi) = (from.max(start), end.min(start + blen));
        if lo < hi {
            let info = st.data().blocks.get(&block_id)?;
            let live = info.copies().find(|&w| st.worker(w).is_some_and(|w| w.live));
            let addr = live.and_then(|w| st.worker(w)?.shard_addr(info.shard));
            out.push(Piece { block_id, offset: lo - start, len: hi - lo, addr });
        }
        start += blen;
    }
    Some(out)
}
