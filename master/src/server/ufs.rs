//! Cache-mode mounts: the store I/O the core asks for. The core decides (`cv-master-core`'s
//! `core/cache.rs`) whether a request under a cache-mode mount is answered from what cv holds
//! or must check the store first, and what the store's answer comes to; this layer does the
//! store calls it names and gives the answers back:
//! - open: the object is stated (HEAD) and its tail read (one ranged GET, a second for a larger
//!   footer), then recorded as a complete file whose blocks the shards fetch on first read;
//! - list, stat: the directory is listed (one LIST) and every child recorded.
//!
//! Concurrent requests for the same path wait for one call to the store. A check the core
//! allows to fail open is bounded by `cv.revalidate_timeout`: past it, or if the store fails,
//! what cv holds is served and the check goes on in the background.

use super::errors::Fail;
use cv_master_core::MasterCore;
use cv_master_core::core::{ListCheck, Listed, ObjectHead, Refresh, Stated, StoreCheck, TailRead};
use cv_master_core::path::CvPath;
use cv_master_core::state::{CachePolicy, MountEntry};
use cv_ufs::{ObjectMeta, Ufs, UfsErrorKind, UfsSettings};
use cv_wire::ErrorCode;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Debug, Default)]
pub(super) struct UfsLayer {
    settings: UfsSettings,
    /// One operator per mount point, rebuilt when the mount's URL or options change.
    stores: Mutex<HashMap<String, (MountEntry, Ufs)>>,
    /// One call to the store per path at a time.
    flights: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// Held while objects appear in or leave a store for cv's files: an upload's close and
    /// record, a rename under a mount, the drain of queued deletes (`deletes.rs`).
    pub(super) objects: tokio::sync::Mutex<()>,
    /// Requests to every mount's store, for `/metrics`.
    pub(super) stats: Arc<cv_ufs::UfsStats>,
    /// Opens and listings answered from what cv held because the store failed or did not
    /// answer in time to revalidate it.
    pub(super) stale_served: AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn head_of(m: &ObjectMeta) -> ObjectHead {
    ObjectHead { len: m.len, version: m.version.clone(), mtime_ms: m.mtime_ms }
}

fn meta_of(h: &ObjectHead) -> ObjectMeta {
    ObjectMeta { len: h.len, version: h.version.clone(), mtime_ms: h.mtime_ms }
}

/// The store layer's rule for whether two heads are one version, for the core's decisions.
fn same_version(a: &ObjectHead, b: &ObjectHead) -> bool {
    meta_of(a).same_version(&meta_of(b))
}

impl UfsLayer {
    /// A store for the mount, connected once.
    pub(super) fn store(&self, m: &MountEntry) -> Result<Ufs, Fail> {
        let mut stores = lock(&self.stores);
        if let Some((known, ufs)) = stores.get(&m.path)
            && known == m
        {
            return Ok(ufs.clone());
        }
        let ufs = Ufs::connect(&m.ufs_url, &m.options, &self.settings)?.with_stats(self.stats.clone());
        stores.insert(m.path.clone(), (m.clone(), ufs.clone()));
        Ok(ufs)
    }

    /// Checks a new mount before it is recorded: its options parse, its URL parses and its
    /// root lists.
    pub(super) async fn validate(&self, m: &MountEntry) -> Result<(), Fail> {
        CachePolicy::of(m)?;
        let ufs = Ufs::connect(&m.ufs_url, &m.options, &self.settings)?.with_stats(self.stats.clone());
        ufs.check().await.map_err(Fail::from)
    }

    async fn flight(&self, path: &str) -> tokio::sync::OwnedMutexGuard<()> {
        let m = lock(&self.flights).entry(path.to_owned()).or_default().clone();
        m.lock_owned().await
    }

    fn done_flight(&self, path: &str) {
        let mut f = lock(&self.flights);
        if f.get(path).is_some_and(|m| Arc::strong_count(m) == 1) {
            f.remove(path);
        }
    }

    /// The check of a file the core asked for before an open. One the core lets fail open is
    /// bounded (see [`UfsLayer::bounded`]): a hung store never makes a cached file
    /// unreadable. Otherwise the open waits for the store, and fails within its deadline
    /// naming it.
    pub(super) async fn check_file(self: &Arc<Self>, core: &Arc<MasterCore>, check: StoreCheck) -> Result<(), Fail> {
        let (me, c, path, fail_open) = (self.clone(), core.clone(), check.path.clone(), check.fail_open);
        let refresh = async move {
            let guard = me.flight(check.path.as_str()).await;
            let r = me.refresh_file(&c, &check).await;
            drop(guard);
            me.done_flight(check.path.as_str());
            r
        };
        match fail_open {
            None => refresh.await,
            Some(within) => self.bounded(&path, within, refresh).await,
        }
    }

    /// Runs `refresh`, a revalidation of what cv holds of `path`, for at most `within`; past
    /// it, or if the store failed, what cv holds is served and the revalidation goes on in the
    /// background. One under way already is not started again.
    async fn bounded(
        &self,
        path: &CvPath,
        within: Duration,
        refresh: impl std::future::Future<Output = Result<(), Fail>> + Send + 'static,
    ) -> Result<(), Fail> {
        if lock(&self.flights).contains_key(path.as_str()) {
            self.stale_served.fetch_add(1, Ordering::Relaxed);
            return Ok(());
        }
        match tokio::time::timeout(within, tokio::spawn(refresh)).await {
            Ok(Ok(Ok(()))) => Ok(()),
            // Gone from the store: gone.
            Ok(Ok(Err(f))) if f.code == ErrorCode::NotFound => Err(f),
            Ok(Ok(Err(f))) => {
                self.stale_served.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(%path, error = %f.message, "the store failed to revalidate; serving the copy cv holds");
                Ok(())
            }
            Ok(Err(e)) => Err(Fail::new(ErrorCode::Internal, format!("revalidating {path}: {e}"))),
            Err(_) => {
                self.stale_served.fetch_add(1, Ordering::Relaxed);
                tracing::info!(%path, ?within, "the store did not answer in time; serving the copy cv holds");
                Ok(())
            }
        }
    }

