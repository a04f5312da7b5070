//! Block deletes, sent at once. A deleted or replaced file's blocks reach their workers in the
//! next heartbeat reply (`pending_deletes`, journaled: the durable path, which also covers a
//! worker that is down now). Until then the space stays taken, and placement, which judges
//! by the space workers report, refuses puts for want of it. So after a request that may have
//! queued deletes, they are also sent to the workers' shards now; a worker reports the space
//! freed in an early heartbeat (it asks for one after a delete), which also drains the queue.
//! Deleting a block twice is harmless.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use cv_master_core::MasterCore;
use cv_wire::msg::{DeleteBlocks, Done};

use super::export::Exporter;

/// How long one shard gets to answer before it is left to the heartbeat path.
const CALL: Duration = Duration::from_secs(1);

/// Wakes the sender after a request that may have queued deletes.
#[derive(Debug, Default)]
pub(super) struct DeletesNow {
    wake: tokio::sync::Notify,
}

impl DeletesNow {
    pub(super) fn kick(&self) {
        self.wake.notify_one();
    }

    /// Sends the queued deletes each time it is kicked, until `stopped`.
    pub(super) async fn run(
        self: Arc<Self>,
        core: Arc<MasterCore>,
        exporter: Arc<Exporter>,
        mut stopped: tokio::sync::watch::Receiver<bool>,
    ) {
        loop {
            tokio::select! {
                _ = self.wake.notified() => {}
                _ = stopped.changed() => return,
            }
            if !core.is_leading() {
                continue;
            }
            // `(shard address, blocks)` of every queued delete of a live worker.
            let by_shard = core.inspect(|st| {
                let mut by_shard: BTreeMap<std::net::SocketAddr, Vec<u64>> = BTreeMap::new();
                for (w, blocks) in &st.data().pending_deletes {
                    let Some(info) = st.data().workers.get(w).filter(|i| i.live) else { continue };
                    for &b in blocks {
                        if let Some(addr) = info.shard_addr(cv_wire::block_shard(b)) {
                            by_shard.entry(addr).or_default().push(b);
                        }
                    }
                }
                by_shard
            });
            for (addr, block_ids) in by_shard {
                let n = block_ids.len();
                let sent = async {
                    let conn = exporter.conn(addr).await.map_err(|f| f.message)?;
                    let f = conn.call(&DeleteBlocks { block_ids }, &[]).await.map_err(|e| e.to_string())?;
                    f.access::<Done>().map(drop).map_err(|e| e.to_string())
                };
                match tokio::time::timeout(CALL, sent).await {
                    Ok(Ok(())) => tracing::debug!(%addr, blocks = n, "block deletes sent"),
                    Ok(Err(e)) => tracing::debug!(%addr, blocks = n, error = %e, "block deletes left to the heartbeat"),
                    Err(_) => tracing::debug!(%addr, blocks = n, "block deletes left to the heartbeat: no answer"),
                }
            }
        }
    }
}
