//! Where journal and snapshot bytes live. Injected so tests can crash the "disk".

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
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
    /// the new content is there, never a mix. On an error the old content is still there.
    fn replace(&mut self, bytes: &[u8]) -> io::Result<()>;
    /// Fails with `StorageFull` unless `bytes` more could be appended now (a full disk asks
    /// this before it takes records again, instead of applying them and going back).
    fn has_room(&mut self, _bytes: u64) -> io::Result<()> {
        Ok(())
    }
    /// Where the bytes are, for messages an operator acts on.
    fn describe(&self) -> String {
        "in-memory storage".into()
    }
}

/// Mode of every file a master writes: mount credentials are in its records, so only the
/// master's own user may read them (its directory is 0700 too, [`private_dir`]).
const SECRET: u32 = 0o600;

/// Creates (or truncates) `path` with mode [`SECRET`].
fn create_secret(path: &Path) -> io::Result<File> {
    OpenOptions::new().create(true).write(true).truncate(true).mode(SECRET).open(path)
}

/// Creates `dir` if needed and makes it 0700, also when it existed with a wider mode (a
/// directory made by hand, or by a build before this rule): the journal, snapshot and Raft
/// files hold every mount's credentials.
pub fn private_dir(dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(dir)?;
    let mode = std::fs::metadata(dir)?.permissions().mode() & 0o777;
    if mode != 0o700 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
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
            let f = OpenOptions::new().create(true).append(true).read(true).mode(SECRET).open(&self.path)?;
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
        let tmp = self.sibling(".tmp");
        let written = create_secret(&tmp).and_then(|mut f| {
            f.write_all(bytes)?;
            f.sync_all()
        });
        if let Err(e) = written {
            // A half-written temp file would hold on to the space a full disk lacks.
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
        std::fs::rename(&tmp, &self.path)?;
        self.sync_dir()?;
        // The old handle points at the replaced inode.
        self.file = None;
        Ok(())
    }

    /// Writes `bytes` to a scratch file beside the journal and removes it: the file systems the
    /// master runs on (ext4, xfs, tmpfs) allocate at `write`, so that is where a full disk says so.
    fn has_room(&mut self, bytes: u64) -> io::Result<()> {
        let probe = self.sibling(".room");
        let chunk = vec![0u8; 64 << 10];
        let written = File::create(&probe).and_then(|mut f| {
            let mut left = bytes;
            while left > 0 {
                let n = left.min(chunk.len() as u64) as usize;
                f.write_all(&chunk[..n])?;
                left -= n as u64;
            }
            Ok(())
        });
        let removed = std::fs::remove_file(&probe);
        written.and(removed)
    }

    fn describe(&self) -> String {
        self.path.display().to_string()
    }
}

impl FileStorage {
    /// `<path><suffix>`, in the same directory.
    fn sibling(&self, suffix: &str) -> PathBuf {
        let mut name = self.path.file_name().unwrap_or_default().to_os_string();
        name.push(suffix);
        self.path.with_file_name(name)
    }
}
