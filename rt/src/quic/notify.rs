//! Single-threaded wake-up primitives (nothing here is `Send`).

use std::cell::{Cell, RefCell};
use std::task::{Context, Poll, Waker};

/// A sticky flag with one waiter: `notify` before `poll_wait` is not lost.
#[derive(Debug, Default)]
pub(crate) struct Notify {
    set: Cell<bool>,
    waker: RefCell<Option<Waker>>,
}

impl Notify {
    pub(crate) fn notify(&self) {
        self.set.set(true);
        // Take the waker first: waking must not happen while the RefCell is borrowed.
        let waker = self.waker.borrow_mut().take();
        if let Some(w) = waker {
            w.wake();
        }
    }

    /// Ready once the flag is set; clears it.
    pub(crate) fn poll_wait(&self, cx: &mut Context<'_>) -> Poll<()> {
        if self.set.replace(false) {
            return Poll::Ready(());
        }
        *self.waker.borrow_mut() = Some(cx.waker().clone());
        Poll::Pending
    }

    pub(crate) async fn wait(&self) {
        std::future::poll_fn(|cx| self.poll_wait(cx)).await
    }
}

/// Tasks waiting for the same condition; all are woken, each re-checks.
#[derive(Debug, Default)]
pub(crate) struct WakerList(Vec<Waker>);

impl WakerList {
    pub(crate) fn register(&mut self, waker: &Waker) {
        if !self.0.iter().any(|w| w.will_wake(waker)) {
            self.0.push(waker.clone());
        }
    }

    /// Moves the wakers into `out`, to be woken once no borrow is held.
    pub(crate) fn drain_into(&mut self, out: &mut Vec<Waker>) {
        out.append(&mut self.0);
    }
}
