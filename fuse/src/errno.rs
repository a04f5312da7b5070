//! The one place where a cv error becomes an errno the application sees.

use cv_client::{Error, ErrorKind};
use fuser::Errno;

/// Maps a client error to the errno of the failed call. Failures of the cluster each keep
/// an errno of their own, so an application (or its log) can tell them apart: a worker
/// unreachable after every failover (EHOSTUNREACH), the object store failing (EREMOTEIO),
/// bytes that failed their checksum (EBADMSG), a version replaced or removed since the open
/// (ESTALE), and acknowledged data that is gone (EIO, what a disk that lost a sector says).
/// EIO also covers a broken peer or the master unreachable.
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
        ErrorKind::WorkerUnreachable => Errno::EHOSTUNREACH,
        ErrorKind::StoreUnavailable => Errno::from_i32(libc::EREMOTEIO),
        ErrorKind::Corrupt => Errno::EBADMSG,
        // What NFS answers for a handle whose file was replaced or removed.
        ErrorKind::Stale => Errno::ESTALE,
        // A file whose writer has not completed it. ETXTBSY is the kernel's own answer when a
        // file cannot be used because a writer has it open (execve(2) of a file open for
        // writing), no other cv kind maps to it, and no libc or shell loop retries it (they
        // retry EINTR and EAGAIN): the writer may take hours. EBUSY was the other candidate,
        // but it is the catch-all of mounts and devices and says less.
        ErrorKind::FileIncomplete => Errno::ETXTBSY,
        ErrorKind::DataLoss | ErrorKind::Unavailable | ErrorKind::Protocol | ErrorKind::Config | ErrorKind::Other => {
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
        for kind in [ErrorKind::Unavailable, ErrorKind::DataLoss, ErrorKind::Protocol] {
            assert_eq!(errno_of(&Error::new(kind, "x")), Errno::EIO, "{kind:?}");
        }
        assert_eq!(errno_of(&Error::new(ErrorKind::Timeout, "x")), Errno::ETIMEDOUT);
    }

    #[test]
    fn each_cluster_failure_has_an_errno_of_its_own() {
        let cases = [
            ErrorKind::Timeout,
            ErrorKind::WorkerUnreachable,
            ErrorKind::StoreUnavailable,
            ErrorKind::Corrupt,
            ErrorKind::DataLoss,
        ];
        let errnos: std::collections::HashSet<i32> =
            cases.iter().map(|&k| i32::from(errno_of(&Error::new(k, "x")))).collect();
        assert_eq!(errnos.len(), cases.len(), "{errnos:?}");
        assert_eq!(errno_of(&Error::new(ErrorKind::StoreUnavailable, "x")), Errno::from_i32(libc::EREMOTEIO));
        assert_eq!(errno_of(&Error::new(ErrorKind::Stale, "x")), Errno::ESTALE);
        assert_eq!(errno_of(&Error::new(ErrorKind::FileIncomplete, "x")), Errno::ETXTBSY);
    }
}
