//! The master's block-capability keys on a worker: handed to the control thread (at
//! registration, in heartbeat replies), read by every shard for every block request
//! (`shard/handler.rs`). A read lock per request costs an uncontended atomic; keys change a few
//! times a day.

use cv_net::capability::{KeyRing, now_ms};
use cv_wire::msg::CapKeys;
use std::sync::{Arc, RwLock, RwLockReadGuard};

/// The keys, shared by the control thread and the shards.
pub type Keys = Arc<RwLock<KeyRing>>;

/// Adds the master's set (see [`KeyRing::merge`]).
pub fn merge_keys(keys: &Keys, set: &CapKeys) {
    keys.write().unwrap_or_else(|p| p.into_inner()).merge(set, now_ms());
}

pub(crate) fn lock_keys(keys: &Keys) -> RwLockReadGuard<'_, KeyRing> {
    keys.read().unwrap_or_else(|p| p.into_inner())
}