    /// The store calls the core asks for to check a file, each answer given back to it.
    async fn refresh_file(&self, core: &MasterCore, check: &StoreCheck) -> Result<(), Fail> {
        let ufs = self.store(&check.mount)?;
        let read = match core.refresh_plan(check)? {
            Refresh::Done => return Ok(()),
            Refresh::Tail(read) => read,
            Refresh::Head => {
                let (head, missing) = match ufs.stat(&check.key).await {
                    Ok(meta) => (Some(head_of(&meta)), None),
                    Err(e) if e.kind() == UfsErrorKind::NotFound => (None, Some(e)),
                    Err(e) => return Err(e.into()),
                };
                match core.object_stated(check, head, &same_version)? {
                    Stated::Fresh => return Ok(()),
                    // Gone from the store: gone from cv (if cv had a copy of it).
                    Stated::Gone(removing) => {
                        if let Some(p) = removing {
                            p.wait_async().await?;
                        }
                        let gone = || Fail::new(ErrorCode::NotFound, format!("{}: not in the store", check.path));
                        return Err(missing.map_or_else(gone, Fail::from));
                    }
                    Stated::Tail(read) => read,
                    Stated::Recording(pending, mut read) => {
                        // The record needs only the HEAD: the tail's GET and the journal's sync overlap.
                        let (tail, created) =
                            tokio::join!(self.read_tail(&ufs, &check.key, &read), pending.wait_async());
                        let (tail, created) = (tail?, created?);
                        read.file = Some((created.file_id, created.version));
                        core.tail_read(check, &read, &tail);
                        return Ok(());
                    }
                }
            }
        };
        let tail = self.read_tail(&ufs, &check.key, &read).await?;
        core.tail_read(check, &read, &tail);
        Ok(())
    }

    /// The object's last bytes, as many as its format's footer needs: the core sizes the
    /// reads (one of the default tail size, a second only for a larger footer).
    async fn read_tail(&self, ufs: &Ufs, key: &str, read: &TailRead) -> Result<Vec<u8>, Fail> {
        let mut tail = ufs.read(key, read.first.clone(), Some(&read.version)).await?.to_vec();
        if let Some(more) = read.more(&tail) {
            tail = ufs.read(key, more, Some(&read.version)).await?.to_vec();
        }
        Ok(tail)
    }

    /// Before a list of `dir` (or a stat of one of its children) that only reads: as
    /// [`UfsLayer::before_list`], but a listing the core lets fail open (one cv made within
    /// `cv.max_stale`) is served as it is if the store fails or does not answer within
    /// `cv.revalidate_timeout`.
    pub(super) async fn before_read_list(self: &Arc<Self>, core: &Arc<MasterCore>, dir: &CvPath) -> Result<(), Fail> {
        let Some(check) = core.list_check(dir, true)? else { return Ok(()) };
        let Some(within) = check.fail_open else { return self.list(core, check).await };
        let (me, c) = (self.clone(), core.clone());
        let refresh = async move { me.list(&c, check).await };
        self.bounded(dir, within, refresh).await
    }

    /// Before a list of `dir` (or a stat of one of its children): its children are in the
    /// namespace.
    pub(super) async fn before_list(&self, core: &MasterCore, dir: &CvPath) -> Result<(), Fail> {
        let Some(check) = core.list_check(dir, false)? else { return Ok(()) };
        self.list(core, check).await
    }

    async fn list(&self, core: &MasterCore, check: ListCheck) -> Result<(), Fail> {
        let guard = self.flight(check.dir.as_str()).await;
        let r = if core.list_needed(&check) { self.refresh_dir(core, &check).await } else { Ok(()) };
        drop(guard);
        self.done_flight(check.dir.as_str());
        r
    }

    async fn refresh_dir(&self, core: &MasterCore, check: &ListCheck) -> Result<(), Fail> {
        let ufs = self.store(&check.mount)?;
        let entries = match ufs.list_dir(&check.key).await {
            Ok(e) => e,
            // A prefix with no objects is an empty directory to S3.
            Err(e) if e.kind() == UfsErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(e.into()),
        };
        let listed = entries.into_iter().map(|e| Listed { head: e.meta.as_ref().map(head_of), name: e.name }).collect();
        core.listed(check, listed, &same_version)?.wait_async().await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    /// The core parses mount options' durations itself (it may not depend on cv-net): the same
    /// grammar and messages as cv-net's `Dur`, which the rest of cv's configuration uses.
    #[test]
    fn mount_durations_parse_as_the_configuration_does() {
        for s in ["250ms", "10s", "5m", "2min", "1h", "2d", "1w", "3us", "0", "7", " 4s ", "x", "5y", "", "s"] {
            let net = s.parse::<cv_net::config::Dur>().map(|d| d.0);
            assert_eq!(cv_master_core::state::parse_duration(s), net, "{s:?}");
        }
    }
}
