//! Wakes a shard's executor from outside, every [`PERIOD`], for as long as the shard runs.
//!
//! Why: on these kernels a glommio executor sometimes sleeps in `io_uring_enter` past the
//! completion it waits for (seen while shards open their stores at the same moment: every
//! completion consumed, io-wq idle, a glommio timer does not wake it, an interrupted syscall
//! does). A message from another thread wakes the executor through its eventfd, and it finds
//! the completion. The cost is one wake-up per period when the shard is idle.

use std::time::Duration;

/// How long a lost wake-up can stall a shard at most.
pub(crate) const PERIOD: Duration = Duration::from_millis(50);

/// Starts the kicker thread and, on the current executor, the task that receives its kicks.
/// Both end with the executor.
pub(crate) fn start(name: &str) {
    let (tx, rx) = flume::bounded::<()>(1);
    let spawned = std::thread::Builder::new().name(format!("{name}-kick")).spawn(move || {
        loop {
            std::thread::sleep(PERIOD);
            if let Err(flume::TrySendError::Disconnected(())) = tx.try_send(()) {
                return;
            }
        }
    });
    if let Err(e) = spawned {
        tracing::warn!(error = %e, "no kicker thread for {name}");
        return;
    }
    glommio::spawn_local(async move { while rx.recv_async().await.is_ok() {} }).detach();
}
