//! Deadlines and bounded retries, applied to every call.

use crate::config::ClientSettings;
use crate::error::{Error, Result};
use std::future::Future;
use tokio::time::{Instant, sleep, timeout_at};

/// Runs `attempt` until it succeeds, fails with a non-retryable error, runs
/// out of retries, or the deadline passes.
pub(crate) async fn with_retries<T, F, Fut>(settings: &ClientSettings, what: &str, mut attempt: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T>>,
{
    let deadline = Instant::now() + settings.deadline.get();
    let mut backoff = settings.backoff.get();
    let mut tries = 0u32;
    loop {
        let res = match timeout_at(deadline, attempt()).await {
            Ok(r) => r,
            Err(_) => return Err(Error::timeout(what, settings.deadline.get())),
        };
        match res {
            Ok(v) => return Ok(v),
            Err(e) if e.retryable() && tries < settings.retries && Instant::now() + backoff < deadline => {
                tracing::debug!(what, error = %e, tries, "retrying");
                tries += 1;
                sleep(backoff).await;
                backoff = backoff.saturating_mul(2);
            }
            Err(e) => return Err(e),
        }
    }
}
