//! The shard's io_uring: submits operations, and routes completions to the tasks awaiting them.
//!
//! Every buffer, path or fd an operation refers to is owned by its slot from submission until
//! the completion arrives, even if the awaiting future is dropped first (the slot is then
//! *abandoned* and freed by its completion). That is what makes the `unsafe` pushes sound.
//! File operations (reads, writes, syncs, preallocation) are queued as they are made and
//! submitted together when the runtime finishes its turn ([`Ring::flush`]): a burst of
//! requests costs one `io_uring_enter`, and the block layer gets them in one submission (one
//! plug). A `RingFile` flushes before its fd
//! closes, so the kernel always takes its own reference to the file before the caller can
//! close it. Polls, wake-up arming and cancellations are submitted at once.
#![allow(unsafe_code)]

use std::future::Future;
use std::io;
use std::os::fd::RawFd;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use io_uring::{IoUring, opcode, squeue, types};

use super::buf::AlignedBuf;

/// `user_data` of completions nobody awaits (cancellations).
const IGNORED: u64 = u64::MAX;
/// `user_data` of the poll on the runtime's wake-up eventfd.
pub(crate) const WAKE_POLL: u64 = u64::MAX - 1;

/// What an operation owns while the kernel may touch it.
#[derive(Debug, Default)]
pub(crate) enum Keep {
    #[default]
    Nothing,
    Aligned(AlignedBuf),
    Bytes(Vec<u8>),
}

#[derive(Debug)]
enum Slot {
    Free,
    /// Submitted; the awaiting task's waker, once it has polled.
    Waiting {
        waker: Option<Waker>,
        keep: Keep,
    },
    Done {
        res: i32,
        keep: Keep,
    },
    /// The future went away; the completion frees the slot.
    Abandoned {
        keep: Keep,
    },
}

/// One io_uring and its in-flight operations.
pub(crate) struct Ring {
    uring: IoUring,
    slots: Vec<Slot>,
    free: Vec<usize>,
    in_flight: usize,
    /// Set when the wake-up poll completed and must be armed again.
    wake_fired: bool,
    /// Completions copied out of the queue (reused: no allocation per reap).
    done: Vec<(u64, i32)>,
    /// `io_uring_enter` calls that submitted (tests count them).
    #[cfg(test)]
    pub(crate) submits: usize,
}

impl std::fmt::Debug for Ring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ring").field("in_flight", &self.in_flight).finish_non_exhaustive()
    }
}

impl Ring {
    pub(crate) fn new(entries: u32) -> io::Result<Ring> {
        // COOP_TASKRUN: completions are delivered at our next syscall instead of by
        // interrupting the thread (it makes plenty: sendmsg, recvmmsg); TASKRUN_FLAG tells
        // `submit` when it must enter the kernel to collect them.
        let uring = IoUring::builder()
            .setup_coop_taskrun()
            .setup_taskrun_flag()
            .build(entries)
            .or_else(|_| IoUring::new(entries))?;
        Ok(Ring::with(uring))
    }

    fn with(uring: IoUring) -> Ring {
        Ring {
            uring,
            slots: Vec::new(),
            free: Vec::new(),
            in_flight: 0,
            wake_fired: true,
            done: Vec::new(),
            #[cfg(test)]
            submits: 0,
        }
    }

    /// A ring whose completions are posted as they happen, without `COOP_TASKRUN`: for a
    /// ring that threads of another runtime submit to and that is awaited through an eventfd
    /// ([`crate::shared::SharedRing`]); a submitting thread asleep in that runtime's poll is
    /// then interrupted to post its completions instead of holding them until its next syscall.
    pub(crate) fn plain(entries: u32) -> io::Result<Ring> {
        Ok(Ring::with(IoUring::new(entries)?))
    }

    /// Has every completion signal `efd`.
    pub(crate) fn register_eventfd(&self, efd: RawFd) -> io::Result<()> {
        self.uring.submitter().register_eventfd(efd)
    }

    /// Operations submitted and not yet completed.
    #[cfg(test)]
    pub(crate) fn in_flight(&self) -> usize {
        self.in_flight
    }

