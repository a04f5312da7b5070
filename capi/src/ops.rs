//! The operations both bindings expose, as safe Rust over handles: every
//! call looks its handle up, runs the client future on the internal runtime
//! and maps errors. The C and JNI layers only convert arguments.

use crate::error::{Error, ErrorKind, Result};
use crate::handles::Table;
use crate::runtime::block_on;
use cv_client::{Client, ClientConfig, File, FileStatus, Writer};
use cv_net::tls::Identity;
use std::path::Path;
use std::sync::{LazyLock, Mutex};

/// Most ranges one vectored read may ask for.
pub const MAX_RANGES: usize = 1 << 16;

static CLIENTS: LazyLock<Table<Client>> = LazyLock::new(|| Table::new(1, "client"));
static FILES: LazyLock<Table<Of<File>>> = LazyLock::new(|| Table::new(2, "file"));
/// A writer is consumed by close; `None` once taken.
static WRITERS: LazyLock<Table<Of<Mutex<Option<Writer>>>>> = LazyLock::new(|| Table::new(3, "writer"));

/// A file or writer with the client handle it came from: once that client is closed, every
/// call on it fails at once with `BadHandle` (tail reads too, which need no round trip).
#[derive(Debug)]
struct Of<T> {
    client: u64,
    it: T,
}

impl<T> std::ops::Deref for Of<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.it
    }
}

/// `table[handle]`, if the client it came from is still open.
fn live<T>(table: &Table<Of<T>>, handle: u64) -> Result<std::sync::Arc<Of<T>>> {
    let of = table.get(handle)?;
    if CLIENTS.get(of.client).is_err() {
        return Err(Error::new(
            ErrorKind::BadHandle,
            format!("handle {handle:#x}: its client {:#x} is closed", of.client),
        ));
    }
    Ok(of)
}

/// What `open` learned about a file, without a further round trip.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileInfo {
    /// Length in bytes.
    pub length: u64,
    /// Changes whenever the content does.
    pub version: u64,
    /// Reads at or after this offset are served from memory (the tail);
    /// equals `length` when no tail came with the open.
    pub tail_offset: u64,
}

/// Connects a client configured by the TOML file at `path`.
pub fn client_from_file(path: &str) -> Result<u64> {
    connect(ClientConfig::load(Path::new(path))?)
}

/// Connects a client configured by TOML text.
pub fn client_from_toml(text: &str) -> Result<u64> {
    connect(ClientConfig::from_toml_str(text)?)
}

/// Connects a client configured by the TOML file at `path` (or by nothing) with the TOML text
/// `overrides` laid over it, key by key: the Hadoop binding's `fs.cv.*` settings.
pub fn client_from_layers(path: Option<&str>, overrides: &str) -> Result<u64> {
    let base = match path {
        Some(p) => Some(std::fs::read_to_string(p).map_err(|e| Error::config(format!("cannot read {p}: {e}")))?),
        None => None,
    };
    connect(ClientConfig::from_layers(base.as_deref(), overrides)?)
}

fn connect(cfg: ClientConfig) -> Result<u64> {
    let identity = Identity::load(&cfg.tls).map_err(|e| Error::config(e.to_string()))?;
    let client = block_on(Client::connect(cfg.client, &identity, &cfg.transport))??;
    Ok(CLIENTS.insert(client))
}

/// Closes a client's connections and frees its handle. Files and writers
/// opened through it stay valid handles, but their calls fail from now on.
pub fn client_close(client: u64) -> Result<()> {
    let c = CLIENTS.remove(client)?;
    // Waits until the servers know: the host process may exit right after. Called from
    // inside a tokio runtime (where blocking is refused) the handle is still freed and the
    // connections closed, without the wait.
    if block_on(c.shutdown()).is_err() {
        c.close();
    }
    Ok(())
}

/// Opens a file (one round trip, the tail included).
pub fn open(client: u64, path: &str) -> Result<u64> {
    let c = CLIENTS.get(client)?;
    let f = block_on(c.open(path))??;
    Ok(FILES.insert(Of { client, it: f }))
}

/// Length, version and tail position of an open file.
pub fn file_info(file: u64) -> Result<FileInfo> {
    let f = live(&FILES, file)?;
    let tail_offset = f.tail().map_or(f.len(), |(off, _)| off);
    Ok(FileInfo { length: f.len(), version: f.version(), tail_offset })
}

