//! The single journal writer thread: batches every queued append into one write and one sync
//! (group commit), then answers each appender's ticket.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use super::format::encode_header;
use super::storage::Storage;
use crate::error::{Error, ErrorKind, Result};
use crate::latency::Latency;

pub(super) enum Cmd {
    Append { seq: u64, bytes: Vec<u8>, done: flume::Sender<Result<u64>> },
    Wait { seq: u64, done: flume::Sender<Result<u64>> },
    Snapshot { seq: u64, bytes: Vec<u8>, done: flume::Sender<Result<u64>> },
    Shutdown,
}

/// Counters the writer keeps (read by tests and metrics).
#[derive(Debug, Default)]
pub struct WriterStats {
    pub batches: AtomicU64,
    pub records: AtomicU64,
    pub bytes: AtomicU64,
    pub snapshots: AtomicU64,
    /// How long each batch's write + sync took: the commit latency every appender of the
    /// batch waited for.
    pub commit: Latency,
}

pub(super) struct Writer {
    pub journal: Box<dyn Storage>,
    pub snapshot: Box<dyn Storage>,
    pub rx: flume::Receiver<Cmd>,
    pub durable: Arc<AtomicU64>,
    pub failed: Arc<AtomicBool>,
    pub stats: Arc<WriterStats>,
    pub max_batch_bytes: usize,
}

/// Appends gathered for one write + sync, with who to tell.
#[derive(Default)]
struct Batch {
    buf: Vec<u8>,
    last_seq: u64,
    records: u64,
    waiting: Vec<flume::Sender<Result<u64>>>,
}

impl Writer {
    pub fn run(mut self) {
        while let Ok(first) = self.rx.recv() {
            let mut cmds = vec![first];
            let mut size = cmd_len(&cmds[0]);
            while size < self.max_batch_bytes && !ends_batch(&cmds[cmds.len() - 1]) {
                match self.rx.try_recv() {
                    Ok(c) => {
                        size += cmd_len(&c);
                        cmds.push(c);
                    }
                    Err(_) => break,
                }
            }
            if !self.handle(cmds) {
                return;
            }
        }
    }

    /// Handles commands in order; false once told to shut down.
    fn handle(&mut self, cmds: Vec<Cmd>) -> bool {
        let mut batch = Batch::default();
        for cmd in cmds {
            match cmd {
                Cmd::Append { seq, bytes, done } => {
                    batch.buf.extend_from_slice(&bytes);
                    batch.last_seq = seq;
                    batch.records += 1;
                    batch.waiting.push(done);
                }
                Cmd::Wait { seq, done } => {
                    if seq <= self.durable.load(Ordering::Acquire) {
                        let _ = done.send(Ok(seq));
                    } else {
                        batch.waiting.push(done);
                    }
                }
                Cmd::Snapshot { seq, bytes, done } => {
                    self.flush(std::mem::take(&mut batch));
                    let _ = done.send(self.write_snapshot(seq, &bytes));
                }
                Cmd::Shutdown => {
                    self.flush(batch);
                    return false;
                }
            }
        }
        self.flush(batch);
        true
    }

    fn flush(&mut self, batch: Batch) {
        if batch.waiting.is_empty() && batch.buf.is_empty() {
            return;
        }
        let result = if self.failed.load(Ordering::Acquire) {
            Err(Error::new(ErrorKind::Poisoned, "an earlier journal write failed"))
        } else if batch.buf.is_empty() {
            Ok(self.durable.load(Ordering::Acquire))
        } else {
            self.write(&batch)
        };
        for done in batch.waiting {
            let _ = done.send(result.clone());
        }
    }

    fn write(&mut self, batch: &Batch) -> Result<u64> {
        let started = std::time::Instant::now();
        let r = self.journal.append(&batch.buf).and_then(|()| self.journal.sync());
        self.stats.commit.observe(started.elapsed());
        if let Err(e) = r {
            return Err(self.fail("journal append", &e));
        }
        self.durable.store(batch.last_seq, Ordering::Release);
        self.stats.batches.fetch_add(1, Ordering::Relaxed);
        self.stats.records.fetch_add(batch.records, Ordering::Relaxed);
        self.stats.bytes.fetch_add(batch.buf.len() as u64, Ordering::Relaxed);
        Ok(batch.last_seq)
    }

    /// Snapshot first, then restart the journal after it: a crash in between leaves a
    /// snapshot plus an older journal whose records up to `seq` recovery skips.
    fn write_snapshot(&mut self, seq: u64, bytes: &[u8]) -> Result<u64> {
        if self.failed.load(Ordering::Acquire) {
            return Err(Error::new(ErrorKind::Poisoned, "an earlier journal write failed"));
        }
        if let Err(e) = self.snapshot.replace(bytes) {
            return Err(self.fail("snapshot write", &e));
        }
        if let Err(e) = self.journal.replace(&encode_header(seq + 1)) {
            return Err(self.fail("journal restart", &e));
        }
        self.stats.snapshots.fetch_add(1, Ordering::Relaxed);
        Ok(seq)
    }

    /// After a failed write the in-memory state may be ahead of the disk: refuse everything
    /// from now on (the master must restart and recover).
    fn fail(&self, op: &str, e: &std::io::Error) -> Error {
        self.failed.store(true, Ordering::Release);
        tracing::error!(op, error = %e, "journal failed; master refuses further work");
        Error::io(op, e)
    }
}

fn cmd_len(c: &Cmd) -> usize {
    match c {
        Cmd::Append { bytes, .. } => bytes.len(),
        _ => 0,
    }
}

fn ends_batch(c: &Cmd) -> bool {
    matches!(c, Cmd::Snapshot { .. } | Cmd::Shutdown)
}
