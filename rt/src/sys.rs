//! The OS calls the runtime needs that std does not offer: an eventfd, CPU pinning, and the
//! O_DIRECT alignment a file system asks for.
#![allow(unsafe_code)]

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// A non-blocking, close-on-exec eventfd (the runtime's wake-up from other threads).
pub(crate) fn eventfd() -> io::Result<File> {
    // SAFETY: eventfd takes no pointers; a negative return is an error, checked below.
    let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a freshly created descriptor that nothing else owns.
    Ok(File::from(unsafe { OwnedFd::from_raw_fd(fd) }))
}

/// Binds the calling thread to `cpu`.
pub(crate) fn pin_to_cpu(cpu: usize) -> io::Result<()> {
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("cpu {cpu} is out of range")));
    }
    // SAFETY: cpu_set_t is plain data for which all-zero is the empty set; CPU_SET writes
    // inside the set for an index below CPU_SETSIZE (checked above); sched_setaffinity reads
    // exactly `size_of::<cpu_set_t>()` bytes from it; pid 0 is the calling thread.
    let rc = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The alignment O_DIRECT needs on `file` (memory, file offset), as the file system reports it
/// (`statx` with `STATX_DIOALIGN`, Linux 6.1); `None` where it does not say.
pub(crate) fn direct_io_alignment(file: &File) -> io::Result<Option<(u32, u32)>> {
    // SAFETY: `statx` is plain data for which all-zero is valid; the call writes at most one
    // `statx` into it, reads the NUL-terminated empty path, and `AT_EMPTY_PATH` makes it
    // describe the open descriptor, which `file` keeps open for the call.
    let (rc, st) = unsafe {
        let mut st: libc::statx = std::mem::zeroed();
        let rc = libc::statx(file.as_raw_fd(), c"".as_ptr(), libc::AT_EMPTY_PATH, libc::STATX_DIOALIGN, &mut st);
        (rc, st)
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    if st.stx_mask & libc::STATX_DIOALIGN == 0 || st.stx_dio_offset_align == 0 {
        return Ok(None);
    }
    Ok(Some((st.stx_dio_mem_align, st.stx_dio_offset_align)))
}
