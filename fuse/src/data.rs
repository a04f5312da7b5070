//! File contents: open, create, read, write, flush, fsync, release. A
//! staged file (see [`crate::staging`]) is read and written through its
//! stage whichever handle asks.

use crate::attr::new_file_attr;
use crate::errno::errno_of;
use crate::paths::child;
use crate::read::ReadHandle;
use crate::volume::{Handle, Volume};
use crate::write::{Streamed, WriteHandle};
use cv_client::{ErrorKind, FileKind};
use fuser::{Errno, FileAttr, FopenFlags, ReplyData};
use std::ffi::OsStr;
use std::sync::Arc;
use std::time::Instant;

/// An opened file: its handle number and what the kernel should do with its pages.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Opened {
    pub fh: u64,
    pub flags: FopenFlags,
}

fn writes(flags: i32) -> bool {
    flags & libc::O_ACCMODE != libc::O_RDONLY
}

impl Volume {
    pub(crate) async fn open(&self, ino: u64, flags: i32, pid: u32) -> Result<Opened, Errno> {
        let path = self.path_of(ino)?;
        if writes(flags) {
            return self.open_for_write(ino, path, flags, pid).await;
        }
        // The kernel's pages of a staged file came through it: keep them.
        if let Some(fh) = self.open_staged(ino, || Handle::Read { ino, r: None }) {
            return Ok(Opened { fh, flags: FopenFlags::FOPEN_KEEP_CACHE });
        }
        let asked = Instant::now();
        let file = self.client.open(&path).await.map_err(|e| errno_of(&e))?;
        self.recent.put_file(&path, &file, asked);
        Ok(self.open_read(ino, file))
    }

    /// An open for reading answered from a file opened within `open_ttl` (a read-only mount
    /// that asks for it, [`crate::recent`]), on the kernel's thread; `None` if there is none.
    pub(crate) fn open_reused(&self, ino: u64, flags: i32) -> Option<Opened> {
        if writes(flags) || !self.recent.enabled() {
            return None;
        }
        let file = self.recent.file(&self.path_of(ino).ok()?)?;
        self.stats.reused();
        Some(self.open_read(ino, file))
    }

    fn open_read(&self, ino: u64, file: cv_client::File) -> Opened {
        // Pages from an earlier open are still right only if the content
        // is the same version; otherwise the kernel drops them.
        let (keep, pages) = self.pages.opened(ino, file.version());
        let r = ReadHandle::new(file, &self.recent, &self.stats, pages);
        let fh = self.add_handle(Handle::Read { ino, r: Some(Arc::new(r)) });
        Opened { fh, flags: if keep { FopenFlags::FOPEN_KEEP_CACHE } else { FopenFlags::empty() } }
    }

    async fn open_for_write(&self, ino: u64, path: String, flags: i32, pid: u32) -> Result<Opened, Errno> {
        let truncate = flags & libc::O_TRUNC != 0;
        let staged = WriteHandle::staged(self.client.clone(), path.clone(), pid);
        let staged = Arc::new(staged);
        if let Some(fh) = self.open_staged(ino, || Handle::Write { ino, writer: staged.clone(), read: None }) {
            if truncate && let Some(stage) = self.stage(ino) {
                stage.truncate(0).await?;
            }
            return Ok(Opened { fh, flags: FopenFlags::FOPEN_KEEP_CACHE });
        }
        let st = self.client.stat(&path).await.map_err(|e| errno_of(&e))?;
        if st.kind == FileKind::Dir {
            return Err(Errno::EISDIR);
        }
        // An O_RDWR open of a file with content can still read that content.
        let read = if flags & libc::O_ACCMODE == libc::O_RDWR && !truncate && st.length > 0 {
            let file = self.client.open(&path).await.map_err(|e| errno_of(&e))?;
            Some(Arc::new(ReadHandle::new(file, &self.recent, &self.stats, self.pages.record(ino))))
        } else {
            None
        };
        let writer = Arc::new(WriteHandle::opened(self.client.clone(), path, st.length, truncate, pid));
        self.set_writer(ino, writer.clone());
        self.content_changed(ino);
        let fh = self.add_handle(Handle::Write { ino, writer, read });
        Ok(Opened { fh, flags: FopenFlags::empty() })
    }

    /// Creates a new file and opens it for writing.
    pub(crate) async fn create(
        &self,
        parent: u64,
        name: &OsStr,
        flags: i32,
        pid: u32,
    ) -> Result<(FileAttr, Opened), Errno> {
        let path = child(&self.path_of(parent)?, name)?;
        match self.client.create(&path, false).await {
            Ok(w) => {
                let ino = self.inodes().remember(&path);
                let writer = Arc::new(WriteHandle::created(self.client.clone(), path, w, pid));
                self.set_writer(ino, writer.clone());
                self.content_changed(ino);
                let fh = self.add_handle(Handle::Write { ino, writer, read: None });
                Ok((new_file_attr(ino, self.owner, 0), Opened { fh, flags: FopenFlags::empty() }))
            }
            // Made by another client since the kernel's lookup: without
            // O_EXCL this is an open of the existing file.
            Err(e) if e.kind() == ErrorKind::AlreadyExists && flags & libc::O_EXCL == 0 => {
                let ino = self.inodes().remember(&path);
                let opened = self.open(ino, flags, pid).await?;
                Ok((self.attr(ino, &path).await?, opened))
            }
            Err(e) => Err(errno_of(&e)),
        }
    }

