//! Waiting until the workers have heard what the master just decided. Blocks a `free` or a
//! delete dropped travel to each worker in a heartbeat reply, and the worker hands them to its
//! shards without waiting; so "every live worker has sent `n` heartbeats since" (plus a grace
//! for the shards) is when those blocks are gone. `cvctl free --wait` and the cold-read
//! benches wait this way.

use crate::client::Client;
use crate::error::{Error, ErrorKind, Result};
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// How often the master's report is read.
const POLL: Duration = Duration::from_millis(20);
/// The shards' time to apply what a heartbeat reply carried.
const APPLY_GRACE: Duration = Duration::from_millis(250);
/// Longer than this, something is wrong with the workers, not slow.
const GIVE_UP: Duration = Duration::from_secs(60);

/// Waits until every live worker has sent `n` heartbeats after now, then a grace for its
/// shards to apply the commands; returns how long that took.
pub async fn wait_for_heartbeats(client: &Client, n: u32) -> Result<Duration> {
    let start = Instant::now();
    let mut last: HashMap<u64, Instant> = HashMap::new();
    let mut seen: HashMap<u64, u32> = HashMap::new();
    loop {
        tokio::time::sleep(POLL).await;
        let report = client.report().await?;
        let now = Instant::now();
        let (mut live, mut done) = (0, 0);
        for w in report.workers.iter().filter(|w| w.live) {
            live += 1;
            let Some(at) = now.checked_sub(Duration::from_millis(w.last_heartbeat_age_ms)) else { continue };
            // The age is whole ms, so one heartbeat read twice gives instants a few ms apart,
            // and one sent just before `start` must not count.
            let new = at > start + Duration::from_millis(5)
                && last.get(&w.worker_id).is_none_or(|l| at > *l + Duration::from_millis(50));
            if new {
                last.insert(w.worker_id, at);
                *seen.entry(w.worker_id).or_default() += 1;
            }
            if seen.get(&w.worker_id).copied().unwrap_or(0) >= n {
                done += 1;
            }
        }
        if live > 0 && done == live {
            tokio::time::sleep(APPLY_GRACE).await;
            return Ok(start.elapsed());
        }
        if start.elapsed() > GIVE_UP {
            let msg = format!(
                "{done} of {live} live workers sent {n} heartbeats within {}s (the master's report)",
                GIVE_UP.as_secs()
            );
            return Err(Error::new(ErrorKind::Timeout, msg));
        }
    }
}
