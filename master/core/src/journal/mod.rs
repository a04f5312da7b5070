//! The journal: every mutation is appended and synced (group commit) before it is acknowledged;
//! snapshots bound recovery; recovery = snapshot + replay of the journal after it.

mod format;
mod health;
mod log;
mod mem;
mod snapshot;
mod storage;
mod ticket;
mod writer;

pub use format::{
    HEADER_LEN, JOURNAL_FORMAT_VERSION, JOURNAL_MAGIC, MAX_RECORD, RECORD_VERSION, Scan, decode_header, decode_records,
    encode_header, encode_record, frame_crc, scan,
};
pub use log::Log;
pub use mem::MemStorage;
pub use snapshot::{SNAPSHOT_FORMAT_VERSION, SNAPSHOT_MAGIC, decode_snapshot, encode_snapshot};
pub use storage::{FileStorage, Storage, private_dir};
pub use ticket::Ticket;
pub use writer::WriterStats;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use crate::error::{Error, ErrorKind, Result};
use crate::state::State;
use health::Health;
use writer::{Cmd, Writer};

/// What recovery found.
#[derive(Debug)]
pub struct Recovered {
    pub state: State,
    /// The last sequence number in the recovered state (0 when empty).
    pub last_seq: u64,
    /// The snapshot's sequence number (0 when there was none).
    pub snapshot_seq: u64,
    /// Journal records applied on top of the snapshot.
    pub replayed: u64,
    /// Bytes of torn or corrupt tail cut off the journal.
    pub cut_bytes: u64,
    /// Length of the journal after recovery: what is durable of it.
    pub journal_len: u64,
}

/// A running journal: one writer thread, many appenders.
#[derive(Debug)]
pub struct Journal {
    tx: flume::Sender<Cmd>,
    durable: Arc<AtomicU64>,
    health: Arc<Health>,
    stats: Arc<WriterStats>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl std::fmt::Debug for Cmd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Cmd")
    }
}

impl Journal {
    /// Recovers the state from `snapshot` + `journal`, cuts a torn tail, and starts the writer.
    pub fn open(
        mut journal: Box<dyn Storage>,
        mut snapshot: Box<dyn Storage>,
        max_batch_bytes: usize,
    ) -> Result<(Self, Recovered)> {
        let rec = recover(journal.as_mut(), snapshot.as_mut())?;
        let (tx, rx) = flume::unbounded();
        let durable = Arc::new(AtomicU64::new(rec.last_seq));
        let health = Arc::new(Health::default());
        let stats = Arc::new(WriterStats::default());
        let writer = Writer {
            journal,
            snapshot,
            rx,
            durable: durable.clone(),
            health: health.clone(),
            stats: stats.clone(),
            max_batch_bytes,
            durable_len: rec.journal_len,
            need: 0,
        };
        let thread = std::thread::Builder::new()
            .name("cv-journal".into())
            .spawn(move || writer.run())
            .map_err(|e| Error::io("spawn journal writer", &e))?;
        let j = Self { tx, durable, health, stats, thread: Mutex::new(Some(thread)) };
        Ok((j, rec))
    }

    /// Queues a framed record (from [`encode_record`]); the ticket resolves once it is durable.
    /// Callers must append in sequence order (the master holds its state lock while doing so).
    pub fn append(&self, seq: u64, bytes: Vec<u8>) -> Ticket {
        let (done, rx) = flume::bounded(1);
        self.send(Cmd::Append { seq, bytes, done }, rx)
    }

    /// Resolves once every record up to `seq` is durable.
    pub fn wait_for(&self, seq: u64) -> Ticket {
        if seq <= self.durable_seq() && !self.is_failed() {
            return Ticket::Ready(seq);
        }
        let (done, rx) = flume::bounded(1);
        self.send(Cmd::Wait { seq, done }, rx)
    }

    /// Queues a snapshot of the state at `seq` (bytes from [`encode_snapshot`]); the journal
    /// restarts at `seq + 1` once it is written.
    pub fn snapshot(&self, seq: u64, bytes: Vec<u8>) -> Ticket {
        let (done, rx) = flume::bounded(1);
        self.send(Cmd::Snapshot { seq, bytes, done }, rx)
    }

    fn send(&self, cmd: Cmd, rx: flume::Receiver<Result<u64>>) -> Ticket {
        // If the writer is gone the receiver sees a closed channel and reports Poisoned.
        let _ = self.tx.send(cmd);
        Ticket::Pending(rx)
    }

