//! The Raft log on disk (`raft-log`, `raft-vote` in the master's directory; bytes in
//! `codec.rs`). Entries are kept in memory too: a log holds what the last snapshot does not
//! cover, which openraft purges.
//!
//! One writer thread owns the file. `append` places the entries in memory (openraft may send
//! them to followers at once: the leader's own flush and the followers' run side by side) and
//! queues their bytes; the writer takes every queued append with one write and one fdatasync
//! (group commit across appends) and reports each flushed only after that sync. Truncate and
//! purge go through the same queue, so they happen after the writes queued before them, and
//! wait for it. openraft's core never waits on an fsync.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::ops::RangeBounds;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use cv_master_core::journal::{FileStorage, Storage};
use openraft::storage::{LogFlushed, LogState, RaftLogStorage};
use openraft::{RaftLogReader, StorageError, StorageIOError};

use crate::codec::{HEADER_LEN, decode_vote, encode_entry, encode_header, encode_vote, scan};
use crate::{Entry, LogId, TypeConfig, Vote};

#[derive(Debug)]
struct Inner {
    vote_file: FileStorage,
    vote: Option<Vote>,
    purged: Option<LogId>,
    /// index → (byte offset in the file once written, entry).
    entries: BTreeMap<u64, (u64, Entry)>,
    /// Where the next entry goes: the file's length once the queued writes are done.
    len: u64,
}

/// Who to tell that a write is durable.
enum Done {
    Raft(LogFlushed<TypeConfig>),
    Wait(flume::Sender<std::io::Result<()>>),
}

impl Done {
    fn tell(self, r: &std::io::Result<()>) {
        let r = match r {
            Ok(()) => Ok(()),
            Err(e) => Err(std::io::Error::new(e.kind(), e.to_string())),
        };
        match self {
            Done::Raft(cb) => cb.log_io_completed(r),
            Done::Wait(tx) => drop(tx.send(r)),
        }
    }
}

enum Job {
    Write(Vec<u8>, Done),
    Truncate(u64, flume::Sender<std::io::Result<()>>),
    Replace(Vec<u8>, flume::Sender<std::io::Result<()>>),
}

/// A write that failed for want of space: space freed later cures it, so it is held and tried
/// again instead of stopping the node (master/HA.md, "A full log disk").
pub(crate) fn is_no_space(e: &std::io::Error) -> bool {
    matches!(e.kind(), std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded)
}

/// How long a write held for want of space waits before it is tried again.
pub(crate) const NO_SPACE_RETRY: Duration = Duration::from_millis(250);

/// Whether this master's Raft files cannot be written for want of space, and where they are.
#[derive(Debug)]
pub struct Space {
    dir: std::path::PathBuf,
    full: AtomicBool,
}

impl Space {
    pub fn is_full(&self) -> bool {
        self.full.load(Ordering::Acquire)
    }

    /// Records the outcome of a write of `what`; `true` if it failed for want of space (hold
    /// it and try again).
    pub(crate) fn note(&self, what: &str, r: &std::io::Result<()>) -> bool {
        match r {
            Err(e) if is_no_space(e) => {
                if !self.full.swap(true, Ordering::AcqRel) {
                    tracing::error!(
                        dir = %self.dir.display(), what, error = %e,
                        "no space left for the raft files: writes are held until space is freed, and this \
                         master steps aside"
                    );
                }
                true
            }
            Ok(()) => {
                if self.full.swap(false, Ordering::AcqRel) {
                    tracing::info!(dir = %self.dir.display(), what, "the raft files can be written again");
                }
                false
            }
            Err(_) => false,
        }
    }
}

/// The log store; clones share it (the reader openraft asks for is a clone).
#[derive(Debug, Clone)]
pub struct FileLog {
    inner: Arc<Mutex<Inner>>,
    jobs: flume::Sender<Job>,
    /// A write failed and what reached the file could not be cut again: refuse all writes
    /// (openraft stops the node on a storage error; a restart reopens and cuts the tail).
    failed: Arc<AtomicBool>,
    space: Arc<Space>,
}

impl std::fmt::Debug for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Job")
    }
}

fn damaged(dir: &Path, e: &dyn std::fmt::Display) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, format!("raft log in {}: {e}", dir.display()))
}

fn io_err(e: impl std::error::Error + Send + Sync + 'static) -> StorageError<u64> {
    StorageIOError::write_logs(&e).into()
}