    /// mknod of a regular file makes an empty one; other node types cv cannot hold.
    pub(crate) async fn mknod(&self, parent: u64, name: &OsStr, mode: u32) -> Result<FileAttr, Errno> {
        if mode & libc::S_IFMT != libc::S_IFREG {
            return Err(Errno::EPERM);
        }
        let path = child(&self.path_of(parent)?, name)?;
        let w = self.client.create(&path, false).await.map_err(|e| errno_of(&e))?;
        let st = w.close().await.map_err(|e| errno_of(&e))?;
        let ino = self.inodes().remember(&path);
        Ok(self.attr_from(ino, &st).await)
    }

    /// Starts a read the client can serve at once from a local worker's files
    /// ([`ReadHandle::read_now`]); the reply comes back when it cannot.
    pub(crate) fn read_now(
        &self,
        fh: u64,
        ino: u64,
        offset: u64,
        size: u32,
        reply: ReplyData,
        rt: &tokio::runtime::Handle,
    ) -> Result<(), ReplyData> {
        if self.stage(ino).is_some() {
            return Err(reply);
        }
        match self.handle(fh) {
            Ok(Handle::Read { r: Some(r), .. } | Handle::Write { read: Some(r), .. }) if r.may_fill_pages() => {
                r.read_now(offset, size, reply, rt, self.opts.read_only)
            }
            _ => Err(reply),
        }
    }

    pub(crate) async fn read(&self, fh: u64, ino: u64, offset: u64, size: u32) -> Result<Vec<u8>, Errno> {
        let handle = self.handle(fh)?;
        if let Some(stage) = self.stage(ino) {
            return stage.read(offset, size).await;
        }
        match handle {
            Handle::Read { r: Some(r), .. } | Handle::Write { read: Some(r), .. } => r.read(offset, size).await,
            // Opened staged; the stage ended since (it cannot while this
            // handle is open, see `end_stage_if_unused`).
            Handle::Read { r: None, .. } => Err(Errno::EIO),
            // Bytes being streamed are not readable until the file is
            // complete: complete it and read a staged copy.
            Handle::Write { writer, read: None, .. } => {
                if offset >= writer.len().await {
                    return Ok(Vec::new());
                }
                let start = writer.to_stage().await?;
                self.begin_stage(ino, start).await?.read(offset, size).await
            }
            Handle::Dir(_) => Err(Errno::EISDIR),
        }
    }

    pub(crate) async fn write(&self, fh: u64, ino: u64, offset: u64, data: &[u8], pid: u32) -> Result<u32, Errno> {
        let Handle::Write { writer, .. } = self.handle(fh)? else { return Err(Errno::EBADF) };
        if let Some(stage) = self.stage(ino) {
            return stage.write(offset, data).await;
        }
        match writer.write(offset, data, pid).await? {
            Streamed::Done(n) => Ok(n),
            Streamed::NeedsStage => {
                let start = writer.to_stage().await?;
                self.begin_stage(ino, start).await?.write(offset, data).await
            }
        }
    }

    /// fsync(2): returns once the file's content is a complete, durable cv
    /// version. A stream is completed (later writes stage the file).
    pub(crate) async fn fsync(&self, fh: u64, ino: u64) -> Result<(), Errno> {
        let handle = self.handle(fh)?;
        if self.stage(ino).is_some() {
            return self.publish(ino).await;
        }
        if let Handle::Write { writer, .. } = handle
            && writer.complete().await?.is_some()
        {
            self.content_changed(ino);
        }
        Ok(())
    }

    /// close(2) of a descriptor by thread `pid`: a file being written is
    /// completed here when its writer's process closes it, so a failure
    /// reaches the application as close's error. A copy of the descriptor
    /// inherited by a child (closed at its exec) completes nothing.
    /// A staged file is published at every close by the writer's process
    /// (publishing twice is harmless; the stage stays for later writes).
    /// An inherited copy publishes nothing either: any process that forks
    /// and execs closes the copies of its parent's descriptors at exec, and
    /// that must not publish edits before the parent's fsync or close.
    pub(crate) async fn flush(&self, fh: u64, pid: u32) -> Result<(), Errno> {
        match self.handle(fh)? {
            Handle::Write { writer, .. } if !writer.closed_by_owner(pid) => Ok(()),
            Handle::Write { ino, .. } if self.stage(ino).is_some() => self.publish(ino).await,
            Handle::Write { ino, writer, .. } => {
                writer.complete().await?;
                self.content_changed(ino);
                Ok(())
            }
            Handle::Read { .. } | Handle::Dir(_) => Ok(()),
        }
    }

    /// The last reference to a handle is gone.
    pub(crate) async fn release(&self, fh: u64) -> Result<(), Errno> {
        let (ino, done) = match self.take_handle(fh) {
            Some(Handle::Write { ino, writer, .. }) => {
                let mut done = writer.complete().await.map(|_| ());
                // Only a handle whose bytes went to the stage publishes it here. The kernel sends
                // a release after close returns: a handle that streamed and completed its own
                // version may be released after another handle started staging edits, which
                // that handle's fsync or close publishes, not this late release.
                if done.is_ok() && writer.is_staged().await {
                    done = self.publish(ino).await;
                }
                self.clear_writer(ino, &writer);
                (ino, done)
            }
            Some(Handle::Read { ino, .. }) => (ino, Ok(())),
            _ => return Ok(()),
        };
        self.end_stage_if_unused(ino).await;
        done
    }

    /// The status a read handle was opened with (for fstat of a file
    /// unlinked while open).
    pub(crate) fn open_status(&self, fh: u64) -> Option<cv_client::FileStatus> {
        match self.handle(fh).ok()? {
            Handle::Read { r: Some(r), .. } => Some(r.file().status().clone()),
            _ => None,
        }
    }
}
