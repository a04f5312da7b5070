//! Namespace operations: lookup, attributes, mkdir, unlink, rmdir, rename,
//! directory listings, statfs.

use crate::attr::attr_of;
use crate::errno::errno_of;
use crate::paths::child;
use crate::stage::{Start, TEMP_PREFIX};
use crate::volume::{Handle, Volume};
use crate::write::Streamed;
use cv_client::{ErrorKind, FileKind, FileStatus};
use fuser::{Errno, FileAttr, RenameFlags};
use std::ffi::OsStr;
use std::sync::Arc;
use std::time::Instant;

/// What `setattr` was asked to change.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct SetAttr {
    pub mode: Option<u32>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub size: Option<u64>,
    pub fh: Option<u64>,
}

/// Filesystem totals for `statfs`, in 4 KiB blocks.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Totals {
    pub blocks: u64,
    pub free: u64,
    pub files: u64,
}

impl Volume {
    async fn stat(&self, path: &str) -> Result<FileStatus, Errno> {
        self.client.stat(path).await.map_err(|e| errno_of(&e))
    }

    pub(crate) async fn lookup(&self, parent: u64, name: &OsStr) -> Result<FileAttr, Errno> {
        let (epoch, fetched) = (self.attrs.epoch(), Instant::now());
        let path = child(&self.path_of(parent)?, name)?;
        let st = self.stat(&path).await?;
        self.recent.put_status(&path, &st, fetched);
        let ino = self.inodes().remember(&path);
        let attr = self.attr_from(ino, &st).await;
        self.keep_attr(&attr, fetched, epoch);
        Ok(attr)
    }

    /// A lookup answered from a status the master gave within `open_ttl` (a read-only mount
    /// that asks for it, [`crate::recent`]), on the kernel's thread; `None` if there is none.
    pub(crate) fn lookup_reused(&self, parent: u64, name: &OsStr) -> Option<FileAttr> {
        if !self.recent.enabled() {
            return None;
        }
        let path = child(&self.path_of(parent).ok()?, name).ok()?;
        let st = self.recent.status(&path)?;
        let ino = self.inodes().remember(&path);
        self.stats.reused();
        // A read-only mount has no writers or stages whose attributes would differ.
        Some(attr_of(ino, &st, self.owner, None))
    }

    /// From memory when fetched within `attr_ttl` ([`crate::attr_cache`]), else from the master.
    pub(crate) async fn getattr(&self, ino: u64) -> Result<FileAttr, Errno> {
        if let Some(attr) = self.cached_attr(ino) {
            return Ok(attr);
        }
        let (epoch, fetched) = (self.attrs.epoch(), Instant::now());
        let path = self.path_of(ino)?;
        let attr = self.attr(ino, &path).await?;
        self.keep_attr(&attr, fetched, epoch);
        Ok(attr)
    }

    /// cv keeps the mode a file was made with and has no owners, so only
    /// "changes" to what is already there succeed; times are accepted and
    /// ignored (mtime is the master's time of the last change). Size: a
    /// stream goes to 0 or stays; any other size stages the file (see
    /// [`crate::staging`]), published at once when no writer has it open.
    pub(crate) async fn setattr(&self, ino: u64, set: SetAttr) -> Result<FileAttr, Errno> {
        let path = self.path_of(ino)?;
        let st = match self.stage(ino) {
            Some(stage) => stage.status().await,
            None => self.stat(&path).await?,
        };
        if let Some(mode) = set.mode
            && mode & 0o7777 != st.mode & 0o7777
        {
            return Err(Errno::EPERM);
        }
        if set.uid.is_some_and(|u| u != self.owner.uid) || set.gid.is_some_and(|g| g != self.owner.gid) {
            return Err(Errno::EPERM);
        }
        let Some(size) = set.size else { return Ok(self.attr_from(ino, &st).await) };
        if st.kind == FileKind::Dir {
            return Err(Errno::EISDIR);
        }
        if let Some(stage) = self.stage(ino) {
            stage.truncate(size).await?;
            return self.truncated(ino, &st).await;
        }
        let through = match set.fh.map(|fh| self.handle(fh)) {
            Some(Ok(Handle::Write { writer, .. })) => Some(writer),
            _ => self.writer(ino),
        };
        if let Some(w) = through {
            if w.truncate(size).await? == Streamed::NeedsStage {
                let start = w.to_stage().await?;
                self.begin_stage(ino, start).await?.truncate(size).await?;
                return self.truncated(ino, &st).await;
            }
            let mut attr = self.attr_from(ino, &st).await;
            attr.size = size;
            return Ok(attr);
        }
        if size == st.length {
            return Ok(self.attr_from(ino, &st).await);
        }
        if size == 0 {
            let w = self.client.create(&path, true).await.map_err(|e| errno_of(&e))?;
            let st = w.close().await.map_err(|e| errno_of(&e))?;
            self.content_changed(ino);
            return Ok(self.attr_from(ino, &st).await);
        }
        self.begin_stage(ino, Start::Cv).await?.truncate(size).await?;
        self.truncated(ino, &st).await
    }

    /// After a staged truncate: published now if no writer will publish it
    /// at its close.
    async fn truncated(&self, ino: u64, st: &FileStatus) -> Result<FileAttr, Errno> {
        let attr = self.attr_from(ino, st).await;
        if self.open_handles(ino, true) == 0 {
            self.publish(ino).await?;
            self.end_stage_if_unused(ino).await;
        }
        Ok(attr)
    }

