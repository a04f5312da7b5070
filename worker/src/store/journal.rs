//! The persisted block index: an append-only, checksummed log file, rewritten when it grows.
//!
//! Buffered (not O_DIRECT) I/O through the shard's io_uring; every append ends in fdatasync.

use std::path::{Path, PathBuf};

use super::error::{ErrorKind, Result, StoreError};
use super::format::{IndexRecord, decode_index, encode_index_header, encode_record};
use cv_rt::fs::RingFile;

/// The open index log and its length (where the next record goes).
#[derive(Debug)]
pub(crate) struct IndexLog {
    path: PathBuf,
    file: RingFile,
    len: u64,
    store_id: u64,
    /// A failed append left bytes past `len` that could not be cut: no more appends.
    uncut_tail: bool,
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
    /// A damaged log (a bad record with intact ones after it) is refused as it is: cutting it
    /// would drop acknowledged records (`ErrorKind::Damaged`, naming the file and offset).
    pub(crate) async fn open(path: &Path, new_store_id: u64) -> Result<Replayed> {
        let exists = std::fs::metadata(path).is_ok();
        if !exists {
            let log = Self::create(path, new_store_id, Vec::new()).await?;
            return Ok(Replayed { log, records: Vec::new(), created: true });
        }
        // Read once at open, with plain syscalls: nothing else runs on the shard yet.
        let bytes = std::fs::read(path).map_err(|e| StoreError::io(format!("read {}", path.display()), e))?;
        let size = bytes.len() as u64;
        // Decoded before the file is opened for writing: a damaged log is not touched.
        let decoded = decode_index(&bytes).map_err(|e| e.in_file(path))?;
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|e| StoreError::io(format!("open {}", path.display()), e))?;
        let file = RingFile::new(file);
        if decoded.valid_len < size {
            tracing::warn!(
                path = %path.display(),
                valid = decoded.valid_len,
                size,
                fault = %decoded.torn.map(|f| f.to_string()).unwrap_or_default(),
                "index log has a torn tail; cutting it off"
            );
            file.set_len(decoded.valid_len).map_err(|e| StoreError::io(format!("truncate {}", path.display()), e))?;
            file.sync(true).await.map_err(|e| StoreError::io(format!("fdatasync {}", path.display()), e))?;
        }
        Ok(Replayed {
            log: IndexLog {
                path: path.to_path_buf(),
                file,
                len: decoded.valid_len,
                store_id: decoded.store_id,
                uncut_tail: false,
            },
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
        if self.uncut_tail {
            return Err(StoreError::new(
                ErrorKind::Io,
                format!("{}: a failed append could not be cut off; restart the worker", self.path.display()),
            ));
        }
        let n = buf.len();
        let done = match self.file.write_all_at(buf, self.len).await {
            Ok(()) => self.file.sync(true).await.map_err(|e| ("fdatasync", e)),
            Err(e) => Err(("append to", e)),
        };
        if let Err((what, e)) = done {
            // Bytes of the failed append may stay past `len`; the next append would cover only
            // their start, and the rest would read as records after a bad one (damage, at
            // restart) or as records never acknowledged. So they go now, or nothing is appended.
            if let Err(cut) = self.file.set_len(self.len) {
                tracing::error!(path = %self.path.display(), error = %cut, "cutting a failed append off failed");
                self.uncut_tail = true;
            }
            return Err(StoreError::io(format!("{what} {}", self.path.display()), e));
        }
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
        let new = Self::create(&tmp_path, self.store_id, body).await?;
        // A rename is one metadata syscall; it runs inline, as the opens do.
        std::fs::rename(&tmp_path, &self.path)
            .map_err(|e| StoreError::io(format!("rename {} over {}", tmp_path.display(), self.path.display()), e))?;
        sync_parent(&self.path).await?;
        self.file = new.file;
        self.len = new.len;
        self.uncut_tail = false;
        Ok(())
    }

    async fn create(path: &Path, store_id: u64, body: Vec<u8>) -> Result<IndexLog> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .map_err(|e| StoreError::io(format!("create {}", path.display()), e))?;
        let file = RingFile::new(file);
        let mut buf = encode_index_header(store_id).to_vec();
        buf.extend_from_slice(&body);
        let n = buf.len();
        file.write_all_at(buf, 0).await.map_err(|e| StoreError::io(format!("write {}", path.display()), e))?;
        file.sync(true).await.map_err(|e| StoreError::io(format!("fdatasync {}", path.display()), e))?;
        sync_parent(path).await?;
        Ok(IndexLog { path: path.to_path_buf(), file, len: n as u64, store_id, uncut_tail: false })
    }
}

/// fsyncs the directory holding `path`, so a create or rename survives a crash.
pub(crate) async fn sync_parent(path: &Path) -> Result<()> {
    let parent = path.parent().unwrap_or(Path::new("."));
    let dir = std::fs::File::open(parent).map_err(|e| StoreError::io(format!("open dir {}", parent.display()), e))?;
    RingFile::new(dir).sync(false).await.map_err(|e| StoreError::io(format!("fsync dir {}", parent.display()), e))
}
