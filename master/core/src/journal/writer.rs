//! The single journal writer thread: batches every queued append into one write and one sync
//! (group commit), then answers each appender's ticket. A write that runs out of space is cut
//! back off the file, so the records in it failed for sure; the core then goes back to the
//! durable state (`Cmd::Recover`) and takes no writes until a probe finds room again.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::Recovered;
use super::format::{HEADER_LEN, encode_header};
use super::health::Health;
use super::storage::Storage;
use crate::error::{Error, ErrorKind, Result};
use crate::latency::Latency;

pub(super) enum Cmd {
    Append {
        seq: u64,
        bytes: Vec<u8>,
        done: flume::Sender<Result<u64>>,
    },
    Wait {
        seq: u64,
        done: flume::Sender<Result<u64>>,
    },
    Snapshot {
        seq: u64,
        bytes: Vec<u8>,
        done: flume::Sender<Result<u64>>,
    },
    /// Is there room again for the write that failed? Answers `Ok` once there is.
    Probe {
        done: flume::Sender<Result<()>>,
    },
    /// The durable state, read back from the storages (after records failed).
    Recover {
        done: flume::Sender<Result<Recovered>>,
    },
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
    /// Journal batches, snapshots and journal restarts that ran out of space (probes that
    /// find the disk still full are not counted).
    pub no_space: AtomicU64,
}

pub(super) struct Writer {
    pub journal: Box<dyn Storage>,
    pub snapshot: Box<dyn Storage>,
    pub rx: flume::Receiver<Cmd>,
    pub durable: Arc<AtomicU64>,
    pub health: Arc<Health>,
    pub stats: Arc<WriterStats>,
    pub max_batch_bytes: usize,
    /// Bytes of the journal known durable: a write that fails is cut back to here.
    pub durable_len: u64,
    /// Size of the last write that ran out of space: a probe asks for that much room.
    pub need: u64,
}

/// Appends gathered for one write + sync, with who to tell (and whether it is a read, which
/// may ask again, rather than a record, which failed).
#[derive(Default)]
struct Batch {
    buf: Vec<u8>,
    last_seq: u64,
    records: u64,
    waiting: Vec<(flume::Sender<Result<u64>>, bool)>,
}

