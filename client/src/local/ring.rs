//! Short-circuit reads from tokio tasks through a [`SharedRing`]: the task submits the read
//! itself, and the ring's completions wake it through the runtime's own reactor (the ring's
//! eventfd, watched by a reaper task). The client's io thread is left to callers that finish
//! a read on it ([`super::LocalRead::start`]). Through the io thread a task's read cost two
//! cross-thread wake-ups, to the io thread and back: at depth 1 on the VMs measured, a p50
//! of ~130 µs where the device took ~55 µs.
//!
//! The one `unsafe` here registers the ring's eventfd with the reactor, which needs the fd to
//! stay open while registered: the reaper owns both, and drops the registration first.
#![allow(unsafe_code)]

use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwapOption;
use cv_rt::shared::SharedRing;
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

/// Submission entries of the ring; more reads at once wait for room.
const ENTRIES: u32 = 256;

/// The ring for the current runtime's tasks, made at first use.
#[derive(Debug, Default)]
pub(crate) struct TaskRing {
    /// Looked at by every task's read: without a lock. Replaced under `making`.
    current: ArcSwapOption<Live>,
    making: Mutex<()>,
    /// Set once the ring could not be made: the io thread serves from then on.
    failed: AtomicBool,
}

#[derive(Debug)]
struct Live {
    ring: Arc<SharedRing>,
    /// False once its reaper has stopped (its runtime shut down).
    reaped: Arc<AtomicBool>,
}

impl TaskRing {
    /// The ring to read through from the current tokio runtime: made, with its reaper task,
    /// at first use, and again if the runtime whose task reaped it has stopped. `None`
    /// outside a runtime, or where io_uring cannot be had.
    pub(crate) fn get(&self) -> Option<Arc<SharedRing>> {
        if self.failed.load(Ordering::Relaxed) {
            return None;
        }
        let rt = tokio::runtime::Handle::try_current().ok()?;
        if let Some(live) = self.current.load().as_ref()
            && live.reaped.load(Ordering::Acquire)
        {
            return Some(live.ring.clone());
        }
        let _making = self.making.lock().expect("task ring lock");
        if let Some(live) = self.current.load().as_ref()
            && live.reaped.load(Ordering::Acquire)
        {
            return Some(live.ring.clone());
        }
        let made = SharedRing::new(ENTRIES).and_then(|ring| {
            let ring = Arc::new(ring);
            // SAFETY: the eventfd belongs to `ring`, which the reaper holding this registration
            // keeps alive, and it drops the registration before the ring (field order); nothing
            // closes or replaces the fd in between.
            let fd = unsafe { AsyncFd::register_with_interest(Efd(ring.eventfd()), Interest::READABLE) }
                .map_err(|e| e.into_parts().1)?;
            Ok((ring, fd))
        });
        let (ring, fd) = match made {
            Ok(m) => m,
            Err(e) => {
                tracing::warn!(error = %e, "no io_uring for short-circuit reads on the runtime: the io thread reads");
                self.failed.store(true, Ordering::Relaxed);
                return None;
            }
        };
        let reaped = Arc::new(AtomicBool::new(true));
        rt.spawn(Reaper { fd, ring: ring.clone(), reaped: reaped.clone() }.run());
        self.current.store(Some(Arc::new(Live { ring: ring.clone(), reaped })));
        Some(ring)
    }
}

/// The ring's eventfd (owned by the ring).
struct Efd(RawFd);

impl AsRawFd for Efd {
    fn as_raw_fd(&self) -> RawFd {
        self.0
    }
}

/// Wakes the reads whose completions the eventfd signals. Field order: the eventfd leaves the
/// reactor before the ring that owns it can be dropped.
struct Reaper {
    fd: AsyncFd<Efd>,
    ring: Arc<SharedRing>,
    reaped: Arc<AtomicBool>,
}

impl Reaper {
    async fn run(self) {
        loop {
            match self.fd.readable().await {
                Ok(mut ready) => {
                    self.ring.reap();
                    // Only clears what this wake-up saw: a completion signalled since wakes again.
                    ready.clear_ready();
                }
                Err(e) => {
                    tracing::warn!(error = %e, "short-circuit ring: the eventfd failed");
                    return;
                }
            }
        }
    }
}

impl Drop for Reaper {
    fn drop(&mut self) {
        self.reaped.store(false, Ordering::Release);
    }
}
