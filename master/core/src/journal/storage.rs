//! Where journal and snapshot bytes live. Injected so tests can crash the "disk".

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

/// One durable byte sequence (the journal, or the snapshot).
pub trait Storage: Send + std::fmt::Debug {
    /// Appends bytes; not durable until [`Storage::sync`].
    fn append(&mut self, bytes: &[u8]) -> io::Result<()>;
    /// Makes every appended byte durable.
    fn sync(&mut self) -> io::Result<()>;
    /// All bytes currently stored (durable or not); empty if nothing was ever written.
    fn read_all(&mut self) -> io::Result<Vec<u8>>;
    /// Cuts the content to `len` bytes, durably.
    fn truncate(&mut self, len: u64) -> io::Result<()>;
    /// Replaces the whole content atomically and durably: after a crash either the old or
    /// the new content is there, never a mix.
    fn replace(&mut self, bytes: &[u8]) -> io::Result<()>;
}

/// A real file: `write` + `fdatasync`; `replace` = temp file, fsync, rename, fsync the directory.
#[derive(Debug)]
pub struct FileStorage {
    path: PathBuf,
    file: Option<File>,
}

impl FileStorage {
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into(), file: None }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn file(&mut self) -> io::Result<&mut File> {
        if self.file.is_none() {
            let f = OpenOptions::new().create(true).append(true).read(true).open(&self.path)?;
            self.file = Some(f);
        }
        // Just set above when it was missing.
        self.file.as_mut().ok_or_else(|| io::Error::other("journal file not open"))
    }

    fn sync_dir(&self) -> io::Result<()> {
        let dir = match self.path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        File::open(dir)?.sync_all()
    }
}

impl Storage for FileStorage {
    fn append(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.file()?.write_all(bytes)
    }

    fn sync(&mut self) -> io::Result<()> {
        self.file()?.sync_data()
    }

    fn read_all(&mut self) -> io::Result<Vec<u8>> {
        let mut out = Vec::new();
        match File::open(&self.path) {
            Ok(mut f) => {
                f.read_to_end(&mut out)?;
                Ok(out)
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(out),
            Err(e) => Err(e),
        }
    }

    fn truncate(&mut self, len: u64) -> io::Result<()> {
        let f = self.file()?;
        f.set_len(len)?;
        f.sync_all()
    }

    fn replace(&mut self, bytes: &[u8]) -> io::Result<()> {
        let mut tmp_name = self.path.file_name().unwrap_or_default().to_os_string();
        tmp_name.push(".tmp");
        let tmp = self.path.with_file_name(tmp_name);
        {
            let mut f = File::create(&tmp)?;
            f.write_all(bytes)?;
            f.sync_all()?;
        }
        std::fs::rename(&tmp, &self.path)?;
        self.sync_dir()?;
        // The old handle points at the replaced inode.
        self.file = None;
        Ok(())
    }
}
