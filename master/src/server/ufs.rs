//! Cache-mode mounts: the master's side of object storage. Before a request
//! touches a path under a cache-mode mount, the metadata it needs is brought
//! in from the store once and then served from the namespace until the
//! mount's validity period (`cv.ttl`, default 60 s) passes or `mount sync`:
//! - open: the object is stated (HEAD) and its tail read (one ranged GET),
//!   then recorded as a complete file whose blocks the shards fetch on first
//!   read; the open reply carries the tail as for any file;
//! - list, stat: the directory is listed (one LIST) and every child recorded.
//!
//! Concurrent requests for the same path wait for one call to the store.

use super::errors::Fail;
use cv_master_core::MasterCore;
use cv_master_core::path::CvPath;
use cv_master_core::state::{EntryKind, Mount, MountMode, Stat, UfsObject, key_of};
use cv_ufs::{ObjectMeta, Ufs, UfsErrorKind, UfsSettings};
use cv_wire::ErrorCode;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long fetched metadata is trusted when the mount does not say.
pub const DEFAULT_TTL: Duration = Duration::from_secs(60);
/// How long a revalidation may take, when the mount does not say, before cv serves its copy.
const DEFAULT_REVALIDATE_WITHIN: Duration = Duration::from_secs(1);
/// How stale a copy may be served when its store fails, when the mount does not say.
const DEFAULT_MAX_STALE: Duration = Duration::from_secs(3600);
/// Largest footer read into the tail cache; a bigger one is read from the workers.
const MAX_TAIL: u64 = 16 << 20;