    fn slot(&mut self, keep: Keep) -> usize {
        let s = Slot::Waiting { waker: None, keep };
        match self.free.pop() {
            Some(i) => {
                self.slots[i] = s;
                i
            }
            None => {
                self.slots.push(s);
                self.slots.len() - 1
            }
        }
    }

    /// Pushes `entry`; submits it now if `now`, else at the next [`Ring::flush`] (or sooner,
    /// when the submission queue is full).
    ///
    /// SAFETY (for callers): every pointer in `entry` must stay valid until the completion
    /// arrives: it must point into `keep` of the slot `entry` was tagged with, or into memory
    /// that lives as long as the ring. An fd in it must stay open until it is submitted.
    unsafe fn push(&mut self, entry: squeue::Entry, now: bool) -> io::Result<()> {
        loop {
            // SAFETY: forwarded from the caller's contract.
            let pushed = unsafe { self.uring.submission().push(&entry) };
            if pushed.is_ok() {
                break;
            }
            // The submission queue is full: hand it to the kernel, then retry.
            self.submit()?;
        }
        if now {
            self.submit()?;
        }
        Ok(())
    }

    fn submit(&mut self) -> io::Result<usize> {
        #[cfg(test)]
        {
            self.submits += 1;
        }
        self.uring.submit()
    }

    /// Submits every queued entry (the runtime calls this at the end of each turn).
    pub(crate) fn flush(&mut self) {
        if !self.uring.submission().is_empty()
            && let Err(e) = self.submit()
        {
            // They stay queued: the next flush or wait submits them.
            tracing::warn!(error = %e, "io_uring submit failed");
        }
    }

    fn start(&mut self, keep: Keep, now: bool, build: impl FnOnce(&mut Keep) -> squeue::Entry) -> Op {
        let id = self.slot(keep);
        let Slot::Waiting { keep, .. } = &mut self.slots[id] else { unreachable!("fresh slot") };
        let entry = build(keep).user_data(id as u64);
        // SAFETY: `build` made `entry` point only into `keep`, which the slot owns until the
        // completion frees it (see `complete`), or into nothing at all; file ops' fds belong
        // to `RingFile`s, which flush before closing them.
        match unsafe { self.push(entry, now) } {
            Ok(()) => {
                self.in_flight += 1;
                Op { id: Some(id) }
            }
            Err(e) => {
                self.slots[id] = Slot::Done { res: -e.raw_os_error().unwrap_or(libc::EIO), keep: Keep::Nothing };
                Op { id: Some(id) }
            }
        }
    }

    /// Reads up to `len` bytes at `pos` into `buf` from byte `at` on (cut to the buffer's end).
    pub(crate) fn read(&mut self, fd: RawFd, buf: AlignedBuf, at: usize, len: usize, pos: u64) -> Op {
        let at = at.min(buf.capacity());
        let len = len.min(buf.capacity() - at);
        self.start(Keep::Aligned(buf), false, |keep| {
            let Keep::Aligned(b) = keep else { unreachable!() };
            // SAFETY: `at` is at most the buffer's capacity, so the pointer stays inside its
            // allocation (or one past its end, with `len` 0).
            let to = unsafe { b.as_mut_ptr().add(at) };
            opcode::Read::new(types::Fd(fd), to, len as u32).offset(pos).build()
        })
    }

    /// Writes `len` bytes from the start of `buf` at `pos`.
    pub(crate) fn write(&mut self, fd: RawFd, buf: Keep, len: usize, pos: u64) -> Op {
        self.start(buf, false, |keep| {
            let ptr = match keep {
                Keep::Aligned(b) => b.as_mut_ptr().cast_const(),
                Keep::Bytes(v) => v.as_ptr(),
                Keep::Nothing => std::ptr::null(),
            };
            opcode::Write::new(types::Fd(fd), ptr, len as u32).offset(pos).build()
        })
    }

