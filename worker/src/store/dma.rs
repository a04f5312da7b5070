//! The one module that owns O_DIRECT: alignment, DMA buffers, and io_uring reads and writes.
//!
//! Everything else in the store speaks in byte ranges; this module turns them into
//! aligned requests on glommio's `DmaFile` and hands back views on the aligned buffers.

use std::ops::Deref;
use std::path::{Path, PathBuf};

use glommio::io::{DmaBuffer, DmaFile, OpenOptions, ReadResult};

use super::error::{ErrorKind, Result, StoreError, from_glommio};

/// Alignment of every extent, read and write. 4 KiB covers 512 B and 4 KiB logical sectors.
pub(crate) const ALIGN: u64 = 4096;

/// Rounds `v` up to [`ALIGN`].
pub(crate) fn align_up(v: u64) -> u64 {
    v.div_ceil(ALIGN) * ALIGN
}

/// Rounds `v` down to [`ALIGN`].
pub(crate) fn align_down(v: u64) -> u64 {
    v - v % ALIGN
}

/// Bytes read from disk: a view into the aligned DMA buffer, never copied.
#[derive(Clone, Debug, Default)]
pub struct DiskBytes(ReadResult);

impl DiskBytes {
    /// A sub-range of this view sharing the same buffer; `None` if out of range.
    pub(crate) fn slice(&self, offset: usize, len: usize) -> Option<DiskBytes> {
        if len == 0 {
            return (offset <= self.0.len()).then(DiskBytes::default);
        }
        ReadResult::slice(&self.0, offset, len).map(DiskBytes)
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
    file: DmaFile,
    path: PathBuf,
}

impl DirectFile {
    /// Creates (or overwrites) `path` holding `head` at offset 0, durably, then opens it.
    ///
    /// Why not create it with O_DIRECT: glommio probes io_uring IOPOLL support once per
    /// device, with a read at offset 0 of the first DMA file opened, and caches the answer.
    /// On an empty file that read succeeds without touching the device, IOPOLL is wrongly
    /// enabled, and every later DMA read fails with EOPNOTSUPP. Real data at offset 0 makes
    /// the probe honest.
    pub(crate) async fn create_with_head(path: &Path, head: &[u8]) -> Result<Self> {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
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
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .dma_open(path)
            .await
            .map_err(|e| from_glommio(format!("open {}", path.display()), e))?;
        if file.alignment() > ALIGN {
            return Err(StoreError::new(
                ErrorKind::Incompatible,
                format!("{} needs {}-byte alignment, above {ALIGN}", path.display(), file.alignment()),
            ));
        }
        Ok(Self { file, path: path.to_path_buf() })
    }

    /// Reserves `size` bytes on the file system so block writes never hit ENOSPC.
    pub(crate) async fn preallocate(&self, size: u64) -> Result<()> {
        self.file
            .pre_allocate(size, false)
            .await
            .map_err(|e| from_glommio(format!("fallocate {}", self.path.display()), e))
    }

    pub(crate) async fn size(&self) -> Result<u64> {
        self.file.file_size().await.map_err(|e| from_glommio(format!("stat {}", self.path.display()), e))
    }

    /// Writes a staged buffer at aligned `pos`; a short write is an error.
    pub(crate) async fn write(&self, staged: Staging, pos: u64) -> Result<()> {
        if !pos.is_multiple_of(ALIGN) {
            return Err(StoreError::new(ErrorKind::InvalidArgument, format!("unaligned write at {pos}")));
        }
        let buf = staged.into_padded();
        let want = buf.len();
        if want == 0 {
            return Ok(());
        }
        let done = self
            .file
            .write_at(buf, pos)
            .await
            .map_err(|e| from_glommio(format!("write {} at {pos}", self.path.display()), e))?;
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
            .map_err(|_| StoreError::new(ErrorKind::InvalidArgument, format!("read of {len} bytes too large")))?;
        let res = self
            .file
            .read_at_aligned(start, aligned_len)
            .await
            .map_err(|e| from_glommio(format!("read {} at {pos}", self.path.display()), e))?;
        let skip = (pos - start) as usize;
        ReadResult::slice(&res, skip, len).map(DiskBytes).ok_or_else(|| {
            StoreError::new(
                ErrorKind::Io,
                format!("short read {}/{aligned_len} from {} at {start}", res.len(), self.path.display()),
            )
        })
    }

    pub(crate) async fn sync(&self) -> Result<()> {
        self.file.fdatasync().await.map_err(|e| from_glommio(format!("fdatasync {}", self.path.display()), e))
    }

    /// A staging buffer of at least `cap` bytes (rounded up to [`ALIGN`]).
    pub(crate) fn staging(&self, cap: usize) -> Staging {
        let cap = align_up(cap as u64) as usize;
        Staging { buf: self.file.alloc_dma_buffer(cap), fill: 0 }
    }

    pub(crate) async fn close(self) -> Result<()> {
        let path = self.path;
        self.file.close().await.map_err(|e| from_glommio(format!("close {}", path.display()), e))
    }
}

/// An aligned DMA buffer being filled with bytes to write.
#[derive(Debug)]
pub(crate) struct Staging {
    buf: DmaBuffer,
    fill: usize,
}

impl Staging {
    /// Copies as much of `data` as fits; returns how many bytes were taken.
    pub(crate) fn push(&mut self, data: &[u8]) -> usize {
        let n = data.len().min(self.buf.len() - self.fill);
        self.buf.as_bytes_mut()[self.fill..self.fill + n].copy_from_slice(&data[..n]);
        self.fill += n;
        n
    }

    pub(crate) fn len(&self) -> usize {
        self.fill
    }

    pub(crate) fn is_full(&self) -> bool {
        self.fill == self.buf.len()
    }

    /// The filled bytes, zero-padded to [`ALIGN`] (pool buffers hold stale bytes).
    fn into_padded(mut self) -> DmaBuffer {
        let padded = align_up(self.fill as u64) as usize;
        self.buf.as_bytes_mut()[self.fill..padded].fill(0);
        self.buf.trim_to_size(padded);
        self.buf
    }
}
