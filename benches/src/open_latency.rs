//! Open + footer read latency: cv (one open round trip, footer served from
//! the tail in the reply) against the same files read from their source
//! through OpenDAL (stat + ranged reads of the footer), with a null RPC on
//! the cv connection as the transport floor. The three series are
//! interleaved file by file so machine noise hits them alike.

use crate::parquet_gen::{footer_len, parse_footer};
use crate::report::{Latency, histogram};
use cv_client::Client;
use opendal::Operator;
use std::time::Instant;

/// What an engine speculatively reads first when opening a Parquet file.
const SPECULATIVE_TAIL: u64 = 64 << 10;

/// One file: its path in cv and its key in the baseline store.
#[derive(Clone, Debug)]
pub struct BenchFile {
    /// Path in cv.
    pub cv_path: String,
    /// Key in the baseline operator.
    pub key: String,
}

/// Error of the benchmark, as text for the command line.
pub type BenchError = Box<dyn std::error::Error + Send + Sync>;

/// cv: open, then read the last 8 bytes and the footer (from the tail).
async fn cv_open_footer(client: &Client, path: &str) -> Result<Vec<u8>, BenchError> {
    let f = client.open(path).await?;
    let len = f.len();
    let mut last8 = [0u8; 8];
    f.read_at(len - 8, &mut last8).await?;
    let flen = footer_len(&last8).ok_or("cv: not a Parquet file")?;
    let mut footer = vec![0u8; flen as usize];
    f.read_at(len - 8 - flen, &mut footer).await?;
    Ok(footer)
}

/// Baseline: stat, one speculative ranged read of the last 64 KiB, and a
/// second read only if the footer is larger.
async fn direct_open_footer(op: &Operator, key: &str) -> Result<Vec<u8>, BenchError> {
    let len = op.stat(key).await?.content_length();
    let start = len.saturating_sub(SPECULATIVE_TAIL);
    let tail = op.read_with(key).range(start..len).await?.to_vec();
    let flen = footer_len(&tail[tail.len() - 8..]).ok_or("baseline: not a Parquet file")?;
    if flen + 8 <= tail.len() as u64 {
        let end = tail.len() - 8;
        return Ok(tail[end - flen as usize..end].to_vec());
    }
    Ok(op.read_with(key).range(len - 8 - flen..len - 8).await?.to_vec())
}

/// Checks once, outside timing, that both paths return the same real footer.
pub async fn verify(client: &Client, op: &Operator, file: &BenchFile) -> Result<usize, BenchError> {
    let a = cv_open_footer(client, &file.cv_path).await?;
    let b = direct_open_footer(op, &file.key).await?;
    if a != b {
        return Err(format!("{}: cv and the baseline returned different footers", file.cv_path).into());
    }
    Ok(parse_footer(&a)?)
}

/// Measures `rounds` passes over `files`; returns rows: null RPC, cv, baseline.
pub async fn measure(
    client: &Client,
    op: &Operator,
    files: &[BenchFile],
    rounds: u32,
    baseline_name: &str,
) -> Result<Vec<Latency>, BenchError> {
    let (mut h_null, mut h_cv, mut h_direct) = (histogram(), histogram(), histogram());
    for _ in 0..rounds {
        for f in files {
            let t = Instant::now();
            client.ping().await?;
            h_null.record(t.elapsed().as_nanos() as u64)?;

            let t = Instant::now();
            let footer = cv_open_footer(client, &f.cv_path).await?;
            h_cv.record(t.elapsed().as_nanos() as u64)?;
            std::hint::black_box(footer);

            let t = Instant::now();
            let footer = direct_open_footer(op, &f.key).await?;
            h_direct.record(t.elapsed().as_nanos() as u64)?;
            std::hint::black_box(footer);
        }
    }
    Ok(vec![
        Latency::from_hist(&format!("{baseline_name}: stat + footer"), &h_direct),
        Latency::from_hist("cv: open + footer (1 round trip)", &h_cv),
        Latency::from_hist("cv: null RPC (transport floor)", &h_null),
    ])
}
