//! The floor under any FUSE mount with the page cache dropped: a read-only FUSE file system
//! over a local directory that answers each READ with one O_DIRECT read of the range and
//! nothing else (through the request thread's own io_uring, as cv's read-only mount reads:
//! `cv_rt::fs::RingFile::read_into_waiting`). No cv, no checksums, no leases, no round trip at open: what the kernel's
//! FUSE path costs (the request, the reply's copy into the page cache, the thread wake-ups) and
//! the disk read. `bench duckdb-tpch --fuse-floor` runs DuckDB over it beside cv's mount, so
//! cv's CPU per pass and time are read against it in the same run (as `http_floor.rs` is for
//! the S3 gateway).
//!
//! It is mounted as `cvctl fuse --read-only` mounts, through cv-fuse's own session and INIT
//! settings (`cv_fuse::session_config`, `cv_fuse::ask_kernel`: the same options, four request
//! threads on cloned descriptors) and attribute and entry times. The tree is read once at
//! start; the files must not change while it is mounted.

use cv_fuse::MountOptions;
use cv_rt::AlignedBuf;
use cv_rt::fs::RingFile;
use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, INodeNo, KernelConfig, LockOwner, OpenFlags,
    ReplyAttr, ReplyData, ReplyDirectory, ReplyDirectoryPlus, ReplyEmpty, ReplyEntry, ReplyOpen, Request,
};
use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, UNIX_EPOCH};

/// O_DIRECT alignment of offsets and lengths.
const ALIGN: u64 = 4096;

/// One file or directory of the tree; its inode number is its index + 1.
struct Node {
    path: PathBuf,
    attr: FileAttr,
    parent: u64,
    children: Vec<(OsString, u64)>,
}

/// The file system: the tree, and the open files by handle.
struct Floor {
    /// Attribute and entry time: cv's mount's (`MountOptions`).
    ttl: Duration,
    nodes: Vec<Node>,
    open: Mutex<HashMap<u64, Arc<RingFile>>>,
    next_fh: AtomicU64,
}

fn attr_of(ino: u64, m: &std::fs::Metadata) -> FileAttr {
    let mtime = m.modified().unwrap_or(UNIX_EPOCH);
    let kind = if m.is_dir() { FileType::Directory } else { FileType::RegularFile };
    FileAttr {
        ino: INodeNo(ino),
        size: m.len(),
        blocks: m.len().div_ceil(512),
        atime: mtime,
        mtime,
        ctime: mtime,
        crtime: mtime,
        kind,
        perm: (m.mode() & 0o7777) as u16,
        nlink: if m.is_dir() { 2 } else { 1 },
        uid: m.uid(),
        gid: m.gid(),
        rdev: 0,
        blksize: ALIGN as u32,
        flags: 0,
    }
}

impl Floor {
    /// Reads the tree under `root` (directories and regular files; anything else is left out).
    fn load(root: &Path) -> std::io::Result<Floor> {
        let mut nodes =
            vec![Node { path: root.to_path_buf(), attr: attr_of(1, &root.metadata()?), parent: 1, children: vec![] }];
        let mut i = 0;
        while i < nodes.len() {
            if nodes[i].attr.kind == FileType::Directory {
                let mut entries: Vec<_> = std::fs::read_dir(&nodes[i].path)?.collect::<Result<_, _>>()?;
                entries.sort_by_key(|e| e.file_name());
                for e in entries {
                    let m = e.metadata()?;
                    if !(m.is_dir() || m.is_file()) {
                        continue;
                    }
                    let ino = nodes.len() as u64 + 1;
                    nodes.push(Node { path: e.path(), attr: attr_of(ino, &m), parent: i as u64 + 1, children: vec![] });
                    nodes[i].children.push((e.file_name(), ino));
                }
            }
            i += 1;
        }
        let ttl = MountOptions::default().attr_ttl;
        Ok(Floor { ttl, nodes, open: Mutex::default(), next_fh: AtomicU64::new(1) })
    }

    fn node(&self, ino: INodeNo) -> Option<&Node> {
        self.nodes.get((ino.0 as usize).checked_sub(1)?)
    }

    fn file(&self, fh: FileHandle) -> Option<Arc<RingFile>> {
        self.open.lock().unwrap_or_else(|p| p.into_inner()).get(&fh.0).cloned()
    }

    /// Directory `ino`'s entries, "." and ".." first, each with the offset of the next.
    fn listing(&self, ino: INodeNo) -> Option<impl Iterator<Item = (u64, &Node, &OsStr)>> {
        let n = self.node(ino)?;
        let parent = self.node(INodeNo(n.parent))?;
        let dots = [(n, OsStr::new(".")), (parent, OsStr::new(".."))];
        let children = n.children.iter().filter_map(|(name, i)| Some((self.node(INodeNo(*i))?, name.as_os_str())));
        Some(dots.into_iter().chain(children).enumerate().map(|(i, (node, name))| (i as u64 + 1, node, name)))
    }
}