    pub(crate) async fn mkdir(&self, parent: u64, name: &OsStr) -> Result<FileAttr, Errno> {
        let path = child(&self.path_of(parent)?, name)?;
        self.client.mkdir(&path, false).await.map_err(|e| errno_of(&e))?;
        let st = self.stat(&path).await?;
        let ino = self.inodes().remember(&path);
        Ok(self.attr_from(ino, &st).await)
    }

    /// unlink (`dir == false`) or rmdir (`dir == true`).
    pub(crate) async fn remove(&self, parent: u64, name: &OsStr, dir: bool) -> Result<(), Errno> {
        let path = child(&self.path_of(parent)?, name)?;
        let st = self.stat(&path).await?;
        match (st.kind, dir) {
            (FileKind::Dir, false) => return Err(Errno::EISDIR),
            (FileKind::File, true) => return Err(Errno::ENOTDIR),
            _ => {}
        }
        let delete = async { self.client.delete(&path, false).await.map_err(|e| errno_of(&e)) };
        // A staged file is unlinked under its stage's lock: a publish (another handle's
        // release, asynchronous to close) cannot bring it back between delete and unlink.
        let stage = self.inodes().peek(&path).and_then(|ino| self.stage(ino));
        match stage {
            Some(stage) => stage.unlink(delete).await?,
            None => delete.await?,
        }
        self.inodes().unlinked(&path);
        Ok(())
    }

    /// POSIX rename. cv's rename refuses an existing target, so a target of
    /// the right kind is removed first (not atomic: a crash in between
    /// leaves the target gone and the source in place).
    pub(crate) async fn rename(
        &self,
        parent: u64,
        name: &OsStr,
        new_parent: u64,
        new_name: &OsStr,
        flags: RenameFlags,
    ) -> Result<(), Errno> {
        if flags.contains(RenameFlags::RENAME_EXCHANGE) || flags.contains(RenameFlags::RENAME_WHITEOUT) {
            return Err(Errno::EINVAL);
        }
        let src = child(&self.path_of(parent)?, name)?;
        let dst = child(&self.path_of(new_parent)?, new_name)?;
        match self.client.rename(&src, &dst).await {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::AlreadyExists => {
                if flags.contains(RenameFlags::RENAME_NOREPLACE) {
                    return Err(Errno::EEXIST);
                }
                let (s, d) = (self.stat(&src).await?, self.stat(&dst).await?);
                match (s.kind, d.kind) {
                    (FileKind::Dir, FileKind::File) => return Err(Errno::ENOTDIR),
                    (FileKind::File, FileKind::Dir) => return Err(Errno::EISDIR),
                    _ => {}
                }
                self.client.delete(&dst, false).await.map_err(|e| errno_of(&e))?;
                self.client.rename(&src, &dst).await.map_err(|e| errno_of(&e))?;
            }
            Err(e) => return Err(errno_of(&e)),
        }
        self.inodes().renamed(&src, &dst);
        Ok(())
    }

    /// Lists a directory once at opendir; readdir pages through the copy.
    pub(crate) async fn opendir(&self, ino: u64) -> Result<u64, Errno> {
        let path = self.path_of(ino)?;
        let asked = Instant::now();
        let mut entries = self.client.list(&path).await.map_err(|e| errno_of(&e))?;
        // Versions being published are not the application's files.
        entries.retain(|e| !crate::paths::name_of(&e.path).starts_with(TEMP_PREFIX));
        let entries = Arc::new(entries);
        self.recent.put_listing(&path, &entries, asked);
        Ok(self.add_handle(Handle::Dir(entries)))
    }

    /// An opendir answered from a listing taken within `open_ttl` ([`crate::recent`]), on
    /// the kernel's thread; `None` if there is none.
    pub(crate) fn opendir_reused(&self, ino: u64) -> Option<u64> {
        if !self.recent.enabled() {
            return None;
        }
        let entries = self.recent.listing(&self.path_of(ino).ok()?)?;
        self.stats.reused();
        Some(self.add_handle(Handle::Dir(entries)))
    }

    pub(crate) fn listing(&self, fh: u64) -> Result<Arc<Vec<FileStatus>>, Errno> {
        match self.handle(fh)? {
            Handle::Dir(entries) => Ok(entries),
            _ => Err(Errno::EBADF),
        }
    }

    /// The inode of `ino`'s parent (for "..").
    pub(crate) fn parent_ino(&self, ino: u64) -> u64 {
        let inodes = self.inodes();
        let parent = inodes.path(ino).and_then(crate::paths::parent_of);
        parent.and_then(|p| inodes.peek(p)).unwrap_or(crate::inodes::ROOT_INO)
    }

    pub(crate) async fn statfs(&self) -> Result<Totals, Errno> {
        let r = self.client.report().await.map_err(|e| errno_of(&e))?;
        let live = r.workers.iter().filter(|w| w.live);
        let (cap, used) = live.fold((0u64, 0u64), |(c, u), w| (c + w.capacity, u + w.used));
        Ok(Totals { blocks: cap / 4096, free: cap.saturating_sub(used) / 4096, files: r.inodes })
    }
}
