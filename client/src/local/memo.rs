//! The last few chunks an open file's short-circuit reads took from disk, checked, so that the
//! next read starting inside one does not read it again.
//!
//! A read takes whole chunks (their crcs cover whole chunks only), so a request that starts
//! or ends inside a chunk reads bytes nobody asked for. The kernel's read-ahead asks for a
//! file in windows of ~128 KiB that fall anywhere against the 64 KiB chunks, so each window
//! began inside the chunk the previous one ended in, and read it again: DuckDB's TPC-H with
//! the page cache dropped read 1.63× the bytes the mount asked for. Kept here, the chunk a
//! window ends in is the next window's first, from memory.
//!
//! The bytes are right for as long as the file is open: a block id names one content for good
//! (a file version's blocks are never written again), and they were checked against the
//! chunk's crc under a live lease when read.

use bytes::Bytes;
use std::sync::Mutex;

/// Chunks kept per open file: two readers of one file (an engine's threads, each with the
/// kernel's read-ahead) each find the chunk they ended in.
const KEPT: usize = 4;

/// Chunks of one open file, by (block id, chunk index); the oldest goes first.
#[derive(Debug, Default)]
pub(crate) struct ChunkMemo {
    chunks: Mutex<Vec<(u64, u64, Bytes)>>,
}

impl ChunkMemo {
    /// The kept chunks of block `block_id` that begin `chunks`, in order, appended to `out`
    /// (one lock for them all: a read asks for every chunk it spans).
    pub(crate) fn leading(&self, block_id: u64, chunks: std::ops::RangeInclusive<u64>, out: &mut Vec<Bytes>) {
        let kept = self.chunks.lock().unwrap_or_else(|p| p.into_inner());
        let find =
            |ch: u64| kept.iter().find(|(b, c, _)| (*b, *c) == (block_id, ch)).map(|(_, _, bytes)| bytes.clone());
        out.extend(chunks.map_while(find));
    }

    /// Keeps chunk `chunk` of block `block_id` (its whole bytes, checked).
    pub(crate) fn put(&self, block_id: u64, chunk: u64, bytes: Bytes) {
        let mut chunks = self.chunks.lock().unwrap_or_else(|p| p.into_inner());
        chunks.retain(|(b, c, _)| (*b, *c) != (block_id, chunk));
        if chunks.len() == KEPT {
            chunks.remove(0);
        }
        chunks.push((block_id, chunk, bytes));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Chunk `chunk` of block `block_id`, if kept.
    fn get(m: &ChunkMemo, block_id: u64, chunk: u64) -> Option<Bytes> {
        let mut one = Vec::new();
        m.leading(block_id, chunk..=chunk, &mut one);
        one.pop()
    }

    #[test]
    fn keeps_the_last_few_by_block_and_chunk() {
        let m = ChunkMemo::default();
        for c in 0..KEPT as u64 + 1 {
            m.put(7, c, Bytes::from(vec![c as u8; 4]));
        }
        assert!(get(&m, 7, 0).is_none(), "the oldest went");
        assert_eq!(get(&m, 7, KEPT as u64).as_deref(), Some(&[KEPT as u8; 4][..]));
        assert!(get(&m, 8, 1).is_none(), "another block's chunk 1 is not this one's");
        m.put(7, 1, Bytes::from_static(b"again"));
        assert_eq!(get(&m, 7, 1).as_deref(), Some(&b"again"[..]));
    }
    #[test]
    fn a_run_of_kept_chunks_stops_at_the_first_missing() {
        let m = ChunkMemo::default();
        for c in [3, 4, 6] {
            m.put(9, c, Bytes::from(vec![c as u8; 2]));
        }
        let mut run = Vec::new();
        m.leading(9, 3..=6, &mut run);
        assert_eq!(run, [Bytes::from(vec![3u8; 2]), Bytes::from(vec![4u8; 2])], "chunk 5 is missing");
        run.clear();
        m.leading(9, 2..=4, &mut run);
        assert!(run.is_empty(), "the run must begin at the first chunk asked for");
    }
}
