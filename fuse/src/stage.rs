//! One file's staged contents. cv files are write-once, so an edit that is
//! not a front-to-back stream (a write at another offset, a truncate to a
//! new size, a write into an existing file) is made to a local copy; the
//! copy is published as a new cv version at flush, fsync and close.
//!
//! The staging file is local and its pages sit in the page cache, so its
//! reads and writes are made in place on the runtime: they take
//! microseconds, less than handing them to a blocking thread would.

use crate::errno::errno_of;
use cv_client::{Client, ErrorKind, FileStatus};
use fuser::Errno;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};
use tokio::sync::Mutex;

/// Versions being published were once written under names starting with this; listings
/// still hide them (a mount of an earlier release that crashed mid-publish leaves one behind).
pub(crate) const TEMP_PREFIX: &str = ".cv-stage-";
/// Piece size of the copies in and out.
const CHUNK: usize = 1 << 20;

/// Where a staged file's content starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Start {
    /// Empty, and different from cv (a pending truncation or an abandoned
    /// new file): it is published even if nothing else changes.
    Empty,
    /// A copy of the complete file cv holds at the path.
    Cv,
}

/// The staged contents of one inode.
#[derive(Debug)]
pub(crate) struct Stage {
    local: PathBuf,
    inner: Mutex<Inner>,
}

#[derive(Debug)]
struct Inner {
    file: File,
    len: u64,
    /// Changed since the last publish.
    dirty: bool,
    /// The status of the version it was copied from or last published as;
    /// length and mtime are this file's own.
    status: FileStatus,
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

fn io(e: std::io::Error) -> Errno {
    tracing::warn!("staging file: {e}");
    Errno::from_i32(e.raw_os_error().unwrap_or(libc::EIO))
}

impl Stage {
    /// Makes the staging file `local` for cv `path`, with the content `start` says.
    pub(crate) async fn begin(client: &Client, path: &str, local: PathBuf, start: Start) -> Result<Stage, Errno> {
        let file = File::options().read(true).write(true).create_new(true).open(&local).map_err(io)?;
        let stage = Stage { local, inner: Mutex::new(Inner { file, len: 0, dirty: true, status: blank(path) }) };
        let filled = match start {
            Start::Empty => match client.stat(path).await {
                Ok(st) => Ok(st),
                // A file unlinked meanwhile still gets a stage: nothing publishes it.
                Err(e) if e.kind() == ErrorKind::NotFound => Ok(blank(path)),
                Err(e) => Err(errno_of(&e)),
            },
            Start::Cv => stage.copy_in(client, path).await,
        };
        match filled {
            Ok(st) => {
                let mut s = stage.inner.lock().await;
                s.dirty = start == Start::Empty;
                s.status = st;
                drop(s);
                Ok(stage)
            }
            // Dropping the stage removes the staging file.
            Err(e) => Err(e),
        }
    }

    /// Copies the complete file at `path` into the staging file.
    async fn copy_in(&self, client: &Client, path: &str) -> Result<FileStatus, Errno> {
        let f = client.open(path).await.map_err(|e| errno_of(&e))?;
        let mut r = f.sequential(0);
        let mut buf = vec![0u8; CHUNK];
        let mut s = self.inner.lock().await;
        loop {
            let n = r.read(&mut buf).await.map_err(|e| errno_of(&e))?;
            if n == 0 {
                break;
            }
            s.file.write_all_at(&buf[..n], s.len).map_err(io)?;
            s.len += n as u64;
        }
        if s.len != f.len() {
            tracing::warn!(path, got = s.len, want = f.len(), "short copy into staging");
            return Err(Errno::EIO);
        }
        Ok(f.status().clone())
    }

    /// The file's length and status as the kernel should see them.
    pub(crate) async fn status(&self) -> FileStatus {
        let s = self.inner.lock().await;
        FileStatus { length: s.len, ..s.status.clone() }
    }