/// The status that came with the open.
pub fn file_status(file: u64) -> Result<FileStatus> {
    Ok(live(&FILES, file)?.status().clone())
}

/// Where each block of an open file is, as the open brought it: `(offset, len, hosts)`, the
/// hosts of the workers holding a copy (the owner first; none for a block whose every copy is
/// lost), for engines that schedule work near the data.
pub fn file_blocks(file: u64) -> Result<Vec<(u64, u64, Vec<String>)>> {
    let f = live(&FILES, file)?;
    Ok(f.blocks()
        .iter()
        .map(|b| {
            let addrs = std::iter::once(&b.addr).chain(b.replicas.iter().map(|r| &r.addr));
            let hosts = if b.lost { Vec::new() } else { addrs.map(|a| a.socket_addr().ip().to_string()).collect() };
            (b.offset, b.len, hosts)
        })
        .collect())
}

/// Reads up to `buf.len()` bytes at `offset`; 0 at or past the end.
pub fn pread(file: u64, offset: u64, buf: &mut [u8]) -> Result<usize> {
    let f = live(&FILES, file)?;
    if let Some(n) = from_memory(&f, offset, buf) {
        return Ok(n);
    }
    Ok(block_on(f.read_at(offset, buf))??)
}

/// Serves a read that starts inside the tail (or at the end) without
/// entering the runtime: a footer read is a plain copy.
fn from_memory(f: &File, offset: u64, buf: &mut [u8]) -> Option<usize> {
    if offset >= f.len() || buf.is_empty() {
        return Some(0);
    }
    let (tail_off, tail) = f.tail()?;
    let start = usize::try_from(offset.checked_sub(tail_off)?).ok()?;
    let n = buf.len().min(tail.len().checked_sub(start)?);
    buf[..n].copy_from_slice(&tail[start..start + n]);
    Some(n)
}

/// Reads exactly `buf.len()` bytes at `offset`, or fails with `Eof` (and
/// reads nothing) when the range reaches past the end.
pub fn pread_fully(file: u64, offset: u64, buf: &mut [u8]) -> Result<()> {
    let f = live(&FILES, file)?;
    let end = offset.checked_add(buf.len() as u64);
    if end.is_none_or(|end| end > f.len()) {
        return Err(Error::new(
            ErrorKind::Eof,
            format!("{} bytes at {offset} reach past the end of a {}-byte file", buf.len(), f.len()),
        ));
    }
    let n = match from_memory(&f, offset, buf) {
        Some(n) => n,
        None => block_on(f.read_at(offset, buf))??,
    };
    if n != buf.len() {
        return Err(Error::new(
            cv_client::ErrorKind::Protocol,
            format!("read {n} of {} bytes inside the file", buf.len()),
        ));
    }
    Ok(())
}

/// Reads several `(offset, len)` ranges at once (coalesced, in parallel);
/// each result is cut at the end of the file.
pub fn preadv(file: u64, ranges: &[(u64, usize)]) -> Result<Vec<Vec<u8>>> {
    if ranges.len() > MAX_RANGES {
        return Err(Error::invalid(format!("{} ranges; at most {MAX_RANGES}", ranges.len())));
    }
    let f = live(&FILES, file)?;
    Ok(block_on(f.read_vectored(ranges))??)
}

/// Frees a file handle.
pub fn file_close(file: u64) -> Result<()> {
    FILES.remove(file).map(drop)
}

/// Creates a file and returns a writer handle.
pub fn create(client: u64, path: &str, overwrite: bool) -> Result<u64> {
    let c = CLIENTS.get(client)?;
    let w = block_on(c.create(path, overwrite))??;
    Ok(WRITERS.insert(Of { client, it: Mutex::new(Some(w)) }))
}

/// Appends `data` to a file being written.
pub fn write(writer: u64, data: &[u8]) -> Result<()> {
    let cell = live(&WRITERS, writer)?;
    let mut guard = cell.lock().unwrap_or_else(|p| p.into_inner());
    let w = guard.as_mut().ok_or_else(|| closed(writer))?;
    Ok(block_on(w.write(data))??)
}

