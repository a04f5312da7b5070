//! The fetch pool's runtime: one thread (`cv-ufs`) owns a multi-thread tokio runtime with
//! the configured number of workers (`cv-ufs-worker`), takes [`Fetch`]es from the shards'
//! flume channel and runs each as its own task, at most [`MAX_IN_FLIGHT`] at a time.

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use cv_ufs::{UfsErrorKind, UfsSettings, UfsStream};
use tokio::sync::Semaphore;

use super::error::FetchError;
use super::master::{MasterLink, MasterSpec};
use super::mounts::Mounts;
use super::request::{Fetch, Fetcher};
use crate::error::{Result, WorkerError, WorkerErrorKind};

/// Object-store reads running at once; more wait their turn (shards already merge
/// concurrent reads of one block into one fetch).
const MAX_IN_FLIGHT: usize = 64;
/// Fetches still running at shutdown get this long before they are dropped.
const STOP_GRACE: Duration = Duration::from_secs(1);

/// Everything the pool needs, built by the server.
#[derive(Debug, Clone)]
pub(crate) struct PoolSpec {
    pub(crate) threads: usize,
    pub(crate) master: MasterSpec,
    pub(crate) ufs: UfsSettings,
    /// How long a mount asked of the master is used before asking again.
    pub(crate) mount_refresh: Duration,
    /// Object-store requests of every mount, for `/metrics`.
    pub(crate) stats: Arc<cv_ufs::UfsStats>,
}

/// The running pool. [`FetchPool::stop`] (or drop) ends it.
#[derive(Debug)]
pub(crate) struct FetchPool {
    /// One for all shards: it counts reader fetches worker-wide.
    fetcher: Fetcher,
    stop: Option<flume::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl FetchPool {
    /// Starts the runtime thread; returns once the runtime exists.
    pub(crate) fn start(spec: PoolSpec) -> Result<FetchPool> {
        let (req_tx, req_rx) = flume::unbounded::<Fetch>();
        let (stop_tx, stop_rx) = flume::bounded::<()>(1);
        let (ready_tx, ready_rx) = flume::bounded::<std::result::Result<(), String>>(1);
        let thread = std::thread::Builder::new()
            .name("cv-ufs".into())
            .spawn(move || {
                let rt = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(spec.threads.max(1))
                    .thread_name("cv-ufs-worker")
                    .enable_all()
                    .build();
                let rt = match rt {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e.to_string()));
                        return;
                    }
                };
                let _ = ready_tx.send(Ok(()));
                rt.block_on(serve(spec, req_rx, stop_rx));
                rt.shutdown_timeout(STOP_GRACE);
            })
            .map_err(|e| WorkerError::new(WorkerErrorKind::Executor, "spawn cv-ufs").with_source(e))?;
        match ready_rx.recv() {
            Ok(Ok(())) => Ok(FetchPool { fetcher: Fetcher::new(req_tx), stop: Some(stop_tx), thread: Some(thread) }),
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(WorkerError::new(WorkerErrorKind::Executor, format!("cv-ufs: tokio runtime: {e}")))
            }
            Err(_) => {
                let _ = thread.join();
                Err(WorkerError::new(WorkerErrorKind::Executor, "cv-ufs ended while starting"))
            }
        }
    }

    /// A handle for a shard.
    pub(crate) fn fetcher(&self) -> Fetcher {
        self.fetcher.clone()
    }

    /// Stops taking requests, gives running fetches a moment, joins the thread. Shards still
    /// waiting get an `Unavailable` fetch error.
    pub(crate) fn stop(mut self) {
        self.halt();
    }

    fn halt(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take()
            && t.join().is_err()
        {
            tracing::error!("cv-ufs thread panicked");
        }
    }
}

impl Drop for FetchPool {
    fn drop(&mut self) {
        self.halt();
    }
}