    pub(crate) fn fsync(&mut self, fd: RawFd, data_only: bool) -> Op {
        let flags = if data_only { types::FsyncFlags::DATASYNC } else { types::FsyncFlags::empty() };
        self.start(Keep::Nothing, false, |_| opcode::Fsync::new(types::Fd(fd)).flags(flags).build())
    }

    pub(crate) fn fallocate(&mut self, fd: RawFd, offset: u64, len: u64) -> Op {
        self.start(Keep::Nothing, false, |_| opcode::Fallocate::new(types::Fd(fd), len).offset(offset).build())
    }

    /// Completes when `fd` is readable (one shot).
    pub(crate) fn poll_readable(&mut self, fd: RawFd) -> Op {
        self.start(Keep::Nothing, true, |_| opcode::PollAdd::new(types::Fd(fd), libc::POLLIN as u32).build())
    }

    /// Reads like [`Ring::read`] and waits for it on this thread: submitted and waited for
    /// in one `io_uring_enter`, for a ring with no other operations in flight and no runtime
    /// around it ([`crate::fs::RingFile::read_into_waiting`]). On an error from the wait the
    /// read is cancelled and left to the ring (whose next use or drain frees its buffer).
    pub(crate) fn read_waiting(
        &mut self,
        fd: RawFd,
        buf: AlignedBuf,
        at: usize,
        len: usize,
        pos: u64,
    ) -> io::Result<(u32, AlignedBuf)> {
        let id = self.read(fd, buf, at, len, pos).id.take().expect("a fresh operation has its slot");
        let mut cx = Context::from_waker(Waker::noop());
        let mut wake = Vec::new();
        loop {
            if let Poll::Ready((res, keep)) = self.poll_op(id, &mut cx) {
                let Keep::Aligned(buf) = keep else { unreachable!("a read returns its buffer") };
                return if res < 0 { Err(io::Error::from_raw_os_error(-res)) } else { Ok((res as u32, buf)) };
            }
            if let Err(e) = self.wait(None) {
                self.drop_op(id);
                return Err(e);
            }
            self.reap(&mut wake);
            wake.clear();
        }
    }

    /// Arms the poll on the wake-up eventfd if its last one fired.
    pub(crate) fn arm_wake(&mut self, efd: RawFd) -> io::Result<()> {
        if !self.wake_fired {
            return Ok(());
        }
        let entry = opcode::PollAdd::new(types::Fd(efd), libc::POLLIN as u32).build().user_data(WAKE_POLL);
        // SAFETY: the entry holds no pointer; the eventfd lives as long as the runtime, which
        // drains the ring before closing it.
        unsafe { self.push(entry, true)? };
        self.wake_fired = false;
        Ok(())
    }

    fn cancel(&mut self, id: usize) {
        let entry = opcode::AsyncCancel::new(id as u64).build().user_data(IGNORED);
        // SAFETY: a cancellation holds no pointer.
        if let Err(e) = unsafe { self.push(entry, true) } {
            tracing::debug!(error = %e, "io_uring cancel not submitted");
        }
    }

    /// Collects completions without waiting; returns the wakers to wake and whether the
    /// wake-up poll fired.
    pub(crate) fn reap(&mut self, wake: &mut Vec<Waker>) -> bool {
        // With TASKRUN_FLAG set, completions may wait in the kernel until we enter it.
        if self.uring.submission().taskrun() {
            let _ = self.submit();
        }
        let mut woke = false;
        let mut done = std::mem::take(&mut self.done);
        done.extend(self.uring.completion().map(|c| (c.user_data(), c.result())));
        for (ud, res) in done.drain(..) {
            match ud {
                IGNORED => {}
                WAKE_POLL => {
                    self.wake_fired = true;
                    woke = true;
                }
                id => self.complete(id as usize, res, wake),
            }
        }
        self.done = done;
        woke
    }

    fn complete(&mut self, id: usize, res: i32, wake: &mut Vec<Waker>) {
        let Some(slot) = self.slots.get_mut(id) else { return };
        match std::mem::replace(slot, Slot::Free) {
            Slot::Waiting { waker, keep } => {
                *slot = Slot::Done { res, keep };
                wake.extend(waker);
            }
            Slot::Abandoned { keep } => {
                drop(keep);
                self.free.push(id);
            }
            other => {
                *slot = other;
                return;
            }
        }
        self.in_flight -= 1;
    }

