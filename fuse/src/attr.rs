//! cv metadata as the kernel's file attributes.

use cv_client::{FileKind, FileStatus};
use fuser::{FileAttr, FileType, INodeNo};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Block size reported to `stat`: large, so tools copy in large pieces.
const BLKSIZE: u32 = 1 << 20;

/// Who owns every file: cv keeps no owners, so the mount's owner does.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Owner {
    pub uid: u32,
    pub gid: u32,
}

/// The attributes of `st` under number `ino`; `size` overrides the length
/// (a file this mount is writing is longer than the master knows yet).
pub(crate) fn attr_of(ino: u64, st: &FileStatus, owner: Owner, size: Option<u64>) -> FileAttr {
    let size = size.unwrap_or(st.length);
    let mtime = UNIX_EPOCH + Duration::from_millis(st.mtime_ms);
    let (kind, nlink) = match st.kind {
        FileKind::File => (FileType::RegularFile, 1),
        FileKind::Dir => (FileType::Directory, 2),
    };
    FileAttr {
        ino: INodeNo(ino),
        size,
        blocks: size.div_ceil(512),
        atime: mtime,
        mtime,
        ctime: mtime,
        crtime: mtime,
        kind,
        perm: (st.mode & 0o7777) as u16,
        nlink,
        uid: owner.uid,
        gid: owner.gid,
        rdev: 0,
        blksize: BLKSIZE,
        flags: 0,
    }
}

/// Attributes of a file this mount is creating and has no status for yet.
pub(crate) fn new_file_attr(ino: u64, owner: Owner, size: u64) -> FileAttr {
    let now = SystemTime::now();
    let ms = now.duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0);
    let st = FileStatus {
        id: 0,
        path: String::new(),
        kind: FileKind::File,
        length: size,
        mtime_ms: ms,
        version: 0,
        mode: 0o644,
        complete: false,
        block_size: 0,
    };
    attr_of(ino, &st, owner, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_and_dir_attributes() {
        let owner = Owner { uid: 7, gid: 8 };
        let mut st = FileStatus {
            id: 99,
            path: "/f".into(),
            kind: FileKind::File,
            length: 1025,
            mtime_ms: 1_500,
            version: 3,
            mode: 0o100644,
            complete: true,
            block_size: 4 << 20,
        };
        let a = attr_of(5, &st, owner, None);
        assert_eq!((a.ino, a.size, a.blocks, a.perm, a.nlink), (INodeNo(5), 1025, 3, 0o644, 1));
        assert_eq!((a.uid, a.gid, a.kind), (7, 8, FileType::RegularFile));
        assert_eq!(a.mtime, UNIX_EPOCH + Duration::from_millis(1_500));
        assert_eq!(attr_of(5, &st, owner, Some(10)).size, 10);
        st.kind = FileKind::Dir;
        assert_eq!(attr_of(5, &st, owner, None).kind, FileType::Directory);
    }
}
