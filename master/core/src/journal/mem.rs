//! An in-memory [`Storage`] that can crash: it keeps synced bytes apart from unsynced ones, and a
//! simulated crash keeps only the synced bytes plus, optionally, a torn prefix of the rest.

use std::io;
use std::sync::{Arc, Mutex, MutexGuard};

use super::storage::Storage;

#[derive(Debug, Default)]
struct Inner {
    synced: Vec<u8>,
    unsynced: Vec<u8>,
    /// Operations (append/sync/truncate/replace) left before the device "dies".
    ops_left: Option<u64>,
    dead: bool,
    /// Most bytes it holds (a disk that fills up); `None`: no limit.
    room: Option<u64>,
}

impl Inner {
    fn len(&self) -> u64 {
        (self.synced.len() + self.unsynced.len()) as u64
    }
}

fn full() -> io::Error {
    io::Error::new(io::ErrorKind::StorageFull, "simulated full disk")
}

/// Cloning shares the same bytes, so a test keeps a handle across "restarts".
#[derive(Debug, Clone, Default)]
pub struct MemStorage {
    inner: Arc<Mutex<Inner>>,
}

impl MemStorage {
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding this lock can only come from a test assertion; the bytes are
        // still consistent, so keep using them.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// After `ops` more storage operations, every operation fails (the machine "died").
    pub fn fail_after(&self, ops: u64) {
        self.lock().ops_left = Some(ops);
    }

    /// Holds at most `bytes` from now on (`None`: no limit): an append past it writes what
    /// fits and fails with `StorageFull`, as a full disk does; `replace` needs room for the
    /// whole new content.
    pub fn set_room(&self, bytes: Option<u64>) {
        self.lock().room = bytes;
    }

    /// Whether the device died (see [`MemStorage::fail_after`]).
    pub fn is_dead(&self) -> bool {
        self.lock().dead
    }

    /// Simulates a crash and reboot: unsynced bytes are lost except their first `torn` bytes.
    pub fn crash(&self, torn: usize) {
        let mut g = self.lock();
        let keep = torn.min(g.unsynced.len());
        let tail: Vec<u8> = g.unsynced.drain(..keep).collect();
        g.synced.extend_from_slice(&tail);
        g.unsynced.clear();
        g.ops_left = None;
        g.dead = false;
    }

    /// Bytes written but not yet synced.
    pub fn unsynced_len(&self) -> usize {
        self.lock().unsynced.len()
    }

    /// Every stored byte (synced then unsynced).
    pub fn bytes(&self) -> Vec<u8> {
        let g = self.lock();
        let mut out = g.synced.clone();
        out.extend_from_slice(&g.unsynced);
        out
    }

    /// Overwrites the content (synced), for corruption tests.
    pub fn set_bytes(&self, bytes: Vec<u8>) {
        let mut g = self.lock();
        g.synced = bytes;
        g.unsynced.clear();
    }

    fn op(&self) -> io::Result<MutexGuard<'_, Inner>> {
        let mut g = self.lock();
        if let Some(left) = g.ops_left {
            if left == 0 {
                g.dead = true;
            } else {
                g.ops_left = Some(left - 1);
            }
        }
        if g.dead {
            return Err(io::Error::other("simulated device failure"));
        }
        Ok(g)
    }
}

impl Storage for MemStorage {
    fn append(&mut self, bytes: &[u8]) -> io::Result<()> {
        let mut g = self.op()?;
        let fits = g.room.map_or(bytes.len(), |room| room.saturating_sub(g.len()).min(bytes.len() as u64) as usize);
        g.unsynced.extend_from_slice(&bytes[..fits]);
        if fits < bytes.len() { Err(full()) } else { Ok(()) }
    }

    fn sync(&mut self) -> io::Result<()> {
        let mut g = self.op()?;
        let pending = std::mem::take(&mut g.unsynced);
        g.synced.extend_from_slice(&pending);
        Ok(())
    }

    fn read_all(&mut self) -> io::Result<Vec<u8>> {
        Ok(self.bytes())
    }

    fn truncate(&mut self, len: u64) -> io::Result<()> {
        let mut g = self.op()?;
        let pending = std::mem::take(&mut g.unsynced);
        g.synced.extend_from_slice(&pending);
        let len = usize::try_from(len).unwrap_or(usize::MAX).min(g.synced.len());
        g.synced.truncate(len);
        Ok(())
    }

    fn replace(&mut self, bytes: &[u8]) -> io::Result<()> {
        let mut g = self.op()?;
        if g.room.is_some_and(|room| bytes.len() as u64 > room) {
            return Err(full());
        }
        g.synced = bytes.to_vec();
        g.unsynced.clear();
        Ok(())
    }

    fn has_room(&mut self, bytes: u64) -> io::Result<()> {
        let g = self.op()?;
        if g.room.is_some_and(|room| g.len() + bytes > room) { Err(full()) } else { Ok(()) }
    }
}
