//! Short-circuit reads, the worker's side (`wire/FORMAT.md`, kinds 71–76): what a shard
//! tells a client that asks (`LocalServe`, answered by the shard handlers), and the Unix
//! socket that trades the token for read-only O_DIRECT descriptors of a shard's data files.
//!
//! The socket is served by threads of its own, never a shard: one accepts, and one per
//! connection answers it and then keeps it open until the client closes it, so that a client
//! sees this process die as a hang-up (and stops trusting its leases, which die with it). The
//! only word on it after that is a shard's `LocalRevoke` when a leased block goes.

use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use cv_net::local::{recv_frame, send_frame};
use cv_wire::msg::{ErrorReply, LOCAL_TOKEN_LEN, LocalOpen, LocalOpenOk, LocalRevoke, MAX_LOCAL_DIRS};
use cv_wire::{ErrorCode, Frame, Kind, Limits};
use nix::sys::socket::MsgFlags;

use crate::error::{Result, WorkerError, WorkerErrorKind};

/// Connections served at once; more are closed at once.
const MAX_CONNS: usize = 256;
/// How long a connection may take to send its request.
const REQUEST_WITHIN: Duration = Duration::from_secs(5);
/// Frames on the socket are small.
const LIMITS: Limits = Limits { max_body: 4096, max_payload: 0, ..Limits::DEFAULT };

/// What a shard answers a client's `LocalHello` with, and how it tells the socket's clients
/// that a leased block went.
#[derive(Debug)]
pub(crate) struct LocalServe {
    pub(crate) boot_id: String,
    pub(crate) socket: String,
    pub(crate) token: [u8; LOCAL_TOKEN_LEN],
    pub(crate) lease: Duration,
    /// The socket's open connections (shared with [`LocalServer`]).
    conns: Conns,
}

impl LocalServe {
    /// This host's boot id and a fresh token, for the socket at `socket`.
    pub(crate) fn new(socket: &Path, lease: Duration) -> io::Result<LocalServe> {
        let boot_id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id")?.trim().to_string();
        let mut token = [0u8; LOCAL_TOKEN_LEN];
        io::Read::read_exact(&mut File::open("/dev/urandom")?, &mut token)?;
        Ok(LocalServe { boot_id, socket: socket.display().to_string(), token, lease, conns: Conns::default() })
    }

    /// Tells every client that holds shard `shard`'s files that block `block_id` went
    /// (`LocalRevoke`): it drops its leases on the shard and asks again. Called on the shard's
    /// thread, so it never waits: a client whose socket buffer is full has unread news already.
    pub(crate) fn revoke(&self, shard: u16, block_id: u64) {
        let Ok(frame) = cv_wire::encode(&LocalRevoke { block_id }, 0, &[]) else { return };
        let flags = MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_NOSIGNAL;
        for c in self.conns.lock().unwrap_or_else(PoisonError::into_inner).values() {
            if c.shard == Some(shard) {
                let _ = nix::sys::socket::send(c.stream.as_raw_fd(), frame.head(), flags);
            }
        }
    }
}

/// One open connection of the socket: a second handle of it, and the shard whose files it got.
#[derive(Debug)]
struct Conn {
    stream: UnixStream,
    shard: Option<u16>,
}

/// The running socket server; [`LocalServer::stop`] ends it and removes the socket file.
#[derive(Debug)]
pub(crate) struct LocalServer {
    path: PathBuf,
    stop: Arc<AtomicBool>,
    /// A handle of every open connection, to shut them down at stop.
    conns: Conns,
    thread: Option<JoinHandle<()>>,
}

struct Shared {
    token: [u8; LOCAL_TOKEN_LEN],
    /// Each shard's data files, read-only with O_DIRECT, in directory order.
    files: Vec<Vec<File>>,
    live: AtomicUsize,
    stop: Arc<AtomicBool>,
    conns: Conns,
    next_conn: AtomicUsize,
}

/// The open connections, by number: told of revoked blocks, shut down at stop.
type Conns = Arc<Mutex<HashMap<usize, Conn>>>;

impl LocalServer {
    /// Binds `serve.socket` (replacing a stale socket file; mode 0660) and serves the data
    /// files `shards[i]` of each shard `i`, which must exist.
    pub(crate) fn start(serve: &LocalServe, shards: &[Vec<PathBuf>]) -> Result<LocalServer> {
        let fail = |what: String, e: io::Error| WorkerError::new(WorkerErrorKind::Local, format!("{what}: {e}"));
        let mut files = Vec::with_capacity(shards.len());
        for paths in shards {
            let mut dirs = Vec::with_capacity(paths.len());
            for p in paths.iter().take(MAX_LOCAL_DIRS) {
                let f = std::fs::OpenOptions::new()
                    .read(true)
                    .custom_flags(libc::O_DIRECT)
                    .open(p)
                    .map_err(|e| fail(format!("open {} for short-circuit reads", p.display()), e))?;
                dirs.push(f);
            }
            files.push(dirs);
        }
        let path = PathBuf::from(&serve.socket);
        if std::fs::symlink_metadata(&path).is_ok() {
            std::fs::remove_file(&path).map_err(|e| fail(format!("remove stale {}", path.display()), e))?;
        }
        let listener = UnixListener::bind(&path).map_err(|e| fail(format!("bind {}", path.display()), e))?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o660))
            .map_err(|e| fail(format!("chmod {}", path.display()), e))?;
        listener.set_nonblocking(true).map_err(|e| fail("local socket".into(), e))?;
        let stop = Arc::new(AtomicBool::new(false));
        let conns = serve.conns.clone();
        let shared = Arc::new(Shared {
            token: serve.token,
            files,
            live: AtomicUsize::new(0),
            stop: stop.clone(),
            conns: conns.clone(),
            next_conn: AtomicUsize::new(0),
        });
        let thread = std::thread::Builder::new()
            .name("cv-local-socket".into())
            .spawn(move || accept_loop(listener, shared))
            .map_err(|e| fail("spawn the local socket thread".into(), e))?;
        tracing::info!(socket = %path.display(), "serving short-circuit reads");
        Ok(LocalServer { path, stop, conns, thread: Some(thread) })
    }

    /// Stops accepting, closes every connection (their clients read over QUIC from then
    /// on) and removes the socket file.
    pub(crate) fn stop(mut self) {
        self.halt();
    }

    fn halt(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        for (_, c) in self.conns.lock().unwrap_or_else(PoisonError::into_inner).drain() {
            let _ = c.stream.shutdown(std::net::Shutdown::Both);
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let _ = std::fs::remove_file(&self.path);
    }
}