async fn serve(spec: PoolSpec, requests: flume::Receiver<Fetch>, stop: flume::Receiver<()>) {
    let mounts = Arc::new(Mounts::new(MasterLink::new(spec.master), spec.ufs, spec.mount_refresh, spec.stats));
    let permits = Arc::new(Semaphore::new(MAX_IN_FLIGHT));
    loop {
        let req = tokio::select! {
            _ = stop.recv_async() => break,
            r = requests.recv_async() => match r {
                Ok(r) => r,
                Err(_) => break,
            },
        };
        let (mounts, permits) = (mounts.clone(), permits.clone());
        tokio::spawn(async move {
            let Ok(_permit) = permits.acquire_owned().await else { return };
            // The shard may have given up waiting; then nobody needs the bytes.
            if req.reply.is_disconnected() {
                return;
            }
            if let Err(e) = fetch(&mounts, &req).await {
                let _ = req.reply.send(Err(e));
            }
        });
    }
    mounts.master().close().await;
}

/// Resolves the mount and streams the range at the object's version to the shard, in
/// pieces of at least [`PIECE`] bytes (the last may be shorter). A refusal by the store
/// under a cached mount, before any byte came, is retried once with the mount asked of
/// the master again (its credentials may have been rotated).
async fn fetch(mounts: &Mounts, req: &Fetch) -> std::result::Result<(), FetchError> {
    let o = &req.object;
    let end = req.offset.checked_add(req.len).ok_or_else(|| {
        FetchError::new(super::FetchErrorKind::Failed, format!("range {}+{} overflows", req.offset, req.len))
    })?;
    let what = format!("fetch {}{}{} [{}..{end}) at version {}", o.mount, sep(&o.mount), o.key, req.offset, o.version);
    let mut fresh_tried = false;
    loop {
        let m = mounts.resolve(&o.mount).await?;
        // The GET goes out when the stream is first polled: its refusal comes with the first piece.
        let first = match m.ufs.read_stream(&o.key, req.offset..end, Some(&o.version)).await {
            Ok(mut stream) => match stream.next().await {
                None => return Ok(()),
                Some(Ok(b)) => Ok((stream, b)),
                Some(Err(e)) => Err(e),
            },
            Err(e) => Err(e),
        };
        match first {
            Ok((stream, b)) => return forward(stream, b, &req.reply, &what).await,
            Err(e) if matches!(e.kind(), UfsErrorKind::Config | UfsErrorKind::PermissionDenied) => {
                mounts.invalidate(&o.mount).await;
                if m.cached && !fresh_tried {
                    fresh_tried = true;
                    tracing::info!(mount = %o.mount, error = %e, "store refused a cached mount; asking the master again");
                    continue;
                }
                return Err(FetchError::from_ufs(&what, &e));
            }
            Err(e) => {
                tracing::debug!(error = %e, "{what} failed");
                return Err(FetchError::from_ufs(&what, &e));
            }
        }
    }
}

/// Pieces sent to a shard are at least this long (but the last): every piece wakes the
/// shard, and the HTTP client hands out a response in much smaller buffers.
const PIECE: usize = 128 << 10;

/// Sends `first` and the rest of `stream` on `reply`, joined into pieces of [`PIECE`] bytes.
async fn forward(
    mut stream: UfsStream,
    first: Bytes,
    reply: &flume::Sender<std::result::Result<Bytes, FetchError>>,
    what: &str,
) -> std::result::Result<(), FetchError> {
    let mut piece = BytesMut::new();
    let mut next = Some(first);
    loop {
        let Some(b) = next.take() else {
            if !piece.is_empty() {
                let _ = reply.send(Ok(piece.freeze()));
            }
            return Ok(());
        };
        if piece.is_empty() && b.len() >= PIECE {
            if reply.send(Ok(b)).is_err() {
                return Ok(()); // nobody waits any more
            }
        } else {
            piece.extend_from_slice(&b);
            if piece.len() >= PIECE && reply.send(Ok(piece.split().freeze())).is_err() {
                return Ok(());
            }
        }
        next = match stream.next().await {
            None => None,
            Some(Ok(b)) => Some(b),
            Some(Err(e)) => {
                tracing::debug!(error = %e, "{what} failed after its first bytes");
                return Err(FetchError::from_ufs(what, &e));
            }
        };
    }
}

fn sep(mount: &str) -> &'static str {
    if mount.ends_with('/') { "" } else { "/" }
}