/// The writer thread: runs queued jobs in order, each run of writes with one write + one sync.
fn run_writer(
    mut log: FileStorage,
    mut file_len: u64,
    jobs: flume::Receiver<Job>,
    failed: Arc<AtomicBool>,
    space: Arc<Space>,
) {
    let mut next: Option<Job> = None;
    loop {
        let job = match next.take() {
            Some(j) => j,
            None => match jobs.recv() {
                Ok(j) => j,
                Err(_) => return,
            },
        };
        match job {
            Job::Write(buf, done) => {
                let (mut bufs, mut dones) = (vec![buf], vec![done]);
                while let Ok(j) = jobs.try_recv() {
                    match j {
                        Job::Write(b, d) => {
                            bufs.push(b);
                            dones.push(d);
                        }
                        other => {
                            next = Some(other);
                            break;
                        }
                    }
                }
                let all: Vec<u8> = bufs.concat();
                let r = loop {
                    if failed.load(Ordering::Acquire) {
                        break Err(std::io::Error::other("an earlier raft log write failed"));
                    }
                    // A write refused for want of space is cut back and held (no one is told:
                    // openraft waits, and the node steps aside); a failed sync is not retried,
                    // as the page cache's state is unknown after it.
                    let written = log.append(&all);
                    if space.note("raft-log", &written) && log.truncate(file_len).is_ok() {
                        std::thread::sleep(NO_SPACE_RETRY);
                        continue;
                    }
                    break written.and_then(|()| log.sync());
                };
                match &r {
                    Ok(()) => file_len += all.len() as u64,
                    // What did reach the file is cut again, so it never holds a partial batch;
                    // the writes queued behind were placed after it, so none may follow.
                    Err(_) => {
                        let _ = log.truncate(file_len);
                        failed.store(true, Ordering::Release);
                    }
                }
                for d in dones {
                    d.tell(&r);
                }
            }
            Job::Truncate(at, tx) => {
                let r = log.truncate(at);
                if r.is_ok() {
                    file_len = at;
                }
                let _ = tx.send(r);
            }
            Job::Replace(bytes, tx) => {
                let r = log.replace(&bytes);
                if r.is_ok() {
                    file_len = bytes.len() as u64;
                }
                let _ = tx.send(r);
            }
        }
    }
}

impl FileLog {
    /// Opens (or creates) the log in `dir`, cutting a torn last frame, and starts its writer
    /// thread. Damage anywhere else is `InvalidData`, naming the file.
    pub fn open(dir: &Path) -> std::io::Result<Self> {
        // The log holds every mount's credentials: the master's user only.
        cv_master_core::journal::private_dir(dir)?;
        let mut log = FileStorage::new(dir.join("raft-log"));
        let mut vote_file = FileStorage::new(dir.join("raft-vote"));
        let vote = decode_vote(&vote_file.read_all()?).map_err(|e| damaged(dir, &e))?;
        let bytes = log.read_all()?;
        let (purged, entries, len) = if bytes.is_empty() {
            let h = encode_header(None);
            log.replace(&h)?;
            (None, BTreeMap::new(), h.len() as u64)
        } else {
            let s = scan(&bytes).map_err(|e| damaged(dir, &e))?;
            if s.valid_len < bytes.len() {
                log.truncate(s.valid_len as u64)?;
            }
            let entries = s.entries.into_iter().map(|(at, e)| (e.log_id.index, (at as u64, e))).collect();
            (s.purged, entries, s.valid_len as u64)
        };
        let (jobs, rx) = flume::unbounded();
        let failed = Arc::new(AtomicBool::new(false));
        let space = Arc::new(Space { dir: dir.to_path_buf(), full: AtomicBool::new(false) });
        let (f, sp) = (failed.clone(), space.clone());
        std::thread::Builder::new().name("cv-raft-log".into()).spawn(move || run_writer(log, len, rx, f, sp))?;
        let inner = Inner { vote_file, vote, purged, entries, len };
        Ok(Self { inner: Arc::new(Mutex::new(inner)), jobs, failed, space })
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Places `entries` in memory and queues their bytes; `done` hears when they are durable.
    fn queue(&self, entries: impl IntoIterator<Item = Entry>, done: Done) -> std::io::Result<()> {
        if self.failed.load(Ordering::Acquire) {
            return Err(std::io::Error::other("an earlier raft log write failed"));
        }
        let mut g = self.lock();
        let mut buf = Vec::new();
        for e in entries {
            let at = g.len + buf.len() as u64;
            buf.extend(encode_entry(&e).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?);
            g.entries.insert(e.log_id.index, (at, e));
        }
        g.len += buf.len() as u64;
        self.jobs.send(Job::Write(buf, done)).map_err(|_| std::io::Error::other("the raft log writer stopped"))
    }

    /// Runs a job that must follow every write queued before it, and waits for it.
    async fn after_writes(&self, job: impl FnOnce(flume::Sender<std::io::Result<()>>) -> Job) -> std::io::Result<()> {
        let (tx, rx) = flume::bounded(1);
        self.jobs.send(job(tx)).map_err(|_| std::io::Error::other("the raft log writer stopped"))?;
        rx.recv_async().await.unwrap_or_else(|_| Err(std::io::Error::other("the raft log writer stopped")))
    }

    /// Appends `entries` with one write and one fdatasync; they are durable when this returns.
    pub fn write(&self, entries: impl IntoIterator<Item = Entry>) -> std::io::Result<()> {
        let (tx, rx) = flume::bounded(1);
        self.queue(entries, Done::Wait(tx))?;
        rx.recv().unwrap_or_else(|_| Err(std::io::Error::other("the raft log writer stopped")))
    }

    /// Whether the Raft files want space, and where they are.
    pub fn space(&self) -> &Arc<Space> {
        &self.space
    }

    /// The last entry's id (or the last purged one's), as openraft's log state says.
    pub fn last_log_id(&self) -> Option<LogId> {
        let g = self.lock();
        g.entries.values().next_back().map(|(_, e)| e.log_id).or(g.purged)
    }

    /// Entries in `range`, for the state machine's rebuild (master/HA.md) as for openraft.
    pub fn entries(&self, range: impl RangeBounds<u64>) -> Vec<Entry> {
        self.lock().entries.range(range).map(|(_, (_, e))| e.clone()).collect()
    }
}

impl RaftLogReader<TypeConfig> for FileLog {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + Send>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StorageError<u64>> {
        Ok(self.entries(range))
    }
}

impl RaftLogStorage<TypeConfig> for FileLog {
    type LogReader = FileLog;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError<u64>> {
        let g = self.lock();
        let last = g.entries.values().next_back().map(|(_, e)| e.log_id).or(g.purged);
        Ok(LogState { last_purged_log_id: g.purged, last_log_id: last })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote) -> Result<(), StorageError<u64>> {
        // Held while there is no space, as log writes are (the node waits; it is unfit).
        loop {
            let r = self.lock().vote_file.replace(&encode_vote(vote));
            if !self.space.note("raft-vote", &r) {
                r.map_err(|e| StorageIOError::write_vote(&e))?;
                break;
            }
            tokio::time::sleep(NO_SPACE_RETRY).await;
        }
        self.lock().vote = Some(*vote);
        Ok(())
    }