/// Completes the file and frees the handle, also when completing fails: the handle is
/// removed before anything can fail, so a writer whose client is closed (`BadHandle`) gives
/// its block buffer back too (issue 40: 40 such writers held 130 MB).
pub fn writer_close(writer: u64) -> Result<FileStatus> {
    let cell = WRITERS.remove(writer)?;
    let w = cell.lock().unwrap_or_else(|p| p.into_inner()).take().ok_or_else(|| closed(writer))?;
    if CLIENTS.get(cell.client).is_err() {
        // Dropping the writer frees its buffers; the master's write lease removes the file.
        return Err(Error::new(ErrorKind::BadHandle, format!("writer {writer:#x}: its client is closed")));
    }
    Ok(block_on(w.close())??)
}

/// Gives the file up and frees the handle: the unfinished file is removed (not listed, not
/// openable). The handle is freed even when the removal fails (its error is returned; the
/// master's write lease removes the file then).
pub fn writer_abort(writer: u64) -> Result<()> {
    let cell = WRITERS.remove(writer)?;
    let w = cell.lock().unwrap_or_else(|p| p.into_inner()).take();
    if CLIENTS.get(cell.client).is_err() {
        return Err(Error::new(ErrorKind::BadHandle, format!("writer {writer:#x}: its client is closed")));
    }
    match w {
        Some(w) => Ok(block_on(w.abort())??),
        None => Ok(()),
    }
}

/// The block size of a file being written: the cluster's, as the master's create reply gave it.
pub fn writer_block_size(writer: u64) -> Result<u64> {
    let cell = live(&WRITERS, writer)?;
    let guard = cell.lock().unwrap_or_else(|p| p.into_inner());
    Ok(guard.as_ref().ok_or_else(|| closed(writer))?.block_size())
}

fn closed(writer: u64) -> Error {
    Error::new(ErrorKind::BadHandle, format!("writer handle {writer:#x} is closed"))
}

/// Metadata of a path.
pub fn stat(client: u64, path: &str) -> Result<FileStatus> {
    let c = CLIENTS.get(client)?;
    Ok(block_on(c.stat(path))??)
}

/// Entries of a directory in name order.
pub fn list(client: u64, path: &str) -> Result<Vec<FileStatus>> {
    let c = CLIENTS.get(client)?;
    Ok(block_on(c.list(path))??)
}

/// Creates a directory (and its parents when asked).
pub fn mkdir(client: u64, path: &str, parents: bool) -> Result<()> {
    let c = CLIENTS.get(client)?;
    Ok(block_on(c.mkdir(path, parents))??)
}

/// Renames atomically.
pub fn rename(client: u64, src: &str, dst: &str) -> Result<()> {
    let c = CLIENTS.get(client)?;
    Ok(block_on(c.rename(src, dst))??)
}

/// Deletes a path; a directory with content only when `recursive`.
pub fn delete(client: u64, path: &str, recursive: bool) -> Result<()> {
    let c = CLIENTS.get(client)?;
    Ok(block_on(c.delete(path, recursive))??)
}

/// Space of the cluster, from the master's report (what `cvctl report` shows), as Hadoop's
/// `FsStatus` wants it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Usage {
    /// Bytes the live workers can hold.
    pub capacity: u64,
    /// Bytes in use on them.
    pub used: u64,
    /// Bytes new blocks can still take: free space on live workers that are not draining (a
    /// draining worker takes no new blocks).
    pub remaining: u64,
}

/// Capacity, use and free space of the cluster's live workers (one round trip).
pub fn usage(client: u64) -> Result<Usage> {
    let c = CLIENTS.get(client)?;
    let report = block_on(c.report())??;
    let live = report.workers.iter().filter(|w| w.live);
    let mut u = Usage { capacity: 0, used: 0, remaining: 0 };
    for w in live {
        u.capacity = u.capacity.saturating_add(w.capacity);
        u.used = u.used.saturating_add(w.used);
        if !w.draining {
            u.remaining = u.remaining.saturating_add(w.capacity.saturating_sub(w.used));
        }
    }
    Ok(u)
}

/// Live handles (clients, files, writers), for leak checks.
pub fn live_handles() -> (usize, usize, usize) {
    (CLIENTS.len(), FILES.len(), WRITERS.len())
}
