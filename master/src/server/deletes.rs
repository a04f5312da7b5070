//! Queued object deletes. A delete or rename through cv journals, in the same step, which
//! objects must leave their stores (`pending_object_deletes`); this drains that queue and
//! journals each delete done. A crash in between only means the delete is made again, and
//! a listing never brings a queued object back (see `ufs.rs`).
//!
//! `UfsLayer::objects` orders this against uploads and renames: an object that becomes a
//! file's again (an export or a rename to a queued key) is taken off the queue while the
//! lock is held, and the drain looks at the queue again under the lock before it deletes,
//! so it can never delete such an object.

use super::ufs::UfsLayer;
use cv_master_core::MasterCore;
use cv_master_core::core::DeleteBatch;
use std::time::Duration;

/// How long a request that queued deletes waits for them before it answers; the rest is
/// left to the exporter's loop (the queue is durable, so nothing is lost by not waiting).
const INLINE_WAIT: Duration = Duration::from_secs(2);

/// Keys deleted under one hold of `UfsLayer::objects`, then recorded in one journal record.
const BATCH: usize = 64;

/// Runs `drain` (for a request that just queued deletes) for at most [`INLINE_WAIT`].
pub(super) async fn soon(drain: impl Future<Output = bool>) {
    if tokio::time::timeout(INLINE_WAIT, drain).await.is_err() {
        tracing::info!("object deletes queued; the store is slow, they finish in the background");
    }
}

/// Drains the queue, taking `ufs.objects` per batch of keys so that uploads and renames are
/// not held up for long; whether it is empty now. A mount whose store fails is left for the
/// next round after its first failure.
pub(super) async fn drain(core: &MasterCore, ufs: &UfsLayer) -> bool {
    drain_batches(core, ufs, false).await
}

/// [`drain`], with `ufs.objects` held by the caller throughout.
pub(super) async fn drain_held(core: &MasterCore, ufs: &UfsLayer) -> bool {
    drain_batches(core, ufs, true).await
}

async fn drain_batches(core: &MasterCore, ufs: &UfsLayer, held: bool) -> bool {
    let mut all = true;
    for queued in core.delete_batches() {
        for batch in queued.keys.chunks(BATCH) {
            let _held = if held { None } else { Some(ufs.objects.lock().await) };
            // Taken off the queue meanwhile (the key is a file's object again): not ours to
            // delete. Unmounted: the state dropped its queue.
            let Some(now) = core.still_queued(&queued.mount.path, batch) else { break };
            if !delete_batch(core, ufs, now).await {
                all = false;
                break;
            }
        }
    }
    all
}

/// Deletes the batch's keys from its mount's store and records the ones deleted; stops at the
/// first failure. Whether all went.
async fn delete_batch(core: &MasterCore, ufs: &UfsLayer, batch: DeleteBatch) -> bool {
    let DeleteBatch { mount: m, keys } = batch;
    if keys.is_empty() {
        return true;
    }
    let mount = m.path.as_str();
    let store = match ufs.store(&m) {
        Ok(s) => s,
        Err(f) => {
            tracing::warn!(mount, "store unavailable for queued deletes: {}", f.message);
            return false;
        }
    };
    let mut done = Vec::with_capacity(keys.len());
    let mut all = true;
    for key in keys {
        match store.delete(&key).await {
            Ok(()) => done.push(key),
            Err(e) => {
                tracing::warn!(mount, key, error = %e, "object not deleted yet, will retry");
                all = false;
                break;
            }
        }
    }
    if done.is_empty() {
        return all;
    }
    let recorded = match core.begin_objects_deleted(mount, done) {
        Ok(p) => p.wait_async().await,
        Err(e) => Err(e),
    };
    if let Err(e) = recorded {
        tracing::warn!(mount, error = %e, "object deletes done but not recorded; they will be made again");
        return false;
    }
    all
}