    /// Submits pending entries and sleeps until a completion arrives or `timeout` passes.
    pub(crate) fn wait(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        let res = match timeout {
            Some(t) => {
                let ts = types::Timespec::from(t);
                let args = types::SubmitArgs::new().timespec(&ts);
                self.uring.submitter().submit_with_args(1, &args)
            }
            None => self.uring.submitter().submit_and_wait(1),
        };
        match res {
            Ok(_) => Ok(()),
            Err(e) if matches!(e.raw_os_error(), Some(libc::ETIME | libc::EINTR | libc::EBUSY)) => Ok(()),
            Err(e) => Err(e),
        }
    }

    pub(crate) fn poll_op(&mut self, id: usize, cx: &mut Context<'_>) -> Poll<(i32, Keep)> {
        match &mut self.slots[id] {
            Slot::Waiting { waker, .. } => {
                match waker {
                    Some(w) if w.will_wake(cx.waker()) => {}
                    _ => *waker = Some(cx.waker().clone()),
                }
                Poll::Pending
            }
            Slot::Done { .. } => {
                let Slot::Done { res, keep } = std::mem::replace(&mut self.slots[id], Slot::Free) else {
                    unreachable!()
                };
                self.free.push(id);
                Poll::Ready((res, keep))
            }
            Slot::Free | Slot::Abandoned { .. } => unreachable!("op polled after completion"),
        }
    }

    pub(crate) fn drop_op(&mut self, id: usize) {
        match std::mem::replace(&mut self.slots[id], Slot::Free) {
            Slot::Waiting { keep, .. } => {
                self.slots[id] = Slot::Abandoned { keep };
                self.cancel(id);
            }
            Slot::Done { .. } => self.free.push(id),
            other => self.slots[id] = other,
        }
    }

    /// Cancels everything in flight and waits for the completions, so no buffer is freed
    /// while the kernel may still write into it.
    pub(crate) fn drain(&mut self) {
        for id in 0..self.slots.len() {
            if matches!(self.slots[id], Slot::Waiting { .. } | Slot::Abandoned { .. }) {
                self.cancel(id);
            }
        }
        let mut wake = Vec::new();
        let mut rounds = 0;
        while self.in_flight > 0 && rounds < 1000 {
            let _ = self.wait(Some(Duration::from_millis(10)));
            self.reap(&mut wake);
            rounds += 1;
        }
        if self.in_flight > 0 {
            // Leak what the kernel may still touch rather than free it under the kernel.
            tracing::error!(in_flight = self.in_flight, "io_uring operations outlived the runtime");
            for s in self.slots.drain(..) {
                std::mem::forget(s);
            }
        }
        drop(wake);
    }
}

/// A submitted operation; resolves to the raw result (`-errno` on failure) and what it owned.
#[derive(Debug)]
#[must_use = "an operation does nothing useful unless awaited"]
pub(crate) struct Op {
    id: Option<usize>,
}

impl Op {
    /// The operation's slot, for a caller that polls and drops it on the ring itself (not the
    /// thread's runtime's).
    pub(crate) fn into_id(mut self) -> usize {
        self.id.take().expect("a fresh operation has its slot")
    }
}

impl Future for Op {
    type Output = (io::Result<u32>, Keep);

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let id = self.id.expect("op polled after completion");
        let out = super::with_ring(|r| r.poll_op(id, cx));
        match out {
            Poll::Ready((res, keep)) => {
                self.id = None;
                let res = if res < 0 { Err(io::Error::from_raw_os_error(-res)) } else { Ok(res as u32) };
                Poll::Ready((res, keep))
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

impl Drop for Op {
    fn drop(&mut self) {
        if let Some(id) = self.id.take() {
            // During thread teardown the ring may be gone; it drained itself then.
            let _ = super::try_with_ring(|r| r.drop_op(id));
        }
    }
}
