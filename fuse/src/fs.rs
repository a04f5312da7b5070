//! The `fuser::Filesystem` implementation: each request is handed to the
//! tokio runtime and answered from there, so a slow call never holds up the
//! kernel's request threads. Operations cv does not have answer with the
//! errno POSIX gives for "not supported here" (see fuse/README.md).

use crate::attr::attr_of;
use crate::meta::SetAttr;
use crate::stats::{FuseOp, FuseStats};
use crate::volume::Volume;
use fuser::{
    AccessFlags, BsdFileFlags, Errno, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, KernelConfig,
    LockOwner, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyDirectoryPlus,
    ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, ReplyXattr, Request, TimeOrNow, WriteFlags,
};
use std::ffi::OsStr;
use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::time::SystemTime;

/// Inode numbers are never reused, so every generation is the same.
const GEN: Generation = Generation(0);

/// The mounted file system.
#[derive(Debug)]
pub(crate) struct CvFs {
    vol: Arc<Volume>,
    rt: tokio::runtime::Handle,
    /// Requests counted by kind, for `/metrics`.
    stats: Arc<FuseStats>,
}

impl CvFs {
    pub(crate) fn new(vol: Arc<Volume>, rt: tokio::runtime::Handle, stats: Arc<FuseStats>) -> Self {
        CvFs { vol, rt, stats }
    }

    /// Like [`CvFs::run`], after every earlier request on the same file being
    /// written is done (see [`crate::order`]). Kept attributes go as `changes` says.
    fn run_in_order<F, Fut>(&self, fh: u64, changes: Changes, f: F)
    where
        F: FnOnce(Arc<Volume>) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let turn = self.vol.ticket(fh);
        let change = match changes {
            Changes::Always => true,
            Changes::IfWriting => turn.is_some(),
            Changes::Never => false,
        }
        .then(|| self.vol.attrs.change());
        let vol = self.vol.clone();
        self.rt.spawn(async move {
            if let Some(t) = &turn {
                t.wait().await;
            }
            f(vol).await;
            drop(turn);
            drop(change);
        });
    }

    /// Like [`CvFs::run`] for a request that changes the namespace: kept
    /// attributes go when it starts, and again when it is done.
    fn run_changing<F, Fut>(&self, f: F)
    where
        F: FnOnce(Arc<Volume>) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let change = self.vol.attrs.change();
        let fut = f(self.vol.clone());
        self.rt.spawn(async move {
            fut.await;
            drop(change);
        });
    }

    /// Runs `f` with the volume on the runtime; `f` replies.
    fn run<F, Fut>(&self, f: F)
    where
        F: FnOnce(Arc<Volume>) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        self.rt.spawn(f(self.vol.clone()));
    }
}

/// Whether a request run in order changes what the master says of a file.
#[derive(Clone, Copy, Debug)]
enum Changes {
    /// setattr: mode or size, on any file.
    Always,
    /// flush, fsync, release: they may complete a file being written.
    IfWriting,
    /// write: its file has a writer, whose attributes are never kept while it lasts.
    Never,
}

fn entry(reply: ReplyEntry, vol: &Volume, r: Result<fuser::FileAttr, Errno>) {
    match r {
        Ok(a) => reply.entry(&vol.opts.entry_ttl, &a, GEN),
        Err(e) => reply.error(e),
    }
}

fn empty(reply: ReplyEmpty, r: Result<(), Errno>) {
    match r {
        Ok(()) => reply.ok(),
        Err(e) => reply.error(e),
    }
}

