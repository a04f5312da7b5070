//! The one module that owns O_DIRECT: alignment, DMA buffers, and io_uring reads and writes.
//!
//! Everything else in the store speaks in byte ranges; this module turns them into
//! aligned requests on the shard runtime's ring and hands back views on the aligned buffers.

use std::ops::Deref;
use std::path::{Path, PathBuf};

use bytes::Bytes;

use super::error::{ErrorKind, Result, StoreError};
use cv_rt::AlignedBuf;
use cv_rt::fs::RingFile;

/// Alignment of every extent, read and write. 4 KiB covers 512 B and 4 KiB logical sectors.
pub(crate) const ALIGN: u64 = cv_rt::BUF_ALIGN as u64;

/// Rounds `v` up to [`ALIGN`].
pub(crate) fn align_up(v: u64) -> u64 {
    v.div_ceil(ALIGN) * ALIGN
}

/// Rounds `v` down to [`ALIGN`].
pub(crate) fn align_down(v: u64) -> u64 {
    v - v % ALIGN
}

/// Bytes read from disk: a view into the aligned DMA buffer, never copied. A `Bytes` over
/// it, so the reply can hand the very buffer to the QUIC stream.
#[derive(Clone, Default)]
pub struct DiskBytes(Bytes);

impl std::fmt::Debug for DiskBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DiskBytes({} bytes)", self.0.len())
    }
}

impl DiskBytes {
    /// A sub-range of this view sharing the same buffer; `None` if out of range.
    pub(crate) fn slice(&self, offset: usize, len: usize) -> Option<DiskBytes> {
        let end = offset.checked_add(len)?;
        (end <= self.0.len()).then(|| DiskBytes(self.0.slice(offset..end)))
    }

    /// The bytes as a shared buffer (no copy).
    pub(crate) fn bytes(&self) -> &Bytes {
        &self.0
    }
}

impl Deref for DiskBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.0
    }
}

/// A file opened with O_DIRECT whose reads and writes go through io_uring.
#[derive(Debug)]
pub(crate) struct DirectFile {
    file: RingFile,
    path: PathBuf,
}

impl DirectFile {
    /// Creates (or overwrites) `path` holding `head` at offset 0, durably, then opens it.
    pub(crate) async fn create_with_head(path: &Path, head: &[u8]) -> Result<Self> {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        // The worker's user only: others read blocks through the worker (over QUIC, or by a
        // descriptor it passes to a short-circuit reader), never by opening the file.
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(path)
            .map_err(|e| StoreError::io(format!("create {}", path.display()), e))?;
        f.write_all(head)
            .and_then(|()| f.sync_all())
            .map_err(|e| StoreError::io(format!("write head of {}", path.display()), e))?;
        drop(f);
        Self::open(path).await
    }

    /// Opens an existing `path` read-write with O_DIRECT.
    pub(crate) async fn open(path: &Path) -> Result<Self> {
        let file = RingFile::open_direct(path, true)
            .map_err(|e| StoreError::io(format!("open {} with O_DIRECT", path.display()), e))?;
        // A file system that needs more than ALIGN would refuse every read with EINVAL; say so
        // now, by name. One that does not report its alignment gets ALIGN, which covers 512 B
        // and 4 KiB sectors.
        if let Ok(Some((mem, offset))) = file.direct_io_alignment()
            && (u64::from(mem) > ALIGN || u64::from(offset) > ALIGN)
        {
            return Err(StoreError::new(
                ErrorKind::Incompatible,
                format!(
                    "{} needs {offset}-byte O_DIRECT offsets and {mem}-byte buffers, above {ALIGN}",
                    path.display()
                ),
            ));
        }
        Ok(Self { file, path: path.to_path_buf() })
    }

    /// Reserves `size` bytes on the file system so block writes never hit ENOSPC.
    pub(crate) async fn preallocate(&self, size: u64) -> Result<()> {
        self.file.allocate(0, size).await.map_err(|e| StoreError::io(format!("fallocate {}", self.path.display()), e))
    }

