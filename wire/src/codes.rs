//! Error codes carried by [`crate::msg::ErrorReply`], declared once.
//!
//! Each code says whether retrying the same request can help. Codes are part of
//! the protocol: never renumber one, only add.

macro_rules! error_codes {
    ($($(#[doc = $doc:literal])* $name:ident = $code:literal, retry: $retry:literal;)*) => {
        /// A protocol-level error code.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[repr(u16)]
        pub enum ErrorCode {
            $($(#[doc = $doc])* $name = $code,)*
        }

        impl ErrorCode {
            /// Every code, in table order.
            pub const ALL: &'static [ErrorCode] = &[$(ErrorCode::$name),*];

            /// Decodes a code; unknown codes (from a newer peer) become `Internal`.
            pub fn from_u16(code: u16) -> ErrorCode {
                match code {
                    $($code => ErrorCode::$name,)*
                    _ => ErrorCode::Internal,
                }
            }

            /// Whether the same request may succeed if sent again.
            pub const fn retryable(self) -> bool {
                match self { $(ErrorCode::$name => $retry,)* }
            }

            /// Stable lower-case name, for logs and JSON output.
            pub const fn name(self) -> &'static str {
                match self { $(ErrorCode::$name => stringify!($name),)* }
            }
        }
    };
}

error_codes! {
    /// A bug or an unexpected state on the server.
    Internal = 1, retry: false;
    /// The request is well-formed but an argument is not acceptable.
    InvalidArgument = 2, retry: false;
    /// A path is not absolute, too long, too deep, or escapes the root.
    InvalidPath = 3, retry: false;
    /// No such file, directory, block, mount or worker.
    NotFound = 4, retry: false;
    /// The target already exists.
    AlreadyExists = 5, retry: false;
    /// A path component that must be a directory is a file.
    NotADirectory = 6, retry: false;
    /// A file operation was asked of a directory.
    IsADirectory = 7, retry: false;
    /// A directory to delete is not empty and the delete was not recursive.
    NotEmpty = 8, retry: false;
    /// The peer's identity may not perform this operation.
    PermissionDenied = 9, retry: false;
    /// The peer did not present a valid cluster identity.
    Unauthenticated = 10, retry: false;
    /// The peer speaks a protocol version this build does not.
    VersionMismatch = 11, retry: false;
    /// A frame broke a size or count limit.
    LimitExceeded = 12, retry: false;
    /// A frame could not be decoded (bad magic, bad archive, bad checksum).
    Malformed = 13, retry: false;
    /// The server is temporarily unable to serve (starting, stopping, overloaded).
    Unavailable = 14, retry: true;
    /// The operation did not finish within its deadline.
    Timeout = 15, retry: true;
    /// No live worker can take a block right now.
    NoWorkers = 16, retry: true;
    /// The storage is full and nothing can be evicted.
    NoSpace = 17, retry: false;
    /// Stored bytes failed their checksum; the copy was dropped, fetch again.
    Corrupt = 18, retry: true;
    /// The block belongs to another shard; the reply names it.
    WrongShard = 19, retry: true;
    /// The file is not open for writing (completed, or never created).
    NotWritable = 20, retry: false;
    /// The object store failed; the reply says whether it is transient.
    UfsFailed = 21, retry: true;
    /// The operation is not supported by this server or mount mode.
    Unsupported = 22, retry: false;
    /// The object changed in the store since the file was opened: open it again.
    StaleVersion = 23, retry: false;
    /// The only copy of acknowledged bytes is gone (its worker was lost, its disk dropped the
    /// block): the message names the file and the block.
    DataLoss = 24, retry: false;
    /// This master does not lead the masters' Raft group; the message names the leader's
    /// address when it is known, and the client asks it in the same call.
    NotLeader = 25, retry: true;
    /// The file is still being written: it can be opened once its writer completes it, which
    /// may take as long as the writer likes, so a retry within one call's deadline does not
    /// help. The message names the path. (Added within version 8; an older peer reads it as
    /// `Internal`, also not retryable.)
    FileIncomplete = 26, retry: false;
    /// The object store behind a cache-mode mount failed a write-through after the master's
    /// own retries, and the file was not kept: the whole write must be made again. The
    /// message names the store, the key and what failed. Not retryable: the completion it
    /// answers cannot succeed again. (Added within version 8; an older peer reads it as
    /// `Internal`, also not retryable.)
    WriteThroughFailed = 27, retry: false;
    /// A block capability this worker cannot accept though it may be genuine: expired, or
    /// signed with a key it does not hold (yet): open the file again for a fresh one (since 9).
    /// A forged or mismatched one is `PermissionDenied`.
    StaleCapability = 28, retry: false;
}

impl ErrorCode {
    /// Whether the code reports a failure of the server or of what is behind it (its disk, a
    /// worker, the object store), not a refusal of the request: servers log these as warnings
    /// and the others at debug, each under the request's id.
    pub const fn is_fault(self) -> bool {
        matches!(
            self,
            ErrorCode::Internal
                | ErrorCode::Unavailable
                | ErrorCode::Timeout
                | ErrorCode::NoWorkers
                | ErrorCode::NoSpace
                | ErrorCode::Corrupt
                | ErrorCode::UfsFailed
                | ErrorCode::DataLoss
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_and_are_unique() {
        let mut seen = std::collections::HashSet::new();
        for &c in ErrorCode::ALL {
            assert!(seen.insert(c as u16), "duplicate code {}", c as u16);
            assert_eq!(ErrorCode::from_u16(c as u16), c);
        }
        assert_eq!(ErrorCode::from_u16(60_000), ErrorCode::Internal);
    }

    #[test]
    fn retry_flags() {
        assert!(ErrorCode::Unavailable.retryable());
        assert!(ErrorCode::Corrupt.retryable());
        assert!(!ErrorCode::NotFound.retryable());
        assert!(!ErrorCode::Malformed.retryable());
        // A writer may take hours: waiting out a deadline for it helps nobody.
        assert!(!ErrorCode::FileIncomplete.retryable());
    }
}
