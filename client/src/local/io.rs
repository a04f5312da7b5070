//! The client's io_uring thread for short-circuit reads: one cv-rt runtime on a thread of
//! its own (never a tokio worker), taking reads by message and answering each by a oneshot.
//! O_DIRECT reads through the ring cost one submission each and no copy into the page cache.

use std::io;
use std::sync::Arc;

use cv_rt::fs::RingFile;
use cv_rt::{AlignedBuf, Runtime, RuntimeConfig};
use tokio::sync::oneshot;

/// One read: `len` bytes at `pos` of `file` (both aligned for O_DIRECT).
struct Job {
    file: Arc<RingFile>,
    pos: u64,
    len: usize,
    reply: oneshot::Sender<io::Result<(AlignedBuf, usize)>>,
}

/// The thread; it ends when the last handle is dropped.
#[derive(Debug, Clone)]
pub(crate) struct IoThread {
    jobs: flume::Sender<Job>,
}

impl IoThread {
    pub(crate) fn start() -> io::Result<IoThread> {
        let (jobs, rx) = flume::unbounded::<Job>();
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
                    cv_rt::spawn_local(async move {
                        let buf = AlignedBuf::with_capacity(job.len);
                        let (res, buf) = job.file.read_at(buf, job.len, job.pos).await;
                        let _ = job.reply.send(res.map(|n| (buf, n)));
                    })
                    .detach();
                }
            });
        })?;
        rt_ready.1.recv().map_err(|_| io::Error::other("the io thread died starting"))??;
        Ok(IoThread { jobs })
    }

    /// Reads `len` bytes at `pos` of `file`; returns the buffer and the bytes read.
    pub(crate) async fn read(&self, file: Arc<RingFile>, pos: u64, len: usize) -> io::Result<(AlignedBuf, usize)> {
        let (reply, answer) = oneshot::channel();
        self.jobs.send(Job { file, pos, len, reply }).map_err(|_| io::Error::other("the io thread is gone"))?;
        answer.await.map_err(|_| io::Error::other("the io thread dropped a read"))?
    }
}
