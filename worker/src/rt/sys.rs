//! The two OS calls the runtime needs that std does not offer: an eventfd and CPU pinning.
#![allow(unsafe_code)]

use std::fs::File;
use std::io;
use std::os::fd::{FromRawFd, OwnedFd};

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