#[derive(Debug, Default)]
pub(super) struct UfsLayer {
    settings: UfsSettings,
    /// One operator per mount point, rebuilt when the mount's URL or options change.
    stores: Mutex<HashMap<String, (Mount, Ufs)>>,
    /// When each path's metadata was last read from its store.
    fresh: Mutex<HashMap<String, Instant>>,
    /// Changes to `fresh`, so the tails file is saved only when something changed.
    fresh_changes: AtomicU64,
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

/// The mount's validity period.
pub(super) fn ttl(m: &Mount) -> Result<Duration, Fail> {
    duration_option(m, "cv.ttl", DEFAULT_TTL)
}

/// How long a revalidation of something cv holds may take before cv serves what it holds
/// (`cv.revalidate_timeout`).
fn revalidate_within(m: &Mount) -> Result<Duration, Fail> {
    duration_option(m, "cv.revalidate_timeout", DEFAULT_REVALIDATE_WITHIN)
}

/// How long after its last validation a copy may still be served when its store fails or
/// hangs (`cv.max_stale`; 0: never).
fn max_stale(m: &Mount) -> Result<Duration, Fail> {
    duration_option(m, "cv.max_stale", DEFAULT_MAX_STALE)
}

fn duration_option(m: &Mount, key: &str, default: Duration) -> Result<Duration, Fail> {
    match m.options.iter().find(|(k, _)| k == key) {
        None => Ok(default),
        Some((_, v)) => v
            .parse::<cv_net::config::Dur>()
            .map(|d| d.0)
            .map_err(|e| Fail::new(ErrorCode::InvalidArgument, format!("mount option {key}={v}: {e}"))),
    }
}

/// What cv holds at `path`, and for a copy of an object what it recorded of that object.
fn recorded(core: &MasterCore, path: &CvPath) -> Option<(Stat, Option<ObjectMeta>)> {
    core.inspect(|st| {
        let s = st.stat(path).ok()?;
        let rec =
            st.ufs_object(s.id).map(|o| ObjectMeta { len: s.length, version: o.version.clone(), mtime_ms: s.mtime });
        Some((s, rec))
    })
}

impl UfsLayer {
    /// A store for the mount, connected once.
    pub(super) fn store(&self, m: &Mount) -> Result<Ufs, Fail> {
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

    /// Checks a new mount before it is recorded: its URL parses and its root lists.
    pub(super) async fn validate(&self, m: &Mount) -> Result<(), Fail> {
        ttl(m)?;
        revalidate_within(m)?;
        max_stale(m)?;
        let ufs = Ufs::connect(&m.ufs_url, &m.options, &self.settings)?.with_stats(self.stats.clone());
        ufs.check().await.map_err(Fail::from)
    }

    fn is_fresh(&self, path: &str, ttl: Duration) -> bool {
        lock(&self.fresh).get(path).is_some_and(|t| t.elapsed() < ttl)
    }

    pub(super) fn mark_fresh(&self, path: &str) {
        lock(&self.fresh).insert(path.to_owned(), Instant::now());
        self.fresh_changes.fetch_add(1, Ordering::Relaxed);
    }

    /// Forgets what was read from the store at or under `path`.
    pub(super) fn sync(&self, path: &CvPath) {
        lock(&self.fresh).retain(|p, _| CvPath::parse(p).map(|p| !p.is_under(path)).unwrap_or(false));
        self.fresh_changes.fetch_add(1, Ordering::Relaxed);
    }

    /// How long ago each path was last checked at its store (for the tails file).
    pub(super) fn fresh_ages(&self) -> Vec<(String, Duration)> {
        lock(&self.fresh).iter().map(|(p, t)| (p.clone(), t.elapsed())).collect()
    }

    /// Takes back a check of `path` made `age` ago (from the tails file, at start).
    pub(super) fn restore_fresh(&self, path: String, age: Duration) {
        if let Some(at) = Instant::now().checked_sub(age) {
            lock(&self.fresh).entry(path).or_insert(at);
        }
    }

    pub(super) fn fresh_generation(&self) -> u64 {
        self.fresh_changes.load(Ordering::Relaxed)
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

    /// The cache-mode mount `path` is under, if any.
    fn cache_mount(core: &MasterCore, path: &CvPath) -> Option<Mount> {
        core.inspect(|st| st.mount_for(path).filter(|m| m.mode == MountMode::Cache).cloned())
    }

    /// Before an open of `path`: its object's metadata and tail are in the namespace. A copy
    /// cv holds, validated within `cv.max_stale`, is served as it is if the store fails or
    /// does not answer within `cv.revalidate_timeout` (the revalidation goes on in the
    /// background): a hung store never makes a cached file unreadable. A first open waits
    /// for the store, and fails within its deadline naming it.
    pub(super) async fn before_open(self: &Arc<Self>, core: &Arc<MasterCore>, path: &CvPath) -> Result<(), Fail> {
        let Some(m) = Self::cache_mount(core, path) else { return Ok(()) };
        let ttl = ttl(&m)?;
        if self.is_fresh(path.as_str(), ttl) && core.has_tail(path) {
            return Ok(());
        }
        let held = core.has_tail(path) && recorded(core, path).is_some_and(|(_, rec)| rec.is_some());
        let (me, c, mount, p) = (self.clone(), core.clone(), m.clone(), path.clone());
        let refresh = async move {
            let guard = me.flight(p.as_str()).await;
            let r = me.refresh_file(&c, &mount, &p, ttl).await;
            drop(guard);
            me.done_flight(p.as_str());
            r
        };
        if !(held && self.servable(&m, path)?) {
            return refresh.await;
        }
        self.bounded(&m, path, refresh).await
    }

    /// Whether what cv holds of `path` was validated recently enough to be served when its
    /// store cannot say.
    fn servable(&self, m: &Mount, path: &CvPath) -> Result<bool, Fail> {
        let max = max_stale(m)?;
        Ok(lock(&self.fresh).get(path.as_str()).is_some_and(|t| t.elapsed() < max))
    }

    /// Runs `refresh`, a revalidation of what cv holds of `path`, for at most the mount's
    /// `cv.revalidate_timeout`; past it, or if the store failed, what cv holds is served and
    /// the revalidation goes on in the background. One under way already is not started again.
    async fn bounded(
        &self,
        m: &Mount,
        path: &CvPath,
        refresh: impl std::future::Future<Output = Result<(), Fail>> + Send + 'static,
    ) -> Result<(), Fail> {
        if lock(&self.flights).contains_key(path.as_str()) {
            self.stale_served.fetch_add(1, Ordering::Relaxed);
            return Ok(());
        }
        let within = revalidate_within(m)?;
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

    async fn refresh_file(&self, core: &MasterCore, m: &Mount, path: &CvPath, ttl: Duration) -> Result<(), Fail> {
        let ufs = self.store(m)?;
        let key = key_of(&m.path, path.as_str());
        if core.inspect(|st| st.object_delete_queued(&m.path, &key)) {
            return Err(Fail::new(ErrorCode::NotFound, format!("{path} was deleted")));
        }
        // The file's id and, if it is a copy of an object, what was recorded about it.
        let known = recorded(core, path).map(|(s, rec)| (s.id, rec));
        let fresh = self.is_fresh(path.as_str(), ttl);
        let meta = match (fresh, &known) {
            // Listed or stated lately: only the tail is missing.
            (true, Some((_, Some(rec)))) => Some(rec.clone()),
            _ => None,
        };
        let meta = match meta {
            Some(m) => m,
            None => match ufs.stat(&key).await {
                Ok(meta) => meta,
                Err(e) if e.kind() == UfsErrorKind::NotFound => {
                    // Gone from the store: gone from cv (if cv had a copy of it).
                    if let Some((_, Some(_))) = known {
                        core.begin_delete(path, false)?.wait_async().await?;
                    }
                    return Err(e.into());
                }
                Err(e) => return Err(e.into()),
            },
        };
        let unchanged = matches!(&known, Some((_, Some(rec))) if rec.same_version(&meta));
        if unchanged && core.has_tail(path) {
            // Revalidated: the same version, so the tail held is still its tail.
            self.mark_fresh(path.as_str());
            return Ok(());
        }
        match &known {
            Some((id, Some(_))) if unchanged => {
                let tail = self.read_tail(core, &ufs, &key, &meta).await?;
                if let Some(version) = core.inspect(|st| st.stat(path).ok()).map(|s| s.version) {
                    core.put_tail(*id, version, meta.len, &tail);
                }
            }
            _ => {
                let object = UfsObject { mount: m.path.clone(), key: key.clone(), version: meta.version.clone() };
                let pending = core.begin_ufs_file(path, object, meta.len, meta.mtime_ms)?;
                // The record needs only the HEAD: the tail's GET and the journal's fsync overlap.
                let (tail, created) = tokio::join!(self.read_tail(core, &ufs, &key, &meta), pending.wait_async());
                let (tail, created) = (tail?, created?);
                core.put_tail(created.file_id, created.version, meta.len, &tail);
            }
        }
        self.mark_fresh(path.as_str());
        Ok(())
    }

    /// The object's last bytes, as many as its format's footer needs: one
    /// ranged read of the default tail size, a second only for a larger footer.
    async fn read_tail(&self, core: &MasterCore, ufs: &Ufs, key: &str, meta: &ObjectMeta) -> Result<Vec<u8>, Fail> {
        let budget = core.config().default_tail_bytes.min(meta.len);
        let range = meta.len - budget..meta.len;
        let mut tail = ufs.read(key, range, Some(&meta.version)).await?.to_vec();
        let need = cv_wire::footer::tail_len(meta.len, &tail, core.config().default_tail_bytes);
        let cap = MAX_TAIL.min(meta.len);
        if need > tail.len() as u64 && need <= cap {
            let more = ufs.read(key, meta.len - need..meta.len, Some(&meta.version)).await?;
            tail = more.to_vec();
        }
        Ok(tail)
    }

    /// Before a list of `dir` (or a stat of one of its children) that only reads: as
    /// [`UfsLayer::before_list`], but a listing cv holds, made within `cv.max_stale`, is
    /// served as it is if the store fails or does not answer within `cv.revalidate_timeout`.
    pub(super) async fn before_read_list(self: &Arc<Self>, core: &Arc<MasterCore>, dir: &CvPath) -> Result<(), Fail> {
        let Some(m) = Self::cache_mount(core, dir) else { return Ok(()) };
        let ttl = ttl(&m)?;
        if self.is_fresh(dir.as_str(), ttl) {
            return Ok(());
        }
        if !self.servable(&m, dir)? {
            return self.before_list(core, dir).await;
        }
        let (me, c, p) = (self.clone(), core.clone(), dir.clone());
        let refresh = async move { me.before_list(&c, &p).await };
        self.bounded(&m, dir, refresh).await
    }

    /// Before a list of `dir` (or a stat of one of its children): its
    /// children are in the namespace.
    pub(super) async fn before_list(&self, core: &MasterCore, dir: &CvPath) -> Result<(), Fail> {
        let Some(m) = Self::cache_mount(core, dir) else { return Ok(()) };
        let ttl = ttl(&m)?;
        if self.is_fresh(dir.as_str(), ttl) {
            return Ok(());
        }
        let guard = self.flight(dir.as_str()).await;
        let r = if self.is_fresh(dir.as_str(), ttl) { Ok(()) } else { self.refresh_dir(core, &m, dir).await };
        drop(guard);
        self.done_flight(dir.as_str());
        r
    }

    async fn refresh_dir(&self, core: &MasterCore, m: &Mount, dir: &CvPath) -> Result<(), Fail> {
        let ufs = self.store(m)?;
        let entries = match ufs.list_dir(&key_of(&m.path, dir.as_str())).await {
            Ok(e) => e,
            // A prefix with no objects is an empty directory to S3.
            Err(e) if e.kind() == UfsErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(e.into()),
        };
        if core.inspect(|st| st.stat(dir).is_err()) {
            core.begin_mkdir(dir, true)?.wait_async().await?;
        }
        let mut seen = std::collections::HashSet::new();
        for e in entries {
            let Ok(child) = dir.child(&e.name) else { continue };
            seen.insert(e.name.clone());
            let known = recorded(core, &child).map(|(s, rec)| (s.kind, rec));
            match e.meta {
                None => {
                    if known.is_none() {
                        core.begin_mkdir(&child, true)?.wait_async().await?;
                    }
                }
                // Deleted through cv; the store has not caught up yet.
                Some(_) if core.inspect(|st| st.object_delete_queued(&m.path, &key_of(&m.path, child.as_str()))) => {}
                Some(meta) => {
                    if !matches!(&known, Some((EntryKind::File, Some(rec))) if rec.same_version(&meta)) {
                        let object = UfsObject {
                            mount: m.path.clone(),
                            key: key_of(&m.path, child.as_str()),
                            version: meta.version.clone(),
                        };
                        core.begin_ufs_file(&child, object, meta.len, meta.mtime_ms)?.wait_async().await?;
                    }
                    self.mark_fresh(child.as_str());
                }
            }
        }
        // Copies of objects no longer in the store go; files written through cv stay.
        let gone: Vec<String> = core.inspect(|st| {
            let Ok(page) = st.list(dir, None, usize::MAX) else { return Vec::new() };
            page.entries
                .into_iter()
                .filter(|e| !seen.contains(&e.name) && st.ufs_object(e.stat.id).is_some())
                .map(|e| e.name)
                .collect()
        });
        for name in gone {
            if let Ok(child) = dir.child(&name) {
                core.begin_delete(&child, false)?.wait_async().await?;
            }
        }
        self.mark_fresh(dir.as_str());
        Ok(())
    }
}