/// A probe asks for at least this much room, so that the next few records fit too.
const MIN_PROBE: u64 = 64 << 10;

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
                // Built on records that failed: never written.
                Cmd::Append { done, .. } if self.health.is_stale() => {
                    let _ = done.send(Err(self.no_space()));
                }
                Cmd::Append { seq, bytes, done } => {
                    batch.buf.extend_from_slice(&bytes);
                    batch.last_seq = seq;
                    batch.records += 1;
                    batch.waiting.push((done, false));
                }
                Cmd::Wait { seq, done } => {
                    if seq <= self.durable.load(Ordering::Acquire) {
                        let _ = done.send(Ok(seq));
                    } else if self.health.is_stale() {
                        let _ = done.send(Err(read_again(self.no_space())));
                    } else {
                        batch.waiting.push((done, true));
                    }
                }
                Cmd::Snapshot { seq, bytes, done } => {
                    self.flush(std::mem::take(&mut batch));
                    let _ = done.send(self.write_snapshot(seq, &bytes));
                }
                Cmd::Probe { done } => {
                    self.flush(std::mem::take(&mut batch));
                    let _ = done.send(self.probe());
                }
                Cmd::Recover { done } => {
                    self.flush(std::mem::take(&mut batch));
                    let _ = done.send(self.recover());
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
        let result = if let Some(e) = self.health.poisoned() {
            Err(e)
        } else if batch.buf.is_empty() {
            Ok(self.durable.load(Ordering::Acquire))
        } else {
            self.write(&batch)
        };
        for (done, read) in batch.waiting {
            let r = match &result {
                Err(e) if read && e.kind() == ErrorKind::NoSpace => Err(read_again(e.clone())),
                r => r.clone(),
            };
            let _ = done.send(r);
        }
    }

    fn write(&mut self, batch: &Batch) -> Result<u64> {
        let started = std::time::Instant::now();
        let r = self.journal.append(&batch.buf).and_then(|()| self.journal.sync());
        self.stats.commit.observe(started.elapsed());
        match r {
            Ok(()) => {}
            Err(e) if Error::is_no_space(&e) => return Err(self.out_of_space(&e, batch.buf.len() as u64)),
            Err(e) => return Err(self.fail("journal write", &e)),
        }
        self.durable_len += batch.buf.len() as u64;
        self.durable.store(batch.last_seq, Ordering::Release);
        self.stats.batches.fetch_add(1, Ordering::Relaxed);
        self.stats.records.fetch_add(batch.records, Ordering::Relaxed);
        self.stats.bytes.fetch_add(batch.buf.len() as u64, Ordering::Relaxed);
        Ok(batch.last_seq)
    }

    /// A write ran out of space: whatever part of it reached the file is cut off, so none of
    /// its records is durable and each can be failed for sure. If the cut fails, some may be
    /// durable after all: that is poison, as any other I/O error.
    fn out_of_space(&mut self, e: &std::io::Error, need: u64) -> Error {
        if let Err(cut) = self.journal.truncate(self.durable_len) {
            return self.fail("cutting back a journal write that ran out of space", &cut);
        }
        self.stats.no_space.fetch_add(1, Ordering::Relaxed);
        self.need = need;
        let msg = format!(
            "no space left for the journal at {}: {e}; writes are refused until there is room (reads go on)",
            self.journal.describe()
        );
        tracing::error!(error = %e, journal = %self.journal.describe(), "journal full: writes refused, reads go on");
        self.health.set_full(msg);
        self.health.set_stale(true);
        self.no_space()
    }

    fn no_space(&self) -> Error {
        self.health.full().unwrap_or_else(|| Error::new(ErrorKind::NoSpace, "the journal is full"))
    }

    /// Snapshot first, then restart the journal after it: a crash in between leaves a
    /// snapshot plus an older journal whose records up to `seq` recovery skips. Out of space,
    /// either step leaves the files valid (the old snapshot, or the new one with the old
    /// journal), so that is no poison.
    fn write_snapshot(&mut self, seq: u64, bytes: &[u8]) -> Result<u64> {
        if let Some(e) = self.health.poisoned() {
            return Err(e);
        }
        if self.health.is_stale() {
            // It holds records that failed.
            return Err(self.no_space());
        }
        match self.snapshot.replace(bytes) {
            Ok(()) => {}
            Err(e) if Error::is_no_space(&e) => {
                self.stats.no_space.fetch_add(1, Ordering::Relaxed);
                let at = self.snapshot.describe();
                tracing::warn!(error = %e, snapshot = %at, "no space for a snapshot; the old one and the journal stay");
                return Err(Error::new(ErrorKind::NoSpace, format!("no space for the snapshot at {at}: {e}")));
            }
            Err(e) => return Err(self.fail("snapshot write", &e)),
        }
        self.stats.snapshots.fetch_add(1, Ordering::Relaxed);
        match self.journal.replace(&encode_header(seq + 1)) {
            Ok(()) => self.durable_len = HEADER_LEN as u64,
            Err(e) if Error::is_no_space(&e) => {
                self.stats.no_space.fetch_add(1, Ordering::Relaxed);
                let at = self.journal.describe();
                tracing::warn!(error = %e, journal = %at, "no space to restart the journal after a snapshot; it goes on");
            }
            Err(e) => return Err(self.fail("journal restart", &e)),
        }
        Ok(seq)
    }

    /// Room again for the write that failed? Then records are taken again.
    fn probe(&mut self) -> Result<()> {
        if let Some(e) = self.health.poisoned() {
            return Err(e);
        }
        if self.health.full().is_none() {
            return Ok(());
        }
        // Room for one more batch like the failed one; a single record larger than a batch
        // may fail again (and be undone again) rather than each probe writing that much.
        let want = self.need.min(self.max_batch_bytes as u64).max(MIN_PROBE);
        match self.journal.has_room(want) {
            Ok(()) => {
                tracing::info!(journal = %self.journal.describe(), "journal has room again: writes go on");
                self.health.clear_full();
                Ok(())
            }
            Err(e) if Error::is_no_space(&e) => Err(self.no_space()),
            Err(e) => Err(Error::io(&format!("probing for room at {}", self.journal.describe()), &e)),
        }
    }

    /// Reads the durable state back (snapshot + journal, as at startup); appends are taken
    /// again after it. Anything but exactly the durable records is poison.
    fn recover(&mut self) -> Result<Recovered> {
        if let Some(e) = self.health.poisoned() {
            return Err(e);
        }
        let rec = super::recover(self.journal.as_mut(), self.snapshot.as_mut()).map_err(|e| self.poison(e))?;
        let durable = self.durable.load(Ordering::Acquire);
        if rec.last_seq != durable {
            let e =
                Error::corrupt(format!("read back seq {} from the journal, but {durable} is durable", rec.last_seq));
            return Err(self.poison(e));
        }
        self.durable_len = rec.journal_len;
        self.health.set_stale(false);
        Ok(rec)
    }

    /// After a failed write the in-memory state may be ahead of the disk: refuse everything
    /// from now on (the master must restart and recover).
    fn fail(&self, op: &str, e: &std::io::Error) -> Error {
        let at = self.journal.describe();
        self.poison(Error::new(ErrorKind::Io, format!("{op} at {at} failed: {e}")))
    }

    fn poison(&self, e: Error) -> Error {
        tracing::error!(error = %e, "journal failed; master refuses further work");
        self.health.set_poisoned(format!("journal failed; restart the master ({})", e.context()));
        e
    }
}

/// A read that saw records which then failed: what it saw is gone, so it may ask again.
fn read_again(e: Error) -> Error {
    Error::new(ErrorKind::Io, format!("what this read saw was not made durable ({}); ask again", e.context()))
}

fn cmd_len(c: &Cmd) -> usize {
    match c {
        Cmd::Append { bytes, .. } => bytes.len(),
        _ => 0,
    }
}

fn ends_batch(c: &Cmd) -> bool {
    !matches!(c, Cmd::Append { .. } | Cmd::Wait { .. })
}