    pub(crate) async fn read(&self, offset: u64, size: u32) -> Result<Vec<u8>, Errno> {
        let s = self.inner.lock().await;
        if offset >= s.len {
            return Ok(Vec::new());
        }
        let mut buf = vec![0u8; u64::from(size).min(s.len - offset) as usize];
        s.file.read_exact_at(&mut buf, offset).map_err(io)?;
        Ok(buf)
    }

    pub(crate) async fn write(&self, offset: u64, data: &[u8]) -> Result<u32, Errno> {
        let mut s = self.inner.lock().await;
        s.file.write_all_at(data, offset).map_err(io)?;
        s.len = s.len.max(offset + data.len() as u64);
        s.touch();
        Ok(data.len() as u32)
    }

    pub(crate) async fn truncate(&self, size: u64) -> Result<(), Errno> {
        let mut s = self.inner.lock().await;
        s.file.set_len(size).map_err(io)?;
        s.len = size;
        s.touch();
        Ok(())
    }

    /// Writes the staged bytes as a new cv version at `path` when they
    /// changed; returns after the version is complete. A temporary sibling
    /// is written first and renamed over the file, so the old version stays
    /// whole until the new one is.
    pub(crate) async fn publish(&self, client: &Client, path: &str) -> Result<Option<FileStatus>, Errno> {
        let mut s = self.inner.lock().await;
        if !s.dirty {
            return Ok(None);
        }
        // Written over the path: the master publishes it when complete, in one step (atomic
        // replace), so the old version is read until then and stays if this fails.
        match write_version(client, &s.file, s.len, path).await {
            Ok(st) => {
                s.dirty = false;
                s.status = FileStatus { path: path.to_string(), ..st };
                Ok(Some(s.status.clone()))
            }
            // Stays dirty: the next flush tries again (the writer gave its file up).
            Err(e) => Err(errno_of(&e)),
        }
    }

    /// The staged bytes will not be published (the file was unlinked).
    pub(crate) async fn discard(&self) {
        self.inner.lock().await.dirty = false;
    }

    /// Unlinks the file: runs `delete` holding the stage, so a publish under way finishes
    /// first (the delete then removes what it published) and none starts before the stage
    /// is discarded. If `delete` fails, the stage is kept.
    pub(crate) async fn unlink<E>(&self, delete: impl std::future::Future<Output = Result<(), E>>) -> Result<(), E> {
        let mut s = self.inner.lock().await;
        delete.await?;
        s.dirty = false;
        Ok(())
    }

    pub(crate) async fn is_dirty(&self) -> bool {
        self.inner.lock().await.dirty
    }
}

impl Drop for Stage {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.local);
    }
}

impl Inner {
    fn touch(&mut self) {
        self.dirty = true;
        // ctime/mtime move with every change, as a local file's would.
        self.status.mtime_ms = self.status.mtime_ms.max(now_ms());
    }
}

/// A status for a file cv does not hold (yet).
fn blank(path: &str) -> FileStatus {
    FileStatus {
        id: 0,
        path: path.to_string(),
        kind: cv_client::FileKind::File,
        length: 0,
        mtime_ms: now_ms(),
        version: 0,
        mode: 0o644,
        complete: false,
        block_size: 0,
    }
}

/// Streams `len` bytes of `file` to a new version of `path`, published when complete.
async fn write_version(client: &Client, file: &File, len: u64, path: &str) -> Result<FileStatus, cv_client::Error> {
    let mut w = client.create(path, true).await?;
    let mut buf = vec![0u8; CHUNK.min(len as usize)];
    let mut off = 0;
    while off < len {
        let n = (len - off).min(CHUNK as u64) as usize;
        file.read_exact_at(&mut buf[..n], off)
            .map_err(|e| cv_client::Error::new(ErrorKind::Other, format!("staging file: {e}")))?;
        w.write(&buf[..n]).await?;
        off += n as u64;
    }
    w.close().await
}

/// Sequence numbers for staging file names, so two never share one.
pub(crate) fn next_seq() -> u64 {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    SEQ.fetch_add(1, Ordering::Relaxed)
}
