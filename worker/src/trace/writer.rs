//! Writes the shards' block accesses to a trace file from a thread of its own: a shard hands a
//! record over a bounded channel and never waits (a full channel drops the record and counts
//! it), the thread gathers them into checksummed chunks (`format.rs`) and stops recording at
//! `max_records`. Off unless `[worker] trace` names a file.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::format::{self, Access, MAX_CHUNK, Record};

/// Records in flight between the shards and the writer.
const CHANNEL: usize = 1 << 16;
/// A chunk is written at least this often while records come.
const FLUSH_EVERY: Duration = Duration::from_millis(200);

/// What a shard records into (cheap to clone).
#[derive(Clone, Debug)]
pub struct TraceSink {
    tx: flume::Sender<Record>,
    start: Instant,
    dropped: Arc<AtomicU64>,
}

impl TraceSink {
    /// Records one request at `shard` for `len` bytes at `offset` (cut at the block's end, as
    /// the read is: a reader may ask past it).
    pub fn record(&self, shard: u16, block: u64, (offset, len): (u64, u64), block_len: u64, access: Access) {
        let len = len.min(block_len.saturating_sub(offset));
        let r = Record {
            time_us: self.start.elapsed().as_micros() as u64,
            block,
            offset: u32::try_from(offset).unwrap_or(u32::MAX),
            len: u32::try_from(len).unwrap_or(u32::MAX),
            block_len: u32::try_from(block_len).unwrap_or(u32::MAX),
            shard,
            access,
        };
        if let Err(flume::TrySendError::Full(_)) = self.tx.try_send(r) {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Starts the writer on `path` (created, replaced); it ends once every sink is dropped.
pub fn start(path: &Path, max_records: u64) -> std::io::Result<(TraceSink, JoinHandle<()>)> {
    let mut file = std::io::BufWriter::new(std::fs::File::create(path)?);
    file.write_all(&format::header())?;
    let (tx, rx) = flume::bounded(CHANNEL);
    let dropped = Arc::new(AtomicU64::new(0));
    let sink = TraceSink { tx, start: Instant::now(), dropped: dropped.clone() };
    let path: PathBuf = path.to_path_buf();
    let thread = std::thread::Builder::new()
        .name("cv-trace".into())
        .spawn(move || write_loop(file, rx, max_records, &path, &dropped))?;
    Ok((sink, thread))
}

fn write_loop(
    mut file: std::io::BufWriter<std::fs::File>,
    rx: flume::Receiver<Record>,
    max_records: u64,
    path: &Path,
    dropped: &AtomicU64,
) {
    let mut written = 0u64;
    let mut batch = Vec::with_capacity(MAX_CHUNK as usize);
    let mut open = true;
    while open && written < max_records {
        match rx.recv_timeout(FLUSH_EVERY) {
            Ok(r) => batch.push(r),
            Err(flume::RecvTimeoutError::Timeout) => {}
            Err(flume::RecvTimeoutError::Disconnected) => open = false,
        }
        let room = (max_records - written).min(u64::from(MAX_CHUNK)) as usize;
        while batch.len() < room {
            match rx.try_recv() {
                Ok(r) => batch.push(r),
                Err(_) => break,
            }
        }
        batch.truncate(room);
        if batch.is_empty() {
            continue;
        }
        let done = format::write_chunk(&mut file, &batch).and_then(|()| file.flush());
        if let Err(e) = done {
            tracing::warn!(path = %path.display(), error = %e, "block trace: write failed; tracing stops");
            return;
        }
        written += batch.len() as u64;
        batch.clear();
    }
    tracing::info!(path = %path.display(), records = written, dropped = dropped.load(Ordering::Relaxed), "block trace ended");
}
