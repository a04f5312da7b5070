//! The persisted block index: an append-only, checksummed log file, rewritten when it grows.
//!
//! Buffered (not O_DIRECT) I/O through glommio's io_uring; every append ends in fdatasync.

use std::path::{Path, PathBuf};

use glommio::io::{BufferedFile, Directory, OpenOptions};

use super::error::{ErrorKind, Result, StoreError, from_glommio};
use super::format::{IndexRecord, decode_index, encode_index_header, encode_record};

/// The open index log and its length (where the next record goes).
#[derive(Debug)]
pub(crate) struct IndexLog {
    path: PathBuf,
    file: BufferedFile,
    len: u64,
    store_id: u64,
}

/// What opening the log found.
#[derive(Debug)]
pub(crate) struct Replayed {
    pub(crate) log: IndexLog,
    pub(crate) records: Vec<IndexRecord>,
    /// The log did not exist and was created.
    pub(crate) created: bool,
}

impl IndexLog {
    /// Opens the log at `path`, cutting a torn tail; creates it with `new_store_id` if missing.
    pub(crate) async fn open(path: &Path, new_store_id: u64) -> Result<Replayed> {
        let exists = std::fs::metadata(path).is_ok();
        if !exists {
            let log = Self::create(path, new_store_id, Vec::new()).await?;
            return Ok(Replayed { log, records: Vec::new(), created: true });
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .buffered_open(path)
            .await
            .map_err(|e| from_glommio(format!("open {}", path.display()), e))?;
        let size = file.file_size().await.map_err(|e| from_glommio(format!("stat {}", path.display()), e))?;
        let size_usize =
            usize::try_from(size).map_err(|_| StoreError::new(ErrorKind::Corrupt, "index log larger than memory"))?;
        let bytes =
            file.read_at(0, size_usize).await.map_err(|e| from_glommio(format!("read {}", path.display()), e))?;
        if bytes.len() != size_usize {
            return Err(StoreError::new(
                ErrorKind::Io,
                format!("short read of {}: {}/{size}", path.display(), bytes.len()),
            ));
        }
        let decoded = decode_index(&bytes)?;
        if decoded.valid_len < size {
            tracing::warn!(
                path = %path.display(),
                valid = decoded.valid_len,
                size,
                "index log has a torn tail; cutting it off"
            );
            file.truncate(decoded.valid_len)
                .await
                .map_err(|e| from_glommio(format!("truncate {}", path.display()), e))?;
            file.fdatasync().await.map_err(|e| from_glommio(format!("fdatasync {}", path.display()), e))?;
        }
        Ok(Replayed {
            log: IndexLog { path: path.to_path_buf(), file, len: decoded.valid_len, store_id: decoded.store_id },
            records: decoded.records,
            created: false,
        })
    }

    pub(crate) fn store_id(&self) -> u64 {
        self.store_id
    }

    /// Bytes in the log, header included.
    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    /// Appends `records` in one write and makes them durable.
    pub(crate) async fn append(&mut self, records: &[IndexRecord]) -> Result<()> {
        if records.is_empty() {
            return Ok(());
        }
        let mut buf = Vec::new();
        for r in records {
            encode_record(r, &mut buf);
        }
        let n = buf.len();
        let done = self
            .file
            .write_at(buf, self.len)
            .await
            .map_err(|e| from_glommio(format!("append to {}", self.path.display()), e))?;
        if done != n {
            return Err(StoreError::new(ErrorKind::Io, format!("short append to {}: {done}/{n}", self.path.display())));
        }
        self.file.fdatasync().await.map_err(|e| from_glommio(format!("fdatasync {}", self.path.display()), e))?;
        self.len += n as u64;
        Ok(())
    }

    /// Replaces the log by one holding exactly `records` (compaction): written to a temporary
    /// file, synced, renamed over the log, directory synced. A crash leaves old or new, whole.
    pub(crate) async fn rewrite(&mut self, records: &[IndexRecord]) -> Result<()> {
        let mut body = Vec::new();
        for r in records {
            encode_record(r, &mut body);
        }
        let mut tmp_path = self.path.clone().into_os_string();
        tmp_path.push(".compact");
        let tmp_path = PathBuf::from(tmp_path);
        let mut new = Self::create(&tmp_path, self.store_id, body).await?;
        new.file
            .rename(&self.path)
            .await
            .map_err(|e| from_glommio(format!("rename {} over {}", tmp_path.display(), self.path.display()), e))?;
        sync_parent(&self.path).await?;
        let old = std::mem::replace(&mut self.file, new.file);
        self.len = new.len;
        if let Err(e) = old.close().await {
            tracing::warn!(error = %e, "closing the old index log failed");
        }
        Ok(())
    }

    async fn create(path: &Path, store_id: u64, body: Vec<u8>) -> Result<IndexLog> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .buffered_open(path)
            .await
            .map_err(|e| from_glommio(format!("create {}", path.display()), e))?;
        let mut buf = encode_index_header(store_id).to_vec();
        buf.extend_from_slice(&body);
        let n = buf.len();
        let done = file.write_at(buf, 0).await.map_err(|e| from_glommio(format!("write {}", path.display()), e))?;
        if done != n {
            return Err(StoreError::new(ErrorKind::Io, format!("short write to {}", path.display())));
        }
        file.fdatasync().await.map_err(|e| from_glommio(format!("fdatasync {}", path.display()), e))?;
        sync_parent(path).await?;
        Ok(IndexLog { path: path.to_path_buf(), file, len: n as u64, store_id })
    }

    pub(crate) async fn close(self) -> Result<()> {
        let path = self.path;
        self.file.close().await.map_err(|e| from_glommio(format!("close {}", path.display()), e))
    }
}

/// fsyncs the directory holding `path`, so a create or rename survives a crash.
pub(crate) async fn sync_parent(path: &Path) -> Result<()> {
    let parent = path.parent().unwrap_or(Path::new("."));
    let dir = Directory::open(parent).await.map_err(|e| from_glommio(format!("open dir {}", parent.display()), e))?;
    dir.sync().await.map_err(|e| from_glommio(format!("fsync dir {}", parent.display()), e))?;
    dir.close().await.map_err(|e| from_glommio(format!("close dir {}", parent.display()), e))
}
