//! Open + first read: what an engine does to a Parquet file before any data
//! — through the mount `open()`, `pread()` of the last 16 KiB, `close()`;
//! through the client `open` (one round trip, the tail in the reply) and a
//! read of the same 16 KiB. Each file is opened once per path, alternating
//! which goes first, so the kernel holds no pages of it and the mount's
//! read is a real first read. The bytes of both are compared (untimed).

use super::FuseBenchOptions;
use crate::parquet_gen;
use crate::read_bench::{ReadBenchError, ReadBenchErrorKind, Result};
use crate::report::{Latency, histogram};
use cv_client::Client;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// What engines read first: the footer and a little before it.
const FIRST_READ: u64 = 16 << 10;
/// Distinct Parquet files generated; the cv files repeat them.
const DISTINCT: usize = 8;

/// Writes the Parquet files, measures both paths file by file; rows: client, FUSE.
pub async fn measure(client: &Client, opts: &FuseBenchOptions, log: &dyn Fn(&str)) -> Result<Vec<Latency>> {
    let dir = format!("{}/open", opts.cv_dir);
    log(&format!("writing {} Parquet files of ~{} B under {dir}", opts.open_files, opts.open_file_size));
    let files = write_files(client, &dir, opts.open_files, opts.open_file_size).await?;
    let (mut h_client, mut h_fuse) = (histogram(), histogram());
    log("open + first 16 KiB read: client and FUSE, alternating, each file once per path");
    for (i, (path, len)) in files.iter().enumerate() {
        let on_mount = opts.mountpoint.join(path.trim_start_matches('/'));
        let (a, b) = if i % 2 == 0 {
            let a = client_first_read(client, path, *len).await?;
            (a, fuse_first_read(on_mount, *len).await?)
        } else {
            let b = fuse_first_read(on_mount, *len).await?;
            (client_first_read(client, path, *len).await?, b)
        };
        if a.1 != b.1 {
            return Err(ReadBenchError::new(
                ReadBenchErrorKind::WrongBytes,
                format!("{path}: the mount and the client read different last 16 KiB"),
            ));
        }
        h_client.saturating_record(a.0.as_nanos() as u64);
        h_fuse.saturating_record(b.0.as_nanos() as u64);
    }
    Ok(vec![
        Latency::from_hist("client: open + read last 16 KiB", &h_client),
        Latency::from_hist("FUSE: open + pread 16 KiB + close", &h_fuse),
    ])
}

/// Writes `count` Parquet files under `dir` through the client; their paths and lengths.
async fn write_files(client: &Client, dir: &str, count: usize, size: u64) -> Result<Vec<(String, u64)>> {
    client.mkdir(dir, true).await.map_err(|e| ReadBenchError::cv("mkdir", e))?;
    let made = tokio::task::spawn_blocking(move || -> std::io::Result<Vec<Vec<u8>>> {
        let tmp = tempfile::tempdir()?;
        (0..DISTINCT.min(count))
            .map(|seed| {
                let p = tmp.path().join(format!("{seed}.parquet"));
                parquet_gen::write_file(&p, size, seed as u64)?;
                std::fs::read(&p)
            })
            .collect()
    })
    .await
    .map_err(|e| ReadBenchError::new(ReadBenchErrorKind::Io, format!("parquet writer task: {e}")))?
    .map_err(|e| ReadBenchError::io("write Parquet files", e))?;
    let mut out = Vec::with_capacity(count);
    for i in 0..count {
        let bytes = &made[i % made.len()];
        let path = format!("{dir}/f{i:05}.parquet");
        let mut w = client.create(&path, true).await.map_err(|e| ReadBenchError::cv("create", e))?;
        w.write(bytes).await.map_err(|e| ReadBenchError::cv("write", e))?;
        w.close().await.map_err(|e| ReadBenchError::cv("close", e))?;
        out.push((path, bytes.len() as u64));
    }
    Ok(out)
}

/// The client's open + read of the last 16 KiB: time and bytes.
async fn client_first_read(client: &Client, path: &str, len: u64) -> Result<(Duration, Vec<u8>)> {
    let want = FIRST_READ.min(len);
    let mut buf = vec![0u8; want as usize];
    let t = Instant::now();
    let f = client.open(path).await.map_err(|e| ReadBenchError::cv("open", e))?;
    let n = f.read_at(len - want, &mut buf).await.map_err(|e| ReadBenchError::cv("read_at", e))?;
    let took = t.elapsed();
    buf.truncate(n);
    Ok((took, buf))
}

/// `open()`, `pread()` of the last 16 KiB, `close()` through the mount, in a
/// blocking thread (the mount is served by this process's runtime).
async fn fuse_first_read(path: PathBuf, len: u64) -> Result<(Duration, Vec<u8>)> {
    tokio::task::spawn_blocking(move || {
        let want = FIRST_READ.min(len);
        let mut buf = vec![0u8; want as usize];
        let fail = |e: std::io::Error| {
            ReadBenchError::new(ReadBenchErrorKind::Fuse, format!("{} through the mount", path.display()))
                .with_source(e)
        };
        let t = Instant::now();
        let f = std::fs::File::open(&path).map_err(fail)?;
        f.read_exact_at(&mut buf, len - want).map_err(fail)?;
        drop(f);
        Ok((t.elapsed(), buf))
    })
    .await
    .map_err(|e| ReadBenchError::new(ReadBenchErrorKind::Fuse, format!("reader task: {e}")))?
}