impl Filesystem for CvFs {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        crate::session::ask_kernel(config);
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        self.stats.count(FuseOp::Lookup);
        if let Some(a) = self.vol.lookup_reused(parent.0, name) {
            return reply.entry(&self.vol.opts.entry_ttl, &a, GEN);
        }
        let name = name.to_owned();
        self.run(|vol| async move { entry(reply, &vol, vol.lookup(parent.0, &name).await) });
    }

    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        self.stats.count(FuseOp::Other);
        self.vol.inodes().forget(ino.0, nlookup);
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, fh: Option<FileHandle>, reply: ReplyAttr) {
        self.stats.count(FuseOp::Getattr);
        let vol = &self.vol;
        // A file unlinked while open keeps the attributes it was opened with.
        if let Some(st) = fh.filter(|_| !vol.inodes().linked(ino.0)).and_then(|fh| vol.open_status(fh.0)) {
            return reply.attr(&vol.opts.attr_ttl, &attr_of(ino.0, &st, vol.owner, None));
        }
        // Attributes fetched within attr_ttl are answered here, on the kernel's thread.
        if let Some(a) = vol.cached_attr(ino.0) {
            self.stats.attr_hit();
            return reply.attr(&vol.opts.attr_ttl, &a);
        }
        self.run(|vol| async move {
            match vol.getattr(ino.0).await {
                Ok(a) => reply.attr(&vol.opts.attr_ttl, &a),
                Err(e) => reply.error(e),
            }
        });
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        _atime: Option<TimeOrNow>,
        _mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        self.stats.count(FuseOp::Setattr);
        let set = SetAttr { mode, uid, gid, size, fh: fh.map(|f| f.0) };
        self.run_in_order(fh.map_or(0, |f| f.0), Changes::Always, move |vol| async move {
            match vol.setattr(ino.0, set).await {
                Ok(a) => reply.attr(&vol.opts.attr_ttl, &a),
                Err(e) => reply.error(e),
            }
        });
    }

    fn readlink(&self, _req: &Request, _ino: INodeNo, reply: ReplyData) {
        // Nothing in cv is a symbolic link.
        reply.error(Errno::EINVAL);
    }

    fn mknod(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        _rdev: u32,
        reply: ReplyEntry,
    ) {
        let name = name.to_owned();
        self.run_changing(|vol| async move { entry(reply, &vol, vol.mknod(parent.0, &name, mode).await) });
    }

    fn mkdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, _mode: u32, _umask: u32, reply: ReplyEntry) {
        self.stats.count(FuseOp::Mkdir);
        let name = name.to_owned();
        self.run_changing(|vol| async move { entry(reply, &vol, vol.mkdir(parent.0, &name).await) });
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.stats.count(FuseOp::Remove);
        let name = name.to_owned();
        self.run_changing(|vol| async move { empty(reply, vol.remove(parent.0, &name, false).await) });
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.stats.count(FuseOp::Remove);
        let name = name.to_owned();
        self.run_changing(|vol| async move { empty(reply, vol.remove(parent.0, &name, true).await) });
    }

    fn symlink(&self, _req: &Request, _parent: INodeNo, _name: &OsStr, _target: &Path, reply: ReplyEntry) {
        // symlink(2): EPERM when the file system does not support symbolic links.
        reply.error(Errno::EPERM);
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        self.stats.count(FuseOp::Rename);
        let (name, newname) = (name.to_owned(), newname.to_owned());
        self.run_changing(|vol| async move {
            empty(reply, vol.rename(parent.0, &name, newparent.0, &newname, flags).await)
        });
    }

    fn link(&self, _req: &Request, _ino: INodeNo, _newparent: INodeNo, _newname: &OsStr, reply: ReplyEntry) {
        // link(2): EPERM when the file system does not support hard links.
        reply.error(Errno::EPERM);
    }

    fn open(&self, req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        self.stats.count(FuseOp::Open);
        if let Some(o) = self.vol.open_reused(ino.0, flags.0) {
            return reply.opened(FileHandle(o.fh), o.flags);
        }
        let pid = req.pid();
        let open = |vol: Arc<Volume>| async move {
            match vol.open(ino.0, flags.0, pid).await {
                Ok(o) => reply.opened(FileHandle(o.fh), o.flags),
                Err(e) => reply.error(e),
            }
        };
        // An open for writing may truncate, and makes a writer: a change.
        if flags.0 & libc::O_ACCMODE == libc::O_RDONLY { self.run(open) } else { self.run_changing(open) }
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        self.stats.read(u64::from(size));
        // A read the client can serve at once from a local worker's files is answered from the
        // client's io thread, without the runtime: two thread hops fewer per request.
        let Err(reply) = self.vol.read_now(fh.0, ino.0, offset, size, reply, &self.rt) else {
            return self.stats.read_at_once();
        };
        self.run(|vol| async move {
            match vol.read(fh.0, ino.0, offset, size).await {
                Ok(bytes) => reply.data(&bytes),
                Err(e) => reply.error(e),
            }
        });
    }

    fn write(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        self.stats.write(data.len() as u64);
        let (data, pid) = (data.to_vec(), req.pid());
        self.run_in_order(fh.0, Changes::Never, move |vol| async move {
            match vol.write(fh.0, ino.0, offset, &data, pid).await {
                Ok(n) => reply.written(n),
                Err(e) => reply.error(e),
            }
        });
    }

    fn flush(&self, req: &Request, _ino: INodeNo, fh: FileHandle, _lock_owner: LockOwner, reply: ReplyEmpty) {
        self.stats.count(FuseOp::Flush);
        let pid = req.pid();
        self.run_in_order(fh.0, Changes::IfWriting, move |vol| async move { empty(reply, vol.flush(fh.0, pid).await) });
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        self.stats.count(FuseOp::Release);
        self.run_in_order(fh.0, Changes::IfWriting, move |vol| async move { empty(reply, vol.release(fh.0).await) });
    }

    fn fsync(&self, _req: &Request, ino: INodeNo, fh: FileHandle, _datasync: bool, reply: ReplyEmpty) {
        self.stats.count(FuseOp::Fsync);
        // In order, so it answers after the writes before it.
        self.run_in_order(
            fh.0,
            Changes::IfWriting,
            move |vol| async move { empty(reply, vol.fsync(fh.0, ino.0).await) },
        );
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        self.stats.count(FuseOp::Other);
        if let Some(fh) = self.vol.opendir_reused(ino.0) {
            return reply.opened(FileHandle(fh), FopenFlags::empty());
        }
        self.run(|vol| async move {
            match vol.opendir(ino.0).await {
                Ok(fh) => reply.opened(FileHandle(fh), FopenFlags::empty()),
                Err(e) => reply.error(e),
            }
        });
    }

    fn readdir(&self, _req: &Request, ino: INodeNo, fh: FileHandle, offset: u64, mut reply: ReplyDirectory) {
        self.stats.count(FuseOp::Readdir);
        let entries = match self.vol.listing(fh.0) {
            Ok(e) => e,
            Err(e) => return reply.error(e),
        };
        let dots = [(ino.0, FileType::Directory, "."), (self.vol.parent_ino(ino.0), FileType::Directory, "..")];
        for i in offset as usize..entries.len() + 2 {
            let full = if i < 2 {
                let (n, kind, name) = dots[i];
                reply.add(INodeNo(n), i as u64 + 1, kind, name)
            } else {
                let st = &entries[i - 2];
                let kind =
                    if st.kind == cv_client::FileKind::Dir { FileType::Directory } else { FileType::RegularFile };
                // Plain readdir does not count a lookup: give a known number
                // or one that stays reserved for the path.
                let known = self.vol.inodes().peek(&st.path);
                let n = match known {
                    Some(n) => n,
                    None => self.vol.inodes().remember(&st.path),
                };
                reply.add(INodeNo(n), i as u64 + 1, kind, crate::paths::name_of(&st.path))
            };
            if full {
                break;
            }
        }
        reply.ok();
    }

    fn readdirplus(&self, _req: &Request, ino: INodeNo, fh: FileHandle, offset: u64, mut reply: ReplyDirectoryPlus) {
        self.stats.count(FuseOp::Readdir);
        self.run(|vol| async move {
            let entries = match vol.listing(fh.0) {
                Ok(e) => e,
                Err(e) => return reply.error(e),
            };
            let ttl = vol.opts.entry_ttl;
            for i in offset as usize..entries.len() + 2 {
                let full = if i < 2 {
                    // "." and ".." are not counted as lookups by the kernel.
                    let n = if i == 0 { ino.0 } else { vol.parent_ino(ino.0) };
                    let attr = match vol.getattr(n).await {
                        Ok(a) => a,
                        Err(e) => return reply.error(e),
                    };
                    reply.add(INodeNo(n), i as u64 + 1, if i == 0 { "." } else { ".." }, &ttl, &attr, GEN)
                } else {
                    let st = &entries[i - 2];
                    let n = vol.inodes().remember(&st.path);
                    let attr = vol.attr_from(n, st).await;
                    let full = reply.add(INodeNo(n), i as u64 + 1, crate::paths::name_of(&st.path), &ttl, &attr, GEN);
                    if full {
                        // Not sent: the kernel will not count it.
                        vol.inodes().forget(n, 1);
                    }
                    full
                };
                if full {
                    break;
                }
            }
            reply.ok();
        });
    }

    fn releasedir(&self, _req: &Request, _ino: INodeNo, fh: FileHandle, _flags: OpenFlags, reply: ReplyEmpty) {
        self.stats.count(FuseOp::Other);
        self.vol.take_handle(fh.0);
        reply.ok();
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        self.stats.count(FuseOp::Other);
        self.run(|vol| async move {
            match vol.statfs().await {
                Ok(t) => reply.statfs(t.blocks, t.free, t.free, t.files, u64::MAX / 2, 4096, 255, 4096),
                Err(e) => reply.error(e),
            }
        });
    }

    fn setxattr(&self, _req: &Request, _ino: INodeNo, _n: &OsStr, _v: &[u8], _f: i32, _p: u32, reply: ReplyEmpty) {
        // ENOSYS: the kernel then answers EOPNOTSUPP itself for every later xattr call.
        reply.error(Errno::ENOSYS);
    }

    fn getxattr(&self, _req: &Request, _ino: INodeNo, _name: &OsStr, _size: u32, reply: ReplyXattr) {
        reply.error(Errno::ENOSYS);
    }

    fn listxattr(&self, _req: &Request, _ino: INodeNo, _size: u32, reply: ReplyXattr) {
        reply.error(Errno::ENOSYS);
    }

    fn removexattr(&self, _req: &Request, _ino: INodeNo, _name: &OsStr, reply: ReplyEmpty) {
        reply.error(Errno::ENOSYS);
    }

    fn access(&self, _req: &Request, ino: INodeNo, _mask: AccessFlags, reply: ReplyEmpty) {
        self.stats.count(FuseOp::Other);
        // Permission bits are checked by the kernel (default_permissions);
        // here only existence.
        self.run(|vol| async move { empty(reply, vol.getattr(ino.0).await.map(|_| ())) });
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        _mode: u32,
        _umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        self.stats.count(FuseOp::Create);
        let (name, pid) = (name.to_owned(), req.pid());
        self.run_changing(|vol| async move {
            match vol.create(parent.0, &name, flags, pid).await {
                Ok((attr, o)) => reply.created(&vol.opts.entry_ttl, &attr, GEN, FileHandle(o.fh), o.flags),
                Err(e) => reply.error(e),
            }
        });
    }

    fn fallocate(&self, _req: &Request, _ino: INodeNo, _fh: FileHandle, _o: u64, _l: u64, _m: i32, reply: ReplyEmpty) {
        // fallocate(2): EOPNOTSUPP when the file system does not support it.
        reply.error(Errno::EOPNOTSUPP);
    }
}
