//! The Raft log on disk (`raft-log`, `raft-vote` in the master's directory; bytes in
//! `codec.rs`). Entries are kept in memory too: a log holds what the last snapshot does not
//! cover, which openraft purges. `append` writes every entry it is given with one write and
//! one fdatasync, and reports them flushed only after that sync.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::ops::RangeBounds;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use cv_master_core::journal::{FileStorage, Storage};
use openraft::storage::{LogFlushed, LogState, RaftLogStorage};
use openraft::{RaftLogReader, StorageError, StorageIOError};

use crate::codec::{HEADER_LEN, decode_vote, encode_entry, encode_header, encode_vote, scan};
use crate::{Entry, LogId, TypeConfig, Vote};

#[derive(Debug)]
struct Inner {
    log: FileStorage,
    vote_file: FileStorage,
    vote: Option<Vote>,
    purged: Option<LogId>,
    /// index → (byte offset in the file, entry).
    entries: BTreeMap<u64, (u64, Entry)>,
    len: u64,
    /// A write failed and what reached the file could not be cut again: refuse all writes
    /// (openraft stops the node on a storage error; a restart reopens and cuts the tail).
    failed: bool,
}

/// The log store; clones share it (the reader openraft asks for is a clone).
#[derive(Debug, Clone)]
pub struct FileLog(Arc<Mutex<Inner>>);

fn damaged(dir: &Path, e: &dyn std::fmt::Display) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, format!("raft log in {}: {e}", dir.display()))
}

fn io_err(e: impl std::error::Error + Send + Sync + 'static) -> StorageError<u64> {
    StorageIOError::write_logs(&e).into()
}

impl FileLog {
    /// Opens (or creates) the log in `dir`, cutting a torn last frame. Damage anywhere else is
    /// `InvalidData`, naming the file.
    pub fn open(dir: &Path) -> std::io::Result<Self> {
        std::fs::create_dir_all(dir)?;
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
        Ok(Self(Arc::new(Mutex::new(Inner { log, vote_file, vote, purged, entries, len, failed: false }))))
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Appends `entries` with one write and one fdatasync; they are durable when this returns.
    pub fn write(&self, entries: impl IntoIterator<Item = Entry>) -> std::io::Result<()> {
        let mut g = self.lock();
        if g.failed {
            return Err(std::io::Error::other("an earlier raft log write failed"));
        }
        let mut buf = Vec::new();
        let mut placed = Vec::new();
        for e in entries {
            let at = g.len + buf.len() as u64;
            buf.extend(encode_entry(&e).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?);
            placed.push((at, e));
        }
        let len = g.len;
        let r = g.log.append(&buf).and_then(|()| g.log.sync());
        if let Err(e) = r {
            // What did reach the file is cut again, so the file never holds a partial batch.
            g.failed = g.log.truncate(len).is_err();
            return Err(e);
        }
        g.len += buf.len() as u64;
        for (at, e) in placed {
            g.entries.insert(e.log_id.index, (at, e));
        }
        Ok(())
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
        let mut g = self.lock();
        g.vote_file.replace(&encode_vote(vote)).map_err(|e| StorageIOError::write_vote(&e))?;
        g.vote = Some(*vote);
        Ok(())
    }

    async fn read_vote(&mut self) -> Result<Option<Vote>, StorageError<u64>> {
        Ok(self.lock().vote)
    }

    async fn append<I>(&mut self, entries: I, callback: LogFlushed<TypeConfig>) -> Result<(), StorageError<u64>>
    where
        I: IntoIterator<Item = Entry> + Send,
    {
        match self.write(entries).map_err(io_err) {
            Ok(()) => {
                callback.log_io_completed(Ok(()));
                Ok(())
            }
            Err(e) => {
                callback.log_io_completed(Err(std::io::Error::other(e.to_string())));
                Err(e)
            }
        }
    }

    async fn truncate(&mut self, log_id: LogId) -> Result<(), StorageError<u64>> {
        let mut g = self.lock();
        let Some(&(at, _)) = g.entries.get(&log_id.index) else { return Ok(()) };
        g.log.truncate(at).map_err(io_err)?;
        g.len = at;
        g.entries.split_off(&log_id.index);
        Ok(())
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), StorageError<u64>> {
        let mut g = self.lock();
        let kept = g.entries.split_off(&(log_id.index + 1));
        g.entries = kept;
        g.purged = Some(log_id);
        // openraft's purge point moves one entry per commit for a while after a snapshot, so
        // the file is rewritten only once its purged prefix is at least as large as what is
        // kept (amortized O(1) per entry). Until then a reopen finds the older purged id and
        // a few more entries, all committed and covered by the snapshot: harmless.
        let kept_from = g.entries.values().next().map_or(g.len, |(at, _)| *at);
        if kept_from - (HEADER_LEN as u64) < g.len - kept_from {
            return Ok(());
        }
        let mut bytes = encode_header(Some(&log_id));
        let mut offsets = Vec::with_capacity(g.entries.len());
        for (_, e) in g.entries.values() {
            offsets.push(bytes.len() as u64);
            bytes.extend(encode_entry(e).map_err(io_err)?);
        }
        g.log.replace(&bytes).map_err(io_err)?;
        g.len = bytes.len() as u64;
        for ((at, _), new_at) in g.entries.values_mut().zip(offsets) {
            *at = new_at;
        }
        Ok(())
    }
}