impl Filesystem for Floor {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        cv_fuse::ask_kernel(config);
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let found = self.node(parent).and_then(|p| p.children.iter().find(|(n, _)| n == name));
        match found.and_then(|&(_, ino)| self.node(INodeNo(ino))) {
            Some(n) => reply.entry(&self.ttl, &n.attr, fuser::Generation(0)),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.node(ino) {
            Some(n) => reply.attr(&self.ttl, &n.attr),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn open(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        let Some(n) = self.node(ino) else { return reply.error(Errno::ENOENT) };
        match std::fs::OpenOptions::new().read(true).custom_flags(libc::O_DIRECT).open(&n.path) {
            Ok(f) => {
                let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
                self.open.lock().unwrap_or_else(|p| p.into_inner()).insert(fh, Arc::new(RingFile::new(f)));
                reply.opened(FileHandle(fh), FopenFlags::empty());
            }
            Err(e) => reply.error(Errno::from(e)),
        }
    }

    fn read(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let Some(f) = self.file(fh) else { return reply.error(Errno::EBADF) };
        // The aligned range around the request, read with O_DIRECT, like cv's short-circuit
        // read but without its whole chunks and their checksums.
        let start = offset / ALIGN * ALIGN;
        let len = (offset + u64::from(size)).div_ceil(ALIGN) * ALIGN - start;
        match f.read_into_waiting(AlignedBuf::with_capacity(len as usize), 0, len as usize, start) {
            Ok((n, buf)) => {
                let skip = (offset - start) as usize;
                let have = n.saturating_sub(skip).min(size as usize);
                reply.data(&buf.as_slice()[skip..skip + have]);
            }
            Err(e) => reply.error(Errno::from(e)),
        }
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
        self.open.lock().unwrap_or_else(|p| p.into_inner()).remove(&fh.0);
        reply.ok();
    }

    fn readdir(&self, _req: &Request, ino: INodeNo, _fh: FileHandle, offset: u64, mut reply: ReplyDirectory) {
        let Some(entries) = self.listing(ino) else { return reply.error(Errno::ENOENT) };
        for (i, entry, name) in entries.skip(offset as usize) {
            if reply.add(INodeNo(entry.attr.ino.0), i, entry.attr.kind, name) {
                break;
            }
        }
        reply.ok();
    }

    /// cv's mount asks for READDIRPLUS (`cv_fuse::ask_kernel`): listings carry attributes.
    fn readdirplus(&self, _req: &Request, ino: INodeNo, _fh: FileHandle, offset: u64, mut reply: ReplyDirectoryPlus) {
        let Some(entries) = self.listing(ino) else { return reply.error(Errno::ENOENT) };
        for (i, entry, name) in entries.skip(offset as usize) {
            if reply.add(entry.attr.ino, i, name, &self.ttl, &entry.attr, fuser::Generation(0)) {
                break;
            }
        }
        reply.ok();
    }
}

/// Mounts the floor over `source` at `mountpoint` and serves it until it is unmounted.
pub fn serve(source: &Path, mountpoint: &Path) -> std::io::Result<()> {
    let fs = Floor::load(source)?;
    let opts = MountOptions { read_only: true, fs_name: "cv-floor".into(), ..MountOptions::default() };
    fuser::mount(fs, mountpoint, &cv_fuse::session_config(&opts))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tree_is_read_with_parents_and_children() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("t")).unwrap();
        std::fs::write(dir.path().join("t/part-0.parquet"), b"abc").unwrap();
        let f = Floor::load(dir.path()).unwrap();
        let t = f.nodes[0].children.iter().find(|(n, _)| n == "t").map(|&(_, i)| i).unwrap();
        let (name, file) = &f.node(INodeNo(t)).unwrap().children[0];
        assert_eq!(name, "part-0.parquet");
        let node = f.node(INodeNo(*file)).unwrap();
        assert_eq!((node.attr.size, node.attr.kind, node.parent), (3, FileType::RegularFile, t));
        assert!(f.node(INodeNo(0)).is_none() && f.node(INodeNo(99)).is_none());
        // A listing: ".", "..", then the children, each with the offset of the next.
        let names: Vec<(u64, u64, &OsStr)> =
            f.listing(INodeNo(t)).unwrap().map(|(i, n, name)| (i, n.attr.ino.0, name)).collect();
        let want = [(1, t, OsStr::new(".")), (2, 1, OsStr::new("..")), (3, *file, OsStr::new("part-0.parquet"))];
        assert_eq!(names, want);
    }
}
