//! What is wrong with a record of the index log, and the damage that keeps a store from opening.
//!
//! A crash can only leave the last append partly written, so a bad record with no intact
//! record after it is a torn tail and is cut; one followed by an intact record, or one whose
//! crc32 matches but whose payload is wrong, cannot come from a crash, and dropping it would
//! drop acknowledged records after it (STORE-FORMAT.md, "Reading").

use std::fmt;
use std::path::{Path, PathBuf};

/// Why the record at some byte offset of an index log does not read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RecordFault {
    /// Fewer than the 8 bytes of a frame are left in the file.
    ShortFrame {
        /// Bytes left from the record's offset to the end of the file.
        left: u64,
    },
    /// The length field is 0 or above the bound of a payload.
    BadLength {
        /// The length field.
        len: u32,
    },
    /// The payload would run past the end of the file.
    PastEnd {
        /// The length field.
        len: u32,
        /// Bytes of the file after the frame.
        left: u64,
    },
    /// The payload does not match its crc32.
    BadCrc {
        /// The crc32 in the frame.
        stored: u32,
        /// The crc32 of the payload as read.
        computed: u32,
    },
    /// The crc32 matches but the tag is no record kind of this version.
    BadKind {
        /// The payload's first byte.
        tag: u8,
    },
    /// The crc32 matches but the payload is too short or too long for its kind.
    BadSize {
        /// The payload's first byte.
        tag: u8,
        /// The payload's length.
        len: u32,
    },
    /// The crc32 matches but a pinned flag is neither 0 nor 1.
    BadFlag {
        /// The flag byte.
        value: u8,
    },
    /// The crc32 matches but an ADD's extent or chunk count is inconsistent.
    BadGeometry,
}

impl RecordFault {
    /// Whether a crash during an append can leave this: the bytes of a frame that were never
    /// all written. A record whose crc32 matches was written whole, by someone.
    pub fn torn_write_can_leave(self) -> bool {
        matches!(
            self,
            RecordFault::ShortFrame { .. }
                | RecordFault::BadLength { .. }
                | RecordFault::PastEnd { .. }
                | RecordFault::BadCrc { .. }
        )
    }
}

impl fmt::Display for RecordFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            RecordFault::ShortFrame { left } => write!(f, "short frame: {left} bytes left"),
            RecordFault::BadLength { len } => write!(f, "bad length {len}"),
            RecordFault::PastEnd { len, left } => write!(f, "length {len} runs past the end ({left} bytes left)"),
            RecordFault::BadCrc { stored, computed } => {
                write!(f, "bad crc: stored {stored:#010x}, payload {computed:#010x}")
            }
            RecordFault::BadKind { tag } => write!(f, "bad kind: tag {tag}"),
            RecordFault::BadSize { tag, len } => write!(f, "bad size: {len} bytes for tag {tag}"),
            RecordFault::BadFlag { value } => write!(f, "bad pinned flag {value}"),
            RecordFault::BadGeometry => f.write_str("bad ADD geometry (alignment, extent or chunk count)"),
        }
    }
}

/// A record of an index log that is bad where no crash can have left it: the store does not
/// open ([`ErrorKind::Damaged`](super::ErrorKind::Damaged)), and the file is left as it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexDamage {
    /// The index log; `None` when decoded from bytes with no file (`format::decode_index`).
    pub file: Option<PathBuf>,
    /// Byte offset of the bad record's frame in the file.
    pub offset: u64,
    /// What is wrong with it.
    pub fault: RecordFault,
    /// Byte offset of the first intact record after it, if any.
    pub next_intact: Option<u64>,
}

impl IndexDamage {
    /// The same damage, found in `file`.
    pub(crate) fn in_file(mut self, file: &Path) -> Self {
        self.file = Some(file.to_path_buf());
        self
    }
}

impl fmt::Display for IndexDamage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let file = self.file.as_deref().map_or_else(|| "<bytes>".into(), |p| p.display().to_string());
        write!(f, "block index {file}: record at byte {} is damaged ({})", self.offset, self.fault)?;
        match self.next_intact {
            Some(n) => write!(f, ", intact records follow from byte {n}")?,
            None => f.write_str(", its crc32 matches so no crash wrote it")?,
        }
        write!(
            f,
            "; not cut, since that would drop acknowledged records. To start this shard empty \
             (the master copies its blocks back), move {file} aside"
        )
    }
}
