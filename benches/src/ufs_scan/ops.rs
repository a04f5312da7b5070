//! What an engine does with one Parquet file, on each side: find the footer,
//! parse it with the parquet crate, pick K column chunks and read them.
//! Both sides run the same steps with the same concurrency; only the
//! transport differs. Timing stops before the bytes are checksummed.

use crate::open_latency::BenchError;
use crate::parquet_gen::footer_len;
use cv_client::{Client, File};
use opendal::Operator;
use parquet::file::metadata::{ParquetMetaData, ParquetMetaDataReader};
use std::time::{Duration, Instant};
use tokio::task::JoinSet;

/// What an engine reads first when it opens a Parquet file: one ranged GET
/// of the last 64 KiB (the footer is almost always inside).
pub const SPECULATIVE_TAIL: u64 = 64 << 10;

/// How the K column chunks of a file are read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChunkReads {
    /// All at once (what engines' async readers do).
    Parallel,
    /// One after another.
    Sequential,
}

/// One file done: its timings and what was read.
#[derive(Debug)]
pub struct FileScan {
    /// Open (or stat) + footer read + parse.
    pub open_footer: Duration,
    /// The K column chunks.
    pub chunks: Duration,
    /// Both.
    pub total: Duration,
    /// crc32 of the footer and every chunk, in order (computed after timing).
    pub digest: u32,
    /// Bytes of the K chunks.
    pub chunk_bytes: u64,
    /// cv only: the blocks (offset, len) the reads needed from shards, i.e.
    /// the ranges a cold shard must fetch from the store.
    pub blocks_read: Vec<(u64, u64)>,
    /// cv only: the file's block size.
    pub block_size: u64,
}

/// Which K column chunks a file's scan reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChunkPlan {
    /// Chunks per file (K).
    pub k: usize,
    /// Column of chunk i: `columns[i % len]`; empty: column (columns−1−i) mod
    /// columns, i.e. the last (in the generated files the widest) first.
    pub columns: Vec<usize>,
}

/// The byte ranges (offset, len) of the plan's column chunks, spread over
/// the file: chunk i comes from row group i·groups/k.
pub fn pick_chunks(md: &ParquetMetaData, plan: &ChunkPlan) -> Result<Vec<(u64, u64)>, BenchError> {
    let k = plan.k;
    let groups = md.num_row_groups();
    if groups == 0 {
        return Err("Parquet file without row groups".into());
    }
    let mut out = Vec::with_capacity(k);
    for i in 0..k {
        let rg = md.row_group(i * groups / k.max(1));
        let cols = rg.num_columns();
        if cols == 0 {
            return Err("row group without columns".into());
        }
        let col = match plan.columns.as_slice() {
            [] => (cols - 1 - i % cols) % cols,
            list => list[i % list.len()],
        };
        if col >= cols {
            return Err(format!("column {col} asked, the file has {cols}").into());
        }
        let c = rg.column(col);
        let start = c.dictionary_page_offset().unwrap_or_else(|| c.data_page_offset());
        let len = c.compressed_size();
        if start < 0 || len <= 0 {
            return Err(format!("column chunk at {start} of {len} bytes").into());
        }
        out.push((start as u64, len as u64));
    }
    Ok(out)
}

/// Parses a footer and picks the chunks.
pub fn chunks_of(footer: &[u8], plan: &ChunkPlan) -> Result<Vec<(u64, u64)>, BenchError> {
    let md = ParquetMetaDataReader::decode_metadata(footer)?;
    pick_chunks(&md, plan)
}

/// Direct from the store through OpenDAL: stat, one ranged GET of the last
/// 64 KiB (a second only for a larger footer), K ranged GETs.
pub async fn direct_file(
    op: &Operator,
    key: &str,
    plan: &ChunkPlan,
    reads: ChunkReads,
) -> Result<FileScan, BenchError> {
    let t0 = Instant::now();
    let len = op.stat(key).await?.content_length();
    let start = len.saturating_sub(SPECULATIVE_TAIL);
    let tail = op.read_with(key).range(start..len).await?.to_vec();
    if tail.len() < 8 {
        return Err(format!("{key}: {} bytes is no Parquet file", tail.len()).into());
    }
    let flen = footer_len(&tail[tail.len() - 8..]).ok_or("direct: not a Parquet file")?;
    let footer = if flen + 8 <= tail.len() as u64 {
        let end = tail.len() - 8;
        tail[end - flen as usize..end].to_vec()
    } else {
        op.read_with(key).range(len - 8 - flen..len - 8).await?.to_vec()
    };
    let ranges = chunks_of(&footer, plan)?;
    let t1 = Instant::now();
    let bufs: Vec<opendal::Buffer> = match reads {
        ChunkReads::Sequential => {
            let mut v = Vec::with_capacity(ranges.len());
            for &(o, l) in &ranges {
                v.push(op.read_with(key).range(o..o + l).await?);
            }
            v
        }
        ChunkReads::Parallel => {
            let mut set = JoinSet::new();
            for (i, &(o, l)) in ranges.iter().enumerate() {
                let (op, key) = (op.clone(), key.to_string());
                set.spawn(async move { op.read_with(&key).range(o..o + l).await.map(|b| (i, b)) });
            }
            let mut v: Vec<Option<opendal::Buffer>> = vec![None; ranges.len()];
            while let Some(r) = set.join_next().await {
                let (i, b) = r??;
                v[i] = Some(b);
            }
            v.into_iter().map(|b| b.ok_or("a chunk read went missing")).collect::<Result<_, _>>()?
        }
    };
    let t2 = Instant::now();
    let mut h = crc32fast::Hasher::new();
    h.update(&footer);
    let mut chunk_bytes = 0;
    for (b, &(_, l)) in bufs.iter().zip(&ranges) {
        if b.len() as u64 != l {
            return Err(format!("{key}: a ranged GET returned {} bytes, {l} asked", b.len()).into());
        }
        chunk_bytes += l;
        for piece in b.clone() {
            h.update(&piece);
        }
    }
    Ok(FileScan {
        open_footer: t1 - t0,
        chunks: t2 - t1,
        total: t2 - t0,
        digest: h.finalize(),
        chunk_bytes,
        blocks_read: Vec::new(),
        block_size: 0,
    })
}

