//! `bench open-latency` against object storage: open + footer through a
//! cache-mode mount of the store next to stat + footer straight from it.
//! The first open of each file is cold (the master HEADs the object and
//! reads its tail) and is reported on its own row; the measured rounds are
//! warm, interleaved file by file with the direct series, the same files on
//! the local file system (the floor no remote store beats) and a null RPC.

use super::ops::{SPECULATIVE_TAIL, cv_footer};
use super::store::{Store, StoreRequests};
use crate::open_latency::BenchError;
use crate::parquet_gen::{footer_len, parse_footer};
use crate::report::{Latency, histogram};
use cv_client::Client;
use opendal::Operator;
use serde::Serialize;
use std::time::Instant;

/// Rows and store requests of one run.
#[derive(Clone, Debug, Serialize)]
pub struct OpenReport {
    /// Store the files were read from (the mount URL).
    pub store: String,
    /// Rows: direct, cv warm, cv cold first open, local file system (when
    /// measured), null RPC.
    pub rows: Vec<Latency>,
    /// Requests each series made at the store over the whole run; `None`
    /// when the store does not count (not the embedded one).
    pub requests: Option<OpenRequests>,
    /// Parquet footers of the files were parsed (row groups of the first).
    pub row_groups: usize,
}

/// Requests at the store per series.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct OpenRequests {
    /// Direct series.
    pub direct: StoreRequests,
    /// cv, first (cold) open of every file.
    pub cv_cold: StoreRequests,
    /// cv, the measured (warm) rounds.
    pub cv_warm: StoreRequests,
}

/// cv: open, footer from the tail in the reply.
async fn cv_open_footer(client: &Client, path: &str) -> Result<Vec<u8>, BenchError> {
    let f = client.open(path).await?;
    cv_footer(&f).await
}

/// Direct: stat, one ranged read of the last 64 KiB, a second only for a
/// larger footer.
async fn direct_open_footer(op: &Operator, key: &str) -> Result<Vec<u8>, BenchError> {
    let len = op.stat(key).await?.content_length();
    let start = len.saturating_sub(SPECULATIVE_TAIL);
    let tail = op.read_with(key).range(start..len).await?.to_vec();
    let flen = footer_len(&tail[tail.len().saturating_sub(8)..]).ok_or("direct: not a Parquet file")?;
    if flen + 8 <= tail.len() as u64 {
        let end = tail.len() - 8;
        return Ok(tail[end - flen as usize..end].to_vec());
    }
    Ok(op.read_with(key).range(len - 8 - flen..len - 8).await?.to_vec())
}

/// The same files on the local file system: the floor row of the table.
#[derive(Debug)]
pub struct LocalFloor<'a> {
    /// OpenDAL fs rooted where the files are.
    pub op: &'a Operator,
    /// Each key's name under that root, in `keys` order.
    pub names: &'a [String],
}

/// What [`measure_mounted`] measures.
#[derive(Debug)]
pub struct MountedRun<'a> {
    /// The store the files are in.
    pub store: &'a Store,
    /// OpenDAL on the store as the direct side reaches it (through the delay proxy, if any).
    pub op: &'a Operator,
    /// Where the store is mounted in cv (cache mode).
    pub mount: &'a str,
    /// Object keys relative to the mount.
    pub keys: &'a [String],
    /// Warm passes over every file.
    pub rounds: u32,
    /// The direct row's name.
    pub store_name: &'a str,
    /// The same files on local disk, for the floor row.
    pub floor: Option<LocalFloor<'a>>,
}

/// Measures: one cold open + footer of every file in the mount, then `rounds`
/// warm passes interleaved with the direct series, the local floor (if
/// given) and a null RPC. Footers are compared once.
pub async fn measure_mounted(client: &Client, run: MountedRun<'_>) -> Result<OpenReport, BenchError> {
    let MountedRun { store, op, mount, keys, rounds, store_name, floor } = run;
    if let Some(f) = &floor
        && f.names.len() != keys.len()
    {
        return Err("the local floor needs one name per key".into());
    }
    let counted = store.counter().is_some();
    let (mut r_direct, mut r_cold, mut r_warm) =
        (StoreRequests::default(), StoreRequests::default(), StoreRequests::default());
    let tally = |into: &mut StoreRequests| {
        if let Some(log) = store.take() {
            into.add(&StoreRequests::from_log(&log));
        }
    };

    let mut h_cold = histogram();
    let mut row_groups = 0;
    for (i, key) in keys.iter().enumerate() {
        let path = format!("{mount}/{key}");
        store.begin();
        let t = Instant::now();
        let footer = cv_open_footer(client, &path).await?;
        h_cold.record(t.elapsed().as_nanos() as u64)?;
        tally(&mut r_cold);
        if i == 0 {
            let direct = direct_open_footer(op, key).await?;
            store.begin();
            if direct != footer {
                return Err(format!("{path}: cv and the store returned different footers").into());
            }
            if let Some(f) = &floor
                && direct_open_footer(f.op, &f.names[0]).await? != footer
            {
                return Err(format!("{path}: cv and the local copy returned different footers").into());
            }
            row_groups = parse_footer(&footer)?;
        }
    }

    let (mut h_null, mut h_cv, mut h_direct, mut h_local) = (histogram(), histogram(), histogram(), histogram());
    for _ in 0..rounds {
        for (i, key) in keys.iter().enumerate() {
            let path = format!("{mount}/{key}");
            let t = Instant::now();
            client.ping().await?;
            h_null.record(t.elapsed().as_nanos() as u64)?;

            store.begin();
            let t = Instant::now();
            let footer = cv_open_footer(client, &path).await?;
            h_cv.record(t.elapsed().as_nanos() as u64)?;
            tally(&mut r_warm);
            std::hint::black_box(footer);

            store.begin();
            let t = Instant::now();
            let footer = direct_open_footer(op, key).await?;
            h_direct.record(t.elapsed().as_nanos() as u64)?;
            tally(&mut r_direct);
            std::hint::black_box(footer);

            if let Some(f) = &floor {
                let t = Instant::now();
                let footer = direct_open_footer(f.op, &f.names[i]).await?;
                h_local.record(t.elapsed().as_nanos() as u64)?;
                std::hint::black_box(footer);
            }
        }
    }
    let mut rows = vec![
        Latency::from_hist(&format!("{store_name}: stat + footer"), &h_direct),
        Latency::from_hist("cv warm: open + footer", &h_cv),
        Latency::from_hist("cv cold: first open + footer", &h_cold),
    ];
    if floor.is_some() {
        rows.push(Latency::from_hist("local fs (floor): stat + footer", &h_local));
    }
    rows.push(Latency::from_hist("cv: null RPC (transport floor)", &h_null));
    Ok(OpenReport {
        store: store.url().to_string(),
        rows,
        requests: counted.then_some(OpenRequests { direct: r_direct, cv_cold: r_cold, cv_warm: r_warm }),
        row_groups,
    })
}
