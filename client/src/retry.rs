//! Deadlines and bounded retries, applied to every call.

use crate::config::ClientSettings;
use crate::error::{Error, Result};
use std::future::Future;
use std::time::Duration;
use tokio::time::{Instant, sleep, timeout_at};

/// The retry policy of one call: a deadline over all attempts, a bounded number of retries
/// of retryable errors, and a doubling pause between them. Used by [`with_retries`], and
/// directly by callers whose attempts borrow something mutably (a caller's buffer), which a
/// closure returning a future cannot lend.
pub(crate) struct Attempts<'a> {
    what: &'a str,
    limit: Duration,
    deadline: Instant,
    backoff: Duration,
    tries: u32,
    retries: u32,
}

impl<'a> Attempts<'a> {
    pub(crate) fn new(settings: &ClientSettings, what: &'a str) -> Self {
        Self::until(settings, what, Instant::now() + settings.deadline.get())
    }

    /// The policy of one part of a call whose deadline is `deadline` (a read that fails over
    /// from owner to owner spends one deadline on all of them).
    pub(crate) fn until(settings: &ClientSettings, what: &'a str, deadline: Instant) -> Self {
        Attempts {
            what,
            limit: settings.deadline.get(),
            deadline,
            backoff: settings.backoff.get(),
            tries: 0,
            retries: settings.retries,
        }
    }

    /// When the call's deadline is.
    pub(crate) fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Whether the call's deadline has passed.
    pub(crate) fn expired(&self) -> bool {
        Instant::now() >= self.deadline
    }

    /// Runs one attempt under the call's deadline.
    pub(crate) async fn run<T>(&self, attempt: impl Future<Output = Result<T>>) -> Result<T> {
        match timeout_at(self.deadline, attempt).await {
            Ok(r) => r,
            Err(_) => Err(Error::timeout(self.what, self.limit)),
        }
    }

    /// After a failed attempt: `Ok(())` once the pause before the next attempt is over, or
    /// the error back if it is final (not retryable, out of retries, or the next attempt
    /// could not start before the deadline).
    pub(crate) async fn retry(&mut self, e: Error) -> Result<()> {
        if !(e.retryable() && self.tries < self.retries && Instant::now() + self.backoff < self.deadline) {
            return Err(e);
        }
        tracing::debug!(what = self.what, error = %e, tries = self.tries, "retrying");
        self.tries += 1;
        sleep(self.backoff).await;
        self.backoff = self.backoff.saturating_mul(2);
        Ok(())
    }
}

/// Runs `attempt` until it succeeds, fails with a non-retryable error, runs
/// out of retries, or the deadline passes.
pub(crate) async fn with_retries<T, F, Fut>(settings: &ClientSettings, what: &str, mut attempt: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T>>,
{
    let mut attempts = Attempts::new(settings, what);
    loop {
        match attempts.run(attempt()).await {
            Ok(v) => return Ok(v),
            Err(e) => attempts.retry(e).await?,
        }
    }
}
