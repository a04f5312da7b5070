//! Writes of one open file. cv files are write-once: a writer streams bytes
//! in order and `close` completes the file. So a handle streams writes that
//! continue exactly where the last one ended, starting at 0 on a new or
//! truncated file; the file is completed (durable and visible to every
//! client) when the application closes it. Anything else asks for the file
//! to be staged (see [`crate::stage`]); from then on the stage serves it.

use crate::errno::errno_of;
use crate::order::{Order, Turn};
use crate::stage::Start;
use cv_client::{Client, FileStatus, Writer};
use fuser::Errno;
use std::sync::atomic::{AtomicU32, Ordering};
use tokio::sync::Mutex;

/// One file open for writing.
#[derive(Debug)]
pub(crate) struct WriteHandle {
    client: Client,
    path: String,
    state: Mutex<State>,
    order: Order,
    /// Thread that opened or last wrote: a close from its process completes
    /// the file; a close of an inherited copy (a forked child) does not.
    owner: AtomicU32,
}

#[derive(Debug)]
enum State {
    /// Opened, nothing written; the file holds `len` bytes (after a pending
    /// truncation, none).
    Idle { len: u64, truncate: bool },
    /// Bytes are streaming to the workers.
    Writing(Writer),
    /// Completed by a close.
    Done(u64),
    /// A write failed: the file cannot be completed, every later call says so.
    Failed(Errno),
    /// The file's content is staged; the stage serves and publishes it.
    Staged,
}

/// What a write or truncate through the handle did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Streamed {
    /// Done by the stream (`n` bytes written).
    Done(u32),
    /// Not something a stream can do: stage the file and do it there.
    NeedsStage,
}

impl WriteHandle {
    /// A handle with a writer already made (create).
    pub(crate) fn created(client: Client, path: String, writer: Writer, pid: u32) -> Self {
        let state = Mutex::new(State::Writing(writer));
        WriteHandle { client, path, state, order: Order::new(), owner: AtomicU32::new(pid) }
    }

    /// A handle on an existing complete file of `len` bytes; `truncate`
    /// when opened with O_TRUNC.
    pub(crate) fn opened(client: Client, path: String, len: u64, truncate: bool, pid: u32) -> Self {
        let state = Mutex::new(State::Idle { len, truncate });
        WriteHandle { client, path, state, order: Order::new(), owner: AtomicU32::new(pid) }
    }

    /// A handle on a file that is staged already.
    pub(crate) fn staged(client: Client, path: String, pid: u32) -> Self {
        let state = Mutex::new(State::Staged);
        WriteHandle { client, path, state, order: Order::new(), owner: AtomicU32::new(pid) }
    }

    /// A place in this file's request queue (see [`crate::order`]).
    pub(crate) fn ticket(&self) -> Turn {
        self.order.ticket()
    }

    /// The length the file has as seen through this handle.
    pub(crate) async fn len(&self) -> u64 {
        match &*self.state.lock().await {
            State::Idle { truncate: true, .. } => 0,
            State::Idle { len, .. } | State::Done(len) => *len,
            State::Writing(w) => w.len(),
            State::Failed(_) | State::Staged => 0,
        }
    }

    /// Whether this handle's content went to the stage (it wrote there, or opened a staged file).
    pub(crate) async fn is_staged(&self) -> bool {
        matches!(*self.state.lock().await, State::Staged)
    }

    /// Whether a close from thread `pid` is the writer's own close.
    pub(crate) fn closed_by_owner(&self, pid: u32) -> bool {
        crate::process::same_process(self.owner.load(Ordering::Relaxed), pid)
    }

    /// Writes `data` at `offset` for thread `pid`; only the next byte of the
    /// stream is accepted.
    pub(crate) async fn write(&self, offset: u64, data: &[u8], pid: u32) -> Result<Streamed, Errno> {
        // The kernel's own writeback threads come as pid 0: not an owner.
        if pid != 0 {
            self.owner.store(pid, Ordering::Relaxed);
        }
        let mut st = self.state.lock().await;
        let fresh = matches!(*st, State::Idle { len: 0, .. } | State::Idle { truncate: true, .. } | State::Done(0));
        if fresh && offset == 0 {
            let w = self.client.create(&self.path, true).await.map_err(|e| errno_of(&e))?;
            *st = State::Writing(w);
        }
        match &mut *st {
            State::Writing(w) if w.len() == offset => match w.write(data).await {
                Ok(()) => Ok(Streamed::Done(data.len() as u32)),
                Err(e) => {
                    let errno = errno_of(&e);
                    *st = State::Failed(errno);
                    Err(errno)
                }
            },
            State::Failed(errno) => Err(*errno),
            // Not the next byte: a random write, an append to a complete
            // file, or a rewrite; cv cannot change bytes once written.
            other => {
                tracing::debug!(path = %self.path, offset, state = ?describe(other), "write staged");
                Ok(Streamed::NeedsStage)
            }
        }
    }

