//! The internal tokio runtime that serves the blocking C and JNI calls.
//!
//! One per process, built on first use and never dropped (a library cannot
//! know when its host is done). A call runs its future on the caller's own
//! thread with `block_on`, so a read costs no thread hand-off; the runtime's
//! worker threads drive the QUIC endpoints and timers meanwhile.

use crate::error::{Error, Result};
use std::future::Future;
use std::sync::OnceLock;
use tokio::runtime::{Builder, Runtime};

/// Worker threads of the runtime: enough to drive the connections, few
/// enough not to compete with the engine that links us.
const MAX_WORKERS: usize = 4;

static RUNTIME: OnceLock<std::result::Result<Runtime, String>> = OnceLock::new();

fn build() -> std::result::Result<Runtime, String> {
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get()).clamp(1, MAX_WORKERS);
    Builder::new_multi_thread()
        .worker_threads(workers)
        .thread_name("cv-capi")
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the cv runtime: {e}"))
}

/// Runs `fut` to completion on the calling thread.
pub fn block_on<F: Future>(fut: F) -> Result<F::Output> {
    // Blocking inside a runtime thread would stall or panic that runtime.
    if tokio::runtime::Handle::try_current().is_ok() {
        return Err(Error::new(
            cv_client::ErrorKind::InvalidArgument,
            "blocking cv call made from inside a tokio runtime; use the cv-client crate there",
        ));
    }
    match RUNTIME.get_or_init(build) {
        Ok(rt) => Ok(rt.block_on(fut)),
        Err(msg) => Err(Error::new(cv_client::ErrorKind::Other, msg.clone())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    #[test]
    fn runs_futures_and_refuses_nested_use() {
        assert_eq!(block_on(async { 7 }).unwrap(), 7);
        let nested = block_on(async { block_on(async { 1 }).unwrap_err().kind() }).unwrap();
        assert_eq!(nested, ErrorKind::Client(cv_client::ErrorKind::InvalidArgument));
    }
}
