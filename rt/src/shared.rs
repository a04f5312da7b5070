//! A ring that threads of another runtime submit reads to, and whose completions signal an
//! eventfd: for the client's tokio tasks to read O_DIRECT files through io_uring without a
//! thread of their own in between. Before it, a short-circuit read went from the task to the
//! client's io thread and back, two cross-thread wake-ups per read (at depth 1 on the VMs
//! measured, its p50 was twice the device's).
//!
//! The caller waits for [`SharedRing::eventfd`] to be readable (tokio's `AsyncFd`) and calls
//! [`SharedRing::reap`], which wakes the reads that completed. Every buffer stays owned by the
//! ring's slot until its completion arrives, also when the awaiting [`SharedRead`] is dropped
//! first (see `ring.rs`); dropping the ring cancels what is in flight and waits for it.

use std::fs::File;
use std::future::Future;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, RawFd};
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};

use super::buf::AlignedBuf;
use super::fs::RingFile;
use super::ring::{Keep, Ring};

/// One io_uring shared by the threads that submit to it.
#[derive(Debug)]
pub struct SharedRing {
    ring: Mutex<Ring>,
    efd: File,
}

impl SharedRing {
    /// A ring of `entries` submission entries (more reads in flight wait for room).
    pub fn new(entries: u32) -> io::Result<SharedRing> {
        let ring = Ring::plain(entries)?;
        let efd = super::sys::eventfd()?;
        ring.register_eventfd(efd.as_raw_fd())?;
        Ok(SharedRing { ring: Mutex::new(ring), efd })
    }

    fn lock(&self) -> MutexGuard<'_, Ring> {
        self.ring.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Readable when a completion may be waiting (non-blocking, close-on-exec).
    pub fn eventfd(&self) -> RawFd {
        self.efd.as_raw_fd()
    }

    /// Clears the eventfd, then collects the completions and wakes their reads. A completion
    /// after the clear signals the eventfd again.
    pub fn reap(&self) {
        let mut count = [0u8; 8];
        // Non-blocking: nothing to read (EAGAIN) is fine.
        let _ = (&self.efd).read(&mut count);
        let mut wake = Vec::new();
        self.lock().reap(&mut wake);
        wake.into_iter().for_each(Waker::wake);
    }

    /// Reads up to `len` bytes at `pos` of `file` into `buf` from byte `at` on (for O_DIRECT,
    /// `at` a multiple of [`crate::BUF_ALIGN`]); submitted now.
    pub fn read(
        self: &Arc<Self>,
        file: &Arc<RingFile>,
        buf: AlignedBuf,
        at: usize,
        len: usize,
        pos: u64,
    ) -> SharedRead {
        let mut ring = self.lock();
        let id = ring.read(file.raw_fd(), buf, at, len, pos).into_id();
        // Submitted before the lock is let go: the fd is open (the caller holds `file`).
        ring.flush();
        SharedRead { ring: self.clone(), _file: file.clone(), id: Some(id) }
    }
}

impl Drop for SharedRing {
    fn drop(&mut self) {
        self.lock().drain();
    }
}

/// A read on a [`SharedRing`]; resolves to the bytes read and the buffer.
#[derive(Debug)]
#[must_use = "a read does nothing useful unless awaited"]
pub struct SharedRead {
    ring: Arc<SharedRing>,
    /// Kept open while the read may still be submitted.
    _file: Arc<RingFile>,
    id: Option<usize>,
}

impl Future for SharedRead {
    type Output = io::Result<(usize, AlignedBuf)>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let id = self.id.expect("a read polled after it completed");
        let mut wake = Vec::new();
        let out = {
            let mut ring = self.ring.lock();
            // Completions already posted are collected here too, not only by the eventfd's
            // reaper: a read that completed before its first poll answers at once.
            ring.reap(&mut wake);
            ring.poll_op(id, cx)
        };
        wake.into_iter().for_each(Waker::wake);
        match out {
            Poll::Ready((res, keep)) => {
                self.id = None;
                let Keep::Aligned(buf) = keep else { unreachable!("a read returns its buffer") };
                Poll::Ready(if res < 0 { Err(io::Error::from_raw_os_error(-res)) } else { Ok((res as usize, buf)) })
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

impl Drop for SharedRead {
    fn drop(&mut self) {
        if let Some(id) = self.id.take() {
            // The slot keeps the buffer until the completion (or the ring's drain) frees it.
            self.ring.lock().drop_op(id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::sync::atomic::{AtomicBool, Ordering};

    struct Flag(AtomicBool);
    impl std::task::Wake for Flag {
        fn wake(self: Arc<Self>) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    /// Waits (up to 5 s) until the eventfd has been signalled, and clears it.
    fn signalled(ring: &SharedRing) -> bool {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let mut count = [0u8; 8];
        while std::time::Instant::now() < deadline {
            if (&ring.efd).read(&mut count).is_ok() {
                return true;
            }
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
        false
    }

    #[test]
    fn a_read_completes_through_the_eventfd_and_wakes_its_task() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let data: Vec<u8> = (0..(256u32 << 10)).map(|i| (i % 251) as u8).collect();
        std::fs::File::create(&path).unwrap().write_all(&data).unwrap();
        let file = Arc::new(RingFile::open_direct(&path, false).unwrap());
        let ring = Arc::new(SharedRing::new(8).unwrap());
        for (at, pos, len) in [(0usize, 0u64, 65536usize), (4096, 131072, 65536)] {
            let mut read = ring.read(&file, AlignedBuf::with_capacity(at + len), at, len, pos);
            let flag = Arc::new(Flag(AtomicBool::new(false)));
            let waker = Waker::from(flag.clone());
            let mut cx = Context::from_waker(&waker);
            let mut got = None;
            for _ in 0..100 {
                if let Poll::Ready(r) = Pin::new(&mut read).poll(&mut cx) {
                    got = Some(r.unwrap());
                    break;
                }
                // The eventfd may still hold a signal of the previous read's completion (seen
                // under load): then this reap finds nothing yet, and the next signal is this
                // read's.
                assert!(signalled(&ring), "the completion signals the eventfd");
                ring.reap();
            }
            assert!(flag.0.load(Ordering::SeqCst), "the reap woke the read's task");
            let (n, buf) = got.expect("the read completed");
            assert_eq!(n, len);
            assert_eq!(&buf.as_slice()[at..at + len], &data[pos as usize..pos as usize + len]);
        }
        // A read dropped before its completion leaves its buffer to the ring, which drains.
        drop(ring.read(&file, AlignedBuf::with_capacity(65536), 0, 65536, 0));
        drop(ring);
    }
}
