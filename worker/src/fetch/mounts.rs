//! Mount point → [`Ufs`], asked of the master once and kept for a while.
//!
//! An entry is refreshed when it is older than the refresh period (credentials rotated at
//! the master reach the worker within it), and dropped at once when the store refused it
//! (`Config`, `PermissionDenied`). If the master cannot be reached for a refresh, the old
//! entry keeps serving, and the master is asked again only after [`RETRY_DOWN_MASTER`]: the
//! fills queued behind the mount's lock do not each wait out a dead master's timeout. Each
//! mount has its own lock, so one slow resolution does not hold
//! up the others, and concurrent fetches under a cold mount ask the master once.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cv_ufs::{Ufs, UfsSettings};
use cv_wire::msg::MountMode;

use super::error::{FetchError, FetchErrorKind};
use super::master::MasterLink;

/// How long a mount whose refresh found the master unreachable is served as it is before
/// the master is asked again.
const RETRY_DOWN_MASTER: Duration = Duration::from_secs(5);

/// Slots past this many are swept of those holding no mount: a read names its mount, so a
/// peer sending made-up names would otherwise grow the map without end.
const MAX_SLOTS: usize = 1024;

/// One cached mount.
#[derive(Debug, Clone)]
struct Entry {
    ufs: Ufs,
    /// Served without asking the master until then.
    fresh_until: Instant,
    /// What the master said (URL and options), to keep `ufs` and its open connections
    /// when a refresh brings nothing new.
    said: (String, Vec<(String, String)>),
}

type Slot = Arc<tokio::sync::Mutex<Option<Entry>>>;

/// The mounts this worker fetched under.
#[derive(Debug)]
pub(crate) struct Mounts {
    master: MasterLink,
    settings: UfsSettings,
    refresh: Duration,
    slots: Mutex<HashMap<String, Slot>>,
    /// Every store's requests, counted for `/metrics`.
    stats: Arc<cv_ufs::UfsStats>,
}

/// A resolved mount, and whether it came from the cache (a refusal then warrants one retry
/// with a fresh copy).
#[derive(Debug)]
pub(crate) struct Resolved {
    pub(crate) ufs: Ufs,
    pub(crate) cached: bool,
}

impl Mounts {
    pub(crate) fn new(
        master: MasterLink,
        settings: UfsSettings,
        refresh: Duration,
        stats: Arc<cv_ufs::UfsStats>,
    ) -> Self {
        Self { master, settings, refresh, slots: Mutex::new(HashMap::new()), stats }
    }

    pub(crate) fn master(&self) -> &MasterLink {
        &self.master
    }

    fn slot(&self, mount: &str) -> Slot {
        let mut slots = self.slots.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if slots.len() >= MAX_SLOTS && !slots.contains_key(mount) {
            // Kept: slots with a mount, and those someone holds (a resolution under way).
            slots.retain(|_, s| Arc::strong_count(s) > 1 || s.try_lock().map(|e| e.is_some()).unwrap_or(true));
        }
        slots.entry(mount.to_owned()).or_default().clone()
    }

    /// The object store behind `mount`.
    pub(crate) async fn resolve(&self, mount: &str) -> Result<Resolved, FetchError> {
        let slot = self.slot(mount);
        let mut entry = slot.lock().await;
        if let Some(e) = entry.as_ref()
            && Instant::now() < e.fresh_until
        {
            return Ok(Resolved { ufs: e.ufs.clone(), cached: true });
        }
        match self.fetch(mount, entry.as_ref()).await {
            Ok((ufs, said)) => {
                *entry = Some(Entry { ufs: ufs.clone(), fresh_until: Instant::now() + self.refresh, said });
                Ok(Resolved { ufs, cached: false })
            }
            Err(e) if e.kind() == FetchErrorKind::Unavailable => match entry.as_mut() {
                // A master that is down does not stop reads under a mount known already.
                Some(old) => {
                    tracing::warn!(mount, error = %e, retry_in = ?RETRY_DOWN_MASTER, "mount not refreshed; using the copy we have");
                    old.fresh_until = Instant::now() + RETRY_DOWN_MASTER.min(self.refresh);
                    Ok(Resolved { ufs: old.ufs.clone(), cached: true })
                }
                None => Err(e),
            },
            Err(e) => {
                *entry = None;
                Err(e)
            }
        }
    }

    /// Forgets `mount` (its store refused us): the next fetch asks the master again.
    pub(crate) async fn invalidate(&self, mount: &str) {
        let slot = self.slot(mount);
        *slot.lock().await = None;
    }

    /// Asks the master for `mount`; reuses `old`'s store handle (its HTTP connections) when
    /// the URL and options did not change.
    async fn fetch(
        &self,
        mount: &str,
        old: Option<&Entry>,
    ) -> Result<(Ufs, (String, Vec<(String, String)>)), FetchError> {
        let m = self.master.get_mount(mount).await?;
        if m.mode != MountMode::Cache {
            tracing::debug!(mount, mode = ?m.mode, "fetching a block under a mount not in cache mode");
        }
        let said = (m.ufs_url, m.options.into_iter().map(|kv| (kv.key, kv.value)).collect::<Vec<_>>());
        if let Some(old) = old.filter(|o| o.said == said) {
            return Ok((old.ufs.clone(), said));
        }
        let ufs = Ufs::connect(&said.0, &said.1, &self.settings)
            .map_err(|e| FetchError::from_ufs(&format!("mount {mount} ({})", said.0), &e))?
            .with_stats(self.stats.clone());
        Ok((ufs, said))
    }
}

#[cfg(test)]
mod tests {
    use super::super::master::MasterSpec;
    use super::*;

    fn mounts() -> Mounts {
        let ca = cv_net::tls::ClusterCa::generate("t").unwrap();
        let node = ca.issue("w", &cv_net::identity::CertRole::Node, &[]).unwrap();
        let identity = cv_net::tls::Identity::from_pem(&ca.cert_pem(), &node.cert_pem, &node.key_pem).unwrap();
        let spec = MasterSpec {
            masters: Arc::new(cv_net::masters::MasterList::new("127.0.0.1:9".to_string(), &[])),
            node: "w".into(),
            identity,
            transport: Default::default(),
            bind: "127.0.0.1".parse().unwrap(),
            timeout: Duration::from_millis(100),
        };
        Mounts::new(MasterLink::new(spec), UfsSettings::default(), Duration::from_secs(60), Default::default())
    }

    #[test]
    fn made_up_mount_names_are_not_kept_but_real_mounts_are() {
        let m = mounts();
        let dir = tempfile::tempdir().unwrap();
        let url = format!("fs://{}", dir.path().display());
        let ufs = Ufs::connect(&url, &[], &UfsSettings::default()).unwrap();
        let real = Entry { ufs, fresh_until: Instant::now(), said: (url, vec![]) };
        *m.slot("/real").try_lock().unwrap() = Some(real);
        for i in 0..10_000 {
            drop(m.slot(&format!("/made-up-{i}")));
        }
        let slots = m.slots.lock().unwrap();
        assert!(slots.len() <= MAX_SLOTS, "{} slots kept", slots.len());
        assert!(slots["/real"].try_lock().unwrap().is_some(), "a real mount was swept");
    }
}