/// Reads `len` bytes at `offset` of an open file, all of them.
async fn read_exact(f: &File, offset: u64, len: u64) -> Result<Vec<u8>, BenchError> {
    let mut buf = vec![0u8; len as usize];
    let n = f.read_at(offset, &mut buf).await?;
    if n as u64 != len {
        return Err(format!("read_at({offset}, {len}) returned {n} bytes").into());
    }
    Ok(buf)
}

/// The footer of an open Parquet file: from the tail in the open reply when
/// it covers it (no round trip), else from the shards.
pub async fn cv_footer(f: &File) -> Result<Vec<u8>, BenchError> {
    let len = f.len();
    if len < 8 {
        return Err(format!("{len} bytes is no Parquet file").into());
    }
    let last8 = read_exact(f, len - 8, 8).await?;
    let flen = footer_len(&last8).ok_or("cv: not a Parquet file")?;
    read_exact(f, len - 8 - flen, flen).await
}

/// Through cv: open (block map + tail in one reply), footer from the tail,
/// K `read_at` calls.
pub async fn cv_file(client: &Client, path: &str, plan: &ChunkPlan, reads: ChunkReads) -> Result<FileScan, BenchError> {
    let t0 = Instant::now();
    let f = client.open(path).await?;
    let footer = cv_footer(&f).await?;
    let ranges = chunks_of(&footer, plan)?;
    let t1 = Instant::now();
    let bufs: Vec<Vec<u8>> = match reads {
        ChunkReads::Sequential => {
            let mut v = Vec::with_capacity(ranges.len());
            for &(o, l) in &ranges {
                v.push(read_exact(&f, o, l).await?);
            }
            v
        }
        ChunkReads::Parallel => {
            let mut set = JoinSet::new();
            for (i, &(o, l)) in ranges.iter().enumerate() {
                let f = f.clone();
                set.spawn(async move { read_exact(&f, o, l).await.map(|b| (i, b)) });
            }
            let mut v: Vec<Vec<u8>> = vec![Vec::new(); ranges.len()];
            while let Some(r) = set.join_next().await {
                let (i, b) = r??;
                v[i] = b;
            }
            v
        }
    };
    let t2 = Instant::now();
    let mut h = crc32fast::Hasher::new();
    h.update(&footer);
    for b in &bufs {
        h.update(b);
    }
    let flen = footer.len() as u64;
    let mut needed = ranges.clone();
    needed.push((f.len() - 8 - flen, flen + 8));
    Ok(FileScan {
        open_footer: t1 - t0,
        chunks: t2 - t1,
        total: t2 - t0,
        digest: h.finalize(),
        chunk_bytes: ranges.iter().map(|r| r.1).sum(),
        blocks_read: blocks_read(&f, &needed),
        block_size: f.status().block_size,
    })
}

/// The blocks (offset, len) that reads of `ranges` take from shards: every
/// block overlapping a range, except where the tail in the open reply
/// covers the range's end (as `File::read_at` does).
pub fn blocks_read(f: &File, ranges: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let tail_off = f.tail().map(|(o, _)| o).unwrap_or(u64::MAX);
    let mut out: Vec<(u64, u64)> = Vec::new();
    for &(o, l) in ranges {
        let end = if o + l > tail_off { o.max(tail_off) } else { o + l };
        if end <= o {
            // Served from the tail entirely.
            continue;
        }
        for b in f.blocks() {
            if b.offset < end && o < b.offset + b.len && !out.contains(&(b.offset, b.len)) {
                out.push((b.offset, b.len));
            }
        }
    }
    out.sort_unstable();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn footer_of(bytes: &[u8]) -> &[u8] {
        let flen = footer_len(&bytes[bytes.len() - 8..]).unwrap() as usize;
        &bytes[bytes.len() - 8 - flen..bytes.len() - 8]
    }

    #[test]
    fn chunks_are_real_column_chunks_spread_over_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.parquet");
        crate::parquet_gen::write_file(&p, 3 << 20, 7).unwrap();
        let bytes = std::fs::read(&p).unwrap();
        let footer = footer_of(&bytes);
        let spread = chunks_of(footer, &ChunkPlan { k: 3, columns: Vec::new() }).unwrap();
        assert_eq!(spread.len(), 3);
        // Different row groups, in file order, inside the data part of the file.
        assert!(spread.windows(2).all(|w| w[0].0 + w[0].1 <= w[1].0), "{spread:?}");
        assert!(spread.iter().all(|(o, l)| o + l <= (bytes.len() - footer.len() - 8) as u64));
        // The widest column (the payload) comes first.
        assert!(spread[0].1 > 10 * spread[1].1, "{spread:?}");
        let narrow = chunks_of(footer, &ChunkPlan { k: 3, columns: vec![0, 1, 2] }).unwrap();
        assert!(narrow.iter().all(|(_, l)| *l < 64 << 10), "{narrow:?}");
        assert!(chunks_of(footer, &ChunkPlan { k: 1, columns: vec![9] }).is_err());
    }
}
