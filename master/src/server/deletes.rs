//! Queued object deletes. A delete or rename through cv journals, in the same step, which
//! objects must leave their stores (`pending_object_deletes`); this drains that queue and
//! journals each delete done. A crash in between only means the delete is made again, and
//! a listing never brings a queued object back (see `ufs.rs`).
//!
//! `UfsLayer::objects` orders this against uploads and renames: an object that becomes a
//! file's again (an export or a rename to a queued key) is taken off the queue while the
//! lock is held, so the drain can never delete it.

use super::ufs::UfsLayer;
use crate::MasterCore;

/// Drains the queue; whether it is empty now.
pub(super) async fn drain(core: &MasterCore, ufs: &UfsLayer) -> bool {
    let _held = ufs.objects.lock().await;
    drain_held(core, ufs).await
}

/// [`drain`], with `ufs.objects` already held by the caller.
pub(super) async fn drain_held(core: &MasterCore, ufs: &UfsLayer) -> bool {
    let mut all = true;
    for (mount, keys) in core.inspect(|st| st.queued_object_deletes()) {
        let Some(m) = core.inspect(|st| st.mounts().into_iter().find(|m| m.path == mount)) else { continue };
        let store = match ufs.store(&m) {
            Ok(s) => s,
            Err(f) => {
                tracing::warn!(mount, "store unavailable for queued deletes: {}", f.message);
                all = false;
                continue;
            }
        };
        let mut done = Vec::with_capacity(keys.len());
        for key in keys {
            match store.delete(&key).await {
                Ok(()) => done.push(key),
                Err(e) => {
                    tracing::warn!(mount, key, error = %e, "object not deleted yet, will retry");
                    all = false;
                }
            }
        }
        if done.is_empty() {
            continue;
        }
        let recorded = match core.begin_objects_deleted(&mount, done) {
            Ok(p) => p.wait_async().await,
            Err(e) => Err(e),
        };
        if let Err(e) = recorded {
            tracing::warn!(mount, error = %e, "object deletes done but not recorded; they will be made again");
            all = false;
        }
    }
    all
}
