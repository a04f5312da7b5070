//! The client's io_uring thread for short-circuit reads: one cv-rt runtime on a thread of
//! its own (never a tokio worker), taking reads by message and answering each by a oneshot.
//! O_DIRECT reads through the ring cost one submission each and no copy into the page cache.
//!
//! The buffers come back: a read's bytes leave as `Bytes` owning the buffer, and dropping
//! them (on whatever thread) sends it home to be used again. Without that, every read took a
//! fresh buffer, large ones straight from mmap, so the kernel faulted in and zeroed the pages
//! of each read and unmapped them after: most of a page-cache-cold DuckDB pass's client CPU.

use std::io;
use std::sync::Arc;

use cv_rt::fs::RingFile;
use cv_rt::{AlignedBuf, Runtime, RuntimeConfig};
use tokio::sync::oneshot;

/// Buffers on their way back to the io thread; more are freed where they are dropped.
const RETURNING: usize = 64;

/// A read's buffer and byte count.
type Read = io::Result<(Lent, usize)>;

/// Where a completed read goes: to an awaiting task, or to a call made on the io thread.
pub(crate) enum Done {
    Await(oneshot::Sender<Read>),
    Call(Box<dyn FnOnce(Read) + Send>),
}

impl Done {
    fn give(self, r: Read) {
        match self {
            Done::Await(tx) => drop(tx.send(r)),
            Done::Call(f) => f(r),
        }
    }
}

/// One read: `len` bytes at `pos` of `file`, into its buffer from byte `at` on (all aligned
/// for O_DIRECT).
struct Job {
    file: Arc<RingFile>,
    at: usize,
    pos: u64,
    len: usize,
    /// Called on the io thread when the read completes.
    done: Done,
}

/// A buffer of the io thread, lent out; it goes back when dropped.
#[derive(Debug)]
pub(crate) struct Lent {
    buf: Option<AlignedBuf>,
    home: flume::Sender<AlignedBuf>,
}

impl Lent {
    pub(crate) fn as_slice(&self) -> &[u8] {
        self.buf.as_ref().map_or(&[], AlignedBuf::as_slice)
    }

    pub(crate) fn as_mut_slice(&mut self) -> &mut [u8] {
        self.buf.as_mut().map_or(&mut [], AlignedBuf::as_mut_slice)
    }
}

impl AsMut<[u8]> for Lent {
    fn as_mut(&mut self) -> &mut [u8] {
        self.as_mut_slice()
    }
}

impl AsRef<[u8]> for Lent {
    fn as_ref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl Drop for Lent {
    fn drop(&mut self) {
        if let Some(b) = self.buf.take() {
            // A full queue or a gone thread: freed here instead.
            let _ = self.home.try_send(b);
        }
    }
}

/// The thread; it ends when the last handle is dropped.
#[derive(Debug, Clone)]
pub(crate) struct IoThread {
    jobs: flume::Sender<Job>,
}

impl IoThread {
    pub(crate) fn start() -> io::Result<IoThread> {
        let (jobs, rx) = flume::unbounded::<Job>();
        let (home, returned) = flume::bounded::<AlignedBuf>(RETURNING);
        let rt_ready = flume::bounded::<io::Result<()>>(1);
        let ready = rt_ready.0;
        std::thread::Builder::new().name("cv-client-io".into()).spawn(move || {
            let rt = match Runtime::new(RuntimeConfig::default()) {
                Ok(rt) => {
                    let _ = ready.send(Ok(()));
                    rt
                }
                Err(e) => {
                    let _ = ready.send(Err(e));
                    return;
                }
            };
            rt.block_on(async move {
                while let Ok(job) = rx.recv_async().await {
                    // Returned buffers go to this thread's pool, where the next read finds one.
                    returned.try_iter().for_each(drop);
                    let home = home.clone();
                    cv_rt::spawn_local(async move {
                        let buf = AlignedBuf::with_capacity(job.at + job.len);
                        let (res, buf) = job.file.read_into(buf, job.at, job.len, job.pos).await;
                        job.done.give(res.map(|n| (Lent { buf: Some(buf), home }, n)));
                    })
                    .detach();
                }
            });
        })?;
        rt_ready.1.recv().map_err(|_| io::Error::other("the io thread died starting"))??;
        Ok(IoThread { jobs })
    }

    /// Reads `len` bytes at `pos` of `file`; returns the buffer and the bytes read.
    pub(crate) async fn read(&self, file: Arc<RingFile>, pos: u64, len: usize) -> Read {
        let (reply, answer) = oneshot::channel();
        self.read_then(file, 0, pos, len, Done::Await(reply));
        answer.await.map_err(|_| io::Error::other("the io thread dropped a read"))?
    }

    /// Reads `len` bytes at `pos` of `file` into a buffer from byte `at` on, and calls `done`
    /// with it on the io thread: for a caller that can finish there (a FUSE reply), without a
    /// wake-up of its own.
    pub(crate) fn read_then(&self, file: Arc<RingFile>, at: usize, pos: u64, len: usize, done: Done) {
        if let Err(flume::SendError(job)) = self.jobs.send(Job { file, at, pos, len, done }) {
            job.done.give(Err(io::Error::other("the io thread is gone")));
        }
    }
}