    pub fn durable_seq(&self) -> u64 {
        self.durable.load(Ordering::Acquire)
    }

    /// A write failed: nothing more is accepted.
    pub fn is_failed(&self) -> bool {
        self.health.is_poisoned()
    }

    /// Why nothing more is accepted ([`Self::is_failed`]): where and what failed.
    pub fn failure(&self) -> Option<Error> {
        self.health.poisoned()
    }

    /// While the disk is full: the `NoSpace` error to refuse writes with.
    pub fn no_space(&self) -> Option<Error> {
        self.health.full()
    }

    /// Asks the disk again whether the write that ran out of space fits now (blocking); `Ok`
    /// once it does, and appends are written again.
    pub fn probe_space(&self) -> Result<()> {
        let (done, rx) = flume::bounded(1);
        let _ = self.tx.send(Cmd::Probe { done });
        rx.recv().unwrap_or_else(|_| Err(Error::new(ErrorKind::Poisoned, "journal writer stopped")))
    }

    /// Records appended past [`Self::durable_seq`] failed: the appender must go back to the
    /// durable state ([`Self::durable_state`]) before it appends again, and until then every
    /// append fails.
    pub fn needs_rollback(&self) -> bool {
        self.health.is_stale()
    }

    /// The durable state, read back from the storages as recovery does (blocking); appends
    /// are taken again after it.
    pub fn durable_state(&self) -> Result<Recovered> {
        let (done, rx) = flume::bounded(1);
        let _ = self.tx.send(Cmd::Recover { done });
        rx.recv().unwrap_or_else(|_| Err(Error::new(ErrorKind::Poisoned, "journal writer stopped")))
    }

    pub fn stats(&self) -> &WriterStats {
        &self.stats
    }

    /// Flushes queued appends and stops the writer thread.
    pub fn shutdown(&self) {
        let _ = self.tx.send(Cmd::Shutdown);
        let handle = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(h) = handle
            && h.join().is_err()
        {
            tracing::error!("journal writer panicked");
        }
    }
}

impl Drop for Journal {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Snapshot + replay. Torn journal tails are cut (and truncated away); everything else that
/// does not check out is a typed error.
pub fn recover(journal: &mut dyn Storage, snapshot: &mut dyn Storage) -> Result<Recovered> {
    let snap_bytes = snapshot.read_all().map_err(|e| Error::io("read snapshot", &e))?;
    let (snapshot_seq, mut state) = match decode_snapshot(&snap_bytes)? {
        Some((seq, data)) => (seq, State::from_data(data)),
        None => (0, State::new()),
    };
    let bytes = journal.read_all().map_err(|e| Error::io("read journal", &e))?;
    let restart = |journal: &mut dyn Storage| {
        journal.replace(&encode_header(snapshot_seq + 1)).map_err(|e| Error::io("journal restart", &e))
    };
    if bytes.is_empty() {
        restart(journal)?;
        let journal_len = HEADER_LEN as u64;
        return Ok(Recovered { state, last_seq: snapshot_seq, snapshot_seq, replayed: 0, cut_bytes: 0, journal_len });
    }
    let scan = scan(&bytes)?;
    if scan.first_seq > snapshot_seq + 1 {
        return Err(Error::corrupt(format!(
            "journal starts at seq {} but the snapshot ends at {snapshot_seq}",
            scan.first_seq
        )));
    }
    let mut last_seq = snapshot_seq;
    let mut replayed = 0;
    for (seq, m) in &scan.records {
        if *seq <= snapshot_seq {
            continue;
        }
        state.apply(m).map_err(|e| {
            Error::new(ErrorKind::CorruptData, format!("replay of seq {seq} ({}) failed: {e}", m.name()))
        })?;
        last_seq = *seq;
        replayed += 1;
    }
    let journal_last = (scan.first_seq + scan.records.len() as u64).saturating_sub(1);
    let journal_len = if journal_last < snapshot_seq {
        // Crash between writing a snapshot and restarting the journal: start it afresh.
        restart(journal)?;
        HEADER_LEN
    } else if scan.cut > 0 {
        journal.truncate(scan.valid_len as u64).map_err(|e| Error::io("journal truncate", &e))?;
        scan.valid_len
    } else {
        bytes.len()
    };
    let journal_len = journal_len as u64;
    Ok(Recovered { state, last_seq, snapshot_seq, replayed, cut_bytes: scan.cut as u64, journal_len })
}