    async fn read_vote(&mut self) -> Result<Option<Vote>, StorageError<u64>> {
        Ok(self.lock().vote)
    }

    async fn append<I>(&mut self, entries: I, callback: LogFlushed<TypeConfig>) -> Result<(), StorageError<u64>>
    where
        I: IntoIterator<Item = Entry> + Send,
    {
        // The callback is told by the writer thread once the entries are durable.
        self.queue(entries, Done::Raft(callback)).map_err(io_err)
    }

    async fn truncate(&mut self, log_id: LogId) -> Result<(), StorageError<u64>> {
        let at = {
            let mut g = self.lock();
            let Some(&(at, _)) = g.entries.get(&log_id.index) else { return Ok(()) };
            g.len = at;
            g.entries.split_off(&log_id.index);
            at
        };
        self.after_writes(|tx| Job::Truncate(at, tx)).await.map_err(io_err)
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), StorageError<u64>> {
        let bytes = {
            let mut g = self.lock();
            match Self::purge_in_memory(&mut g, log_id).map_err(io_err)? {
                Some(bytes) => bytes,
                None => return Ok(()),
            }
        };
        self.after_writes(|tx| Job::Replace(bytes, tx)).await.map_err(io_err)
    }
}

impl FileLog {
    /// Drops entries up to `log_id` from memory; the file's new bytes when it is to be
    /// rewritten (the offsets in memory already point into them).
    fn purge_in_memory(g: &mut Inner, log_id: LogId) -> std::io::Result<Option<Vec<u8>>> {
        let kept = g.entries.split_off(&(log_id.index + 1));
        g.entries = kept;
        g.purged = Some(log_id);
        // openraft's purge point moves one entry per commit for a while after a snapshot, so
        // the file is rewritten only once its purged prefix is at least as large as what is
        // kept (amortized O(1) per entry). Until then a reopen finds the older purged id and
        // a few more entries, all committed and covered by the snapshot: harmless.
        let kept_from = g.entries.values().next().map_or(g.len, |(at, _)| *at);
        if kept_from - (HEADER_LEN as u64) < g.len - kept_from {
            return Ok(None);
        }
        let mut bytes = encode_header(Some(&log_id));
        let mut offsets = Vec::with_capacity(g.entries.len());
        for (_, e) in g.entries.values() {
            offsets.push(bytes.len() as u64);
            bytes.extend(encode_entry(e).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?);
        }
        g.len = bytes.len() as u64;
        for ((at, _), new_at) in g.entries.values_mut().zip(offsets) {
            *at = new_at;
        }
        Ok(Some(bytes))
    }
}