    pub(crate) async fn size(&self) -> Result<u64> {
        self.file.size().map_err(|e| StoreError::io(format!("stat {}", self.path.display()), e))
    }

    /// Writes a staged buffer at aligned `pos`; a short write is an error.
    pub(crate) async fn write(&self, staged: Staging, pos: u64) -> Result<()> {
        if !pos.is_multiple_of(ALIGN) {
            return Err(StoreError::new(ErrorKind::InvalidArgument, format!("unaligned write at {pos}")));
        }
        let (buf, want) = staged.into_padded();
        if want == 0 {
            return Ok(());
        }
        let (res, _buf) = self.file.write_aligned(buf, want, pos).await;
        let done = res.map_err(|e| StoreError::io(format!("write {} at {pos}", self.path.display()), e))?;
        if done != want {
            return Err(StoreError::new(
                ErrorKind::Io,
                format!("short write {done}/{want} to {} at {pos}", self.path.display()),
            ));
        }
        Ok(())
    }

    /// Reads `len` bytes at any `pos`: one aligned read, returned as a view (no copy).
    pub(crate) async fn read(&self, pos: u64, len: usize) -> Result<DiskBytes> {
        if len == 0 {
            return Ok(DiskBytes::default());
        }
        let start = align_down(pos);
        let end = align_up(pos + len as u64);
        let aligned_len = usize::try_from(end - start)
            .ok()
            .filter(|&n| n <= u32::MAX as usize)
            .ok_or_else(|| StoreError::new(ErrorKind::InvalidArgument, format!("read of {len} bytes too large")))?;
        let (res, buf) = self.file.read_at(AlignedBuf::with_capacity(aligned_len), aligned_len, start).await;
        let got = res.map_err(|e| StoreError::io(format!("read {} at {pos}", self.path.display()), e))?;
        let skip = (pos - start) as usize;
        let whole = DiskBytes(Bytes::from_owner(buf).slice(..got));
        whole.slice(skip, len).ok_or_else(|| {
            StoreError::new(
                ErrorKind::Io,
                format!("short read {got}/{aligned_len} from {} at {start}", self.path.display()),
            )
        })
    }

    pub(crate) async fn sync(&self) -> Result<()> {
        self.file.sync(true).await.map_err(|e| StoreError::io(format!("fdatasync {}", self.path.display()), e))
    }

    /// A staging buffer of at least `cap` bytes (rounded up to [`ALIGN`]).
    pub(crate) fn staging(&self, cap: usize) -> Staging {
        let cap = align_up(cap as u64) as usize;
        Staging { buf: AlignedBuf::with_capacity(cap), cap, fill: 0 }
    }
}

/// An aligned DMA buffer being filled with bytes to write.
#[derive(Debug)]
pub(crate) struct Staging {
    buf: AlignedBuf,
    /// Usable bytes (the buffer itself may be larger: pool classes are powers of two).
    cap: usize,
    fill: usize,
}

impl Staging {
    /// Copies as much of `data` as fits; returns how many bytes were taken.
    pub(crate) fn push(&mut self, data: &[u8]) -> usize {
        let n = data.len().min(self.cap - self.fill);
        self.buf.as_mut_slice()[self.fill..self.fill + n].copy_from_slice(&data[..n]);
        self.fill += n;
        n
    }

    pub(crate) fn len(&self) -> usize {
        self.fill
    }

    pub(crate) fn is_full(&self) -> bool {
        self.fill == self.cap
    }

    /// The buffer with the filled bytes zero-padded to [`ALIGN`] (pool buffers hold stale
    /// bytes), and the padded length to write.
    fn into_padded(mut self) -> (AlignedBuf, usize) {
        let padded = align_up(self.fill as u64) as usize;
        self.buf.as_mut_slice()[self.fill..padded].fill(0);
        (self.buf, padded)
    }
}