    /// `ftruncate` through this handle: a stream does it to 0 before
    /// anything was written, or to the length it already has.
    pub(crate) async fn truncate(&self, size: u64) -> Result<Streamed, Errno> {
        let mut st = self.state.lock().await;
        match &*st {
            State::Idle { len, truncate } => {
                let cur = if *truncate { 0 } else { *len };
                if size == cur {
                    return Ok(Streamed::Done(0));
                }
                if size == 0 {
                    *st = State::Idle { len: *len, truncate: true };
                    return Ok(Streamed::Done(0));
                }
                Ok(Streamed::NeedsStage)
            }
            State::Writing(w) if w.len() == size => Ok(Streamed::Done(0)),
            State::Done(len) if *len == size => Ok(Streamed::Done(0)),
            State::Done(len) if size == 0 => {
                *st = State::Idle { len: *len, truncate: true };
                Ok(Streamed::Done(0))
            }
            State::Failed(errno) => Err(*errno),
            _ => Ok(Streamed::NeedsStage),
        }
    }

    /// Hands the file over to a stage: what its content starts as. A stream
    /// with bytes is completed first (its bytes become a version the stage
    /// copies); one without any is dropped, and the stage replaces it.
    pub(crate) async fn to_stage(&self) -> Result<Start, Errno> {
        let mut st = self.state.lock().await;
        let start = match std::mem::replace(&mut *st, State::Staged) {
            State::Idle { truncate: true, .. } | State::Idle { len: 0, .. } | State::Done(0) => Start::Empty,
            State::Idle { .. } | State::Done(_) | State::Staged => Start::Cv,
            State::Writing(w) if w.is_empty() => Start::Empty,
            State::Writing(w) => match w.close().await {
                Ok(_) => Start::Cv,
                Err(e) => {
                    let errno = errno_of(&e);
                    *st = State::Failed(errno);
                    return Err(errno);
                }
            },
            State::Failed(errno) => {
                *st = State::Failed(errno);
                return Err(errno);
            }
        };
        Ok(start)
    }

    /// Completes the file (on close or flush): after this it is durable and
    /// every client sees it. Returns the final status when something changed.
    pub(crate) async fn complete(&self) -> Result<Option<FileStatus>, Errno> {
        let mut st = self.state.lock().await;
        match std::mem::replace(&mut *st, State::Failed(Errno::EIO)) {
            State::Writing(w) => match w.close().await {
                Ok(status) => {
                    *st = State::Done(status.length);
                    Ok(Some(status))
                }
                Err(e) => {
                    let errno = errno_of(&e);
                    *st = State::Failed(errno);
                    Err(errno)
                }
            },
            State::Idle { truncate: true, .. } => {
                let made = async {
                    let w = self.client.create(&self.path, true).await?;
                    w.close().await
                }
                .await;
                match made {
                    Ok(status) => {
                        *st = State::Done(0);
                        Ok(Some(status))
                    }
                    Err(e) => {
                        let errno = errno_of(&e);
                        *st = State::Failed(errno);
                        Err(errno)
                    }
                }
            }
            other => {
                let failed = if let State::Failed(e) = other { Some(e) } else { None };
                *st = other;
                failed.map_or(Ok(None), Err)
            }
        }
    }
}

/// The state without the writer's buffers, for logs.
fn describe(st: &State) -> String {
    match st {
        State::Idle { len, truncate } => format!("idle len {len} truncate {truncate}"),
        State::Writing(w) => format!("writing at {}", w.len()),
        State::Done(len) => format!("done len {len}"),
        State::Failed(e) => format!("failed {e:?}"),
        State::Staged => "staged".into(),
    }
}
