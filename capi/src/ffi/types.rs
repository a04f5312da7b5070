//! The C-visible types; field order and widths match cv.h (a test compares).

use cv_client::{FileKind, FileStatus};
use std::ffi::{c_char, c_void};

/// A connected client (`cv_client_t`).
pub type CvClient = u64;
/// An open file (`cv_file_t`).
pub type CvFile = u64;
/// A file being written (`cv_writer_t`).
pub type CvWriter = u64;

/// `cv_stat_t.kind` of a regular file.
pub const KIND_FILE: u32 = 1;
/// `cv_stat_t.kind` of a directory.
pub const KIND_DIR: u32 = 2;

/// Metadata of a path (`cv_stat_t`). No implicit padding.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct CvStat {
    pub id: u64,
    pub length: u64,
    pub mtime_ms: u64,
    pub version: u64,
    pub block_size: u64,
    pub mode: u32,
    pub kind: u32,
    pub complete: u32,
    pub reserved: u32,
}

impl From<&FileStatus> for CvStat {
    fn from(s: &FileStatus) -> Self {
        CvStat {
            id: s.id,
            length: s.length,
            mtime_ms: s.mtime_ms,
            version: s.version,
            block_size: s.block_size,
            mode: s.mode,
            kind: if s.kind == FileKind::Dir { KIND_DIR } else { KIND_FILE },
            complete: u32::from(s.complete),
            reserved: 0,
        }
    }
}

/// One range of a vectored read (`cv_range_t`): the caller sets `offset`,
/// `buf` and `len`; the call sets `read`.
#[repr(C)]
#[derive(Debug)]
pub struct CvRange {
    pub offset: u64,
    pub buf: *mut u8,
    pub len: usize,
    pub read: usize,
}

/// Called once per directory entry by `cv_list` (`cv_list_fn_t`); a non-zero
/// return stops the listing.
pub type CvListFn = Option<unsafe extern "C" fn(ctx: *mut c_void, path: *const c_char, status: *const CvStat) -> i32>;