impl Drop for LocalServer {
    fn drop(&mut self) {
        if self.thread.is_some() {
            self.halt();
        }
    }
}

fn accept_loop(listener: UnixListener, shared: Arc<Shared>) {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    while !shared.stop.load(Ordering::SeqCst) {
        let mut fds = [PollFd::new(listener.as_fd(), PollFlags::POLLIN)];
        if poll(&mut fds, PollTimeout::from(100u8)).unwrap_or(0) == 0 {
            continue;
        }
        let stream = match listener.accept() {
            Ok((s, _)) => s,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(e) => {
                tracing::warn!(error = %e, "local socket accept failed");
                std::thread::sleep(Duration::from_millis(100));
                continue;
            }
        };
        if shared.live.fetch_add(1, Ordering::SeqCst) >= MAX_CONNS {
            shared.live.fetch_sub(1, Ordering::SeqCst);
            tracing::warn!(max = MAX_CONNS, "local socket connection refused: too many");
            continue;
        }
        let s = shared.clone();
        let spawned = std::thread::Builder::new().name("cv-local-conn".into()).spawn(move || {
            serve_conn(&s, stream);
            s.live.fetch_sub(1, Ordering::SeqCst);
        });
        if let Err(e) = spawned {
            shared.live.fetch_sub(1, Ordering::SeqCst);
            tracing::warn!(error = %e, "local socket connection dropped: no thread");
        }
    }
}

/// Answers the connection's one `LocalOpen`, then holds it open until the client closes it
/// (or sends anything more, or the worker stops), telling it only of that shard's revoked
/// blocks. One shard per connection: a revocation goes to exactly the clients of its shard.
fn serve_conn(shared: &Shared, stream: UnixStream) {
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_read_timeout(Some(REQUEST_WITHIN));
    let me = shared.next_conn.fetch_add(1, Ordering::Relaxed);
    if let Ok(c) = stream.try_clone() {
        shared.conns.lock().unwrap_or_else(PoisonError::into_inner).insert(me, Conn { stream: c, shard: None });
    }
    // Closed, timed out, or not a frame: nothing to answer.
    if let Ok((frame, _)) = recv_frame(&stream, &LIMITS, 0) {
        match open(shared, &frame) {
            Ok(shard) => {
                let files = &shared.files[usize::from(shard)];
                let ok = LocalOpenOk { dirs: files.len() as u16 };
                let fds: Vec<_> = files.iter().map(AsFd::as_fd).collect();
                let sent = cv_wire::encode(&ok, frame.header().request_id, &[])
                    .map_err(|e| e.to_string())
                    .and_then(|f| send_frame(&stream, f.head(), &fds).map_err(|e| e.to_string()));
                match sent {
                    Err(e) => tracing::debug!(error = %e, "local socket reply failed"),
                    Ok(()) => {
                        if let Some(c) = shared.conns.lock().unwrap_or_else(PoisonError::into_inner).get_mut(&me) {
                            c.shard = Some(shard);
                        }
                        // Returns when the client closes (or breaks the rule and writes).
                        let _ = stream.set_read_timeout(None);
                        let _ = io::Read::read(&mut &stream, &mut [0u8; 1]);
                    }
                }
            }
            Err((code, why)) => {
                tracing::info!(%why, "local socket request refused");
                let reply = ErrorReply { code: code as u16, message: why, redirect: None };
                if let Ok(f) = cv_wire::encode(&reply, frame.header().request_id, &[]) {
                    let _ = send_frame(&stream, f.head(), &[]);
                }
            }
        }
    }
    // Its other handle too, or the client would never see it close.
    shared.conns.lock().unwrap_or_else(PoisonError::into_inner).remove(&me);
}

/// The shard whose files a `LocalOpen` may have.
fn open(shared: &Shared, frame: &Frame) -> std::result::Result<u16, (ErrorCode, String)> {
    if frame.kind() != Kind::LocalOpen {
        return Err((ErrorCode::Unsupported, format!("{} is not served on the local socket", frame.kind().name())));
    }
    let req = frame.access::<LocalOpen>().map_err(|e| (e.code(), e.to_string()))?;
    if !same_token(&req.token, &shared.token) {
        return Err((ErrorCode::PermissionDenied, "wrong token: ask a shard (LocalHello) for one".into()));
    }
    let shard = req.shard.to_native();
    if usize::from(shard) >= shared.files.len() {
        return Err((ErrorCode::NotFound, format!("no shard {shard}; this worker has {}", shared.files.len())));
    }
    Ok(shard)
}

/// Compares in time that does not depend on where the bytes differ.
fn same_token(got: &[u8], want: &[u8]) -> bool {
    got.len() == want.len() && got.iter().zip(want).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0
}
