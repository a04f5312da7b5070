//! The one place where a cv error becomes an errno the application sees.

use cv_client::{Error, ErrorKind};
use fuser::Errno;

/// Maps a client error to the errno of the failed call. EIO is kept for real
/// I/O failures (a worker or the master unreachable after the client's
/// retries and fallbacks, bytes that failed their checksum, a broken peer).
pub fn errno_of(e: &Error) -> Errno {
    match e.kind() {
        ErrorKind::NotFound => Errno::ENOENT,
        ErrorKind::AlreadyExists => Errno::EEXIST,
        ErrorKind::NotADirectory => Errno::ENOTDIR,
        ErrorKind::IsADirectory => Errno::EISDIR,
        ErrorKind::NotEmpty => Errno::ENOTEMPTY,
        ErrorKind::InvalidPath | ErrorKind::InvalidArgument => Errno::EINVAL,
        ErrorKind::PermissionDenied => Errno::EACCES,
        ErrorKind::NoSpace => Errno::ENOSPC,
        ErrorKind::Timeout => Errno::ETIMEDOUT,
        // What rename(2) says across file systems: `mv` then copies and deletes.
        ErrorKind::Unsupported => Errno::EXDEV,
        ErrorKind::Unavailable | ErrorKind::Corrupt | ErrorKind::Protocol | ErrorKind::Config | ErrorKind::Other => {
            Errno::EIO
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespace_errors_keep_their_meaning() {
        let cases = [
            (ErrorKind::NotFound, Errno::ENOENT),
            (ErrorKind::AlreadyExists, Errno::EEXIST),
            (ErrorKind::NotADirectory, Errno::ENOTDIR),
            (ErrorKind::IsADirectory, Errno::EISDIR),
            (ErrorKind::NotEmpty, Errno::ENOTEMPTY),
            (ErrorKind::PermissionDenied, Errno::EACCES),
            (ErrorKind::NoSpace, Errno::ENOSPC),
            (ErrorKind::InvalidArgument, Errno::EINVAL),
            (ErrorKind::Unsupported, Errno::EXDEV),
        ];
        for (kind, want) in cases {
            assert_eq!(errno_of(&Error::new(kind, "x")), want, "{kind:?}");
        }
    }

    #[test]
    fn only_failures_of_io_become_eio() {
        for kind in [ErrorKind::Unavailable, ErrorKind::Corrupt, ErrorKind::Protocol] {
            assert_eq!(errno_of(&Error::new(kind, "x")), Errno::EIO, "{kind:?}");
        }
        assert_eq!(errno_of(&Error::new(ErrorKind::Timeout, "x")), Errno::ETIMEDOUT);
    }
}
