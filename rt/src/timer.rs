//! Timers: deadlines in a sorted map; the runtime sleeps in io_uring until the earliest.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use super::with_timers;

/// Pending deadlines of one runtime, each with the waker of the task waiting on it.
#[derive(Debug, Default)]
pub(crate) struct Timers {
    map: BTreeMap<(Instant, u64), Waker>,
    next_id: u64,
}

impl Timers {
    fn insert(&mut self, at: Instant, waker: Waker) -> (Instant, u64) {
        self.next_id += 1;
        let key = (at, self.next_id);
        self.map.insert(key, waker);
        key
    }

    /// The earliest deadline.
    pub(crate) fn next(&self) -> Option<Instant> {
        self.map.first_key_value().map(|((t, _), _)| *t)
    }

    /// Moves the wakers of every deadline at or before `now` into `out`.
    pub(crate) fn fire(&mut self, now: Instant, out: &mut Vec<Waker>) {
        while let Some(entry) = self.map.first_entry() {
            if entry.key().0 > now {
                break;
            }
            out.push(entry.remove());
        }
    }

    /// Drops every waiting waker (at runtime teardown).
    pub(crate) fn clear(&mut self) -> Vec<Waker> {
        std::mem::take(&mut self.map).into_values().collect()
    }
}

/// Completes at a deadline.
#[derive(Debug)]
#[must_use = "a sleep does nothing unless awaited"]
pub struct Sleep {
    deadline: Instant,
    key: Option<(Instant, u64)>,
}

impl Sleep {
    pub fn until(deadline: Instant) -> Sleep {
        Sleep { deadline, key: None }
    }

    pub fn new(d: Duration) -> Sleep {
        Sleep::until(Instant::now() + d)
    }
}

impl Future for Sleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if Instant::now() >= self.deadline {
            if let Some(key) = self.key.take() {
                with_timers(|t| t.map.remove(&key));
            }
            return Poll::Ready(());
        }
        let deadline = self.deadline;
        let key = self.key;
        self.key = Some(with_timers(|t| match key.and_then(|k| t.map.get_mut(&k).map(|w| (k, w))) {
            Some((k, w)) => {
                if !w.will_wake(cx.waker()) {
                    *w = cx.waker().clone();
                }
                k
            }
            // Not registered yet, or fired and removed while we were not looking.
            None => t.insert(deadline, cx.waker().clone()),
        }));
        Poll::Pending
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        if let Some(key) = self.key.take() {
            let _ = super::try_with_timers(|t| t.map.remove(&key));
        }
    }
}

/// The error of [`timeout`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("deadline elapsed")]
pub struct Elapsed;

/// Runs `fut` for at most `d`.
pub async fn timeout<F: Future>(d: Duration, fut: F) -> Result<F::Output, Elapsed> {
    let mut fut = std::pin::pin!(fut);
    let mut sleep = std::pin::pin!(Sleep::new(d));
    std::future::poll_fn(|cx| {
        if let Poll::Ready(v) = fut.as_mut().poll(cx) {
            return Poll::Ready(Ok(v));
        }
        sleep.as_mut().poll(cx).map(|()| Err(Elapsed))
    })
    .await
}
