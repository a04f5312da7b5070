//! Cache-mode decisions: whether what cv holds under a cache-mode mount may be served, must be
//! revalidated at the store, or may be served stale because the store cannot say. The core
//! decides under its state lock and answers with a value naming the store I/O to do; the
//! server does it and gives the outcome back here ([`MasterCore::object_stated`],
//! [`MasterCore::tail_read`], [`MasterCore::listed`]), where the core decides again. Nothing
//! here waits or touches a store, so the seeded simulations drive it (`tests/sim_cache.rs`).
//!
//! The rules: a path checked at its store within the mount's `cv.ttl` is served as cv holds
//! it; past that it is checked again, and a copy held (metadata and tail) that was checked
//! within `cv.max_stale` may be served if the store fails or does not answer within
//! `cv.revalidate_timeout` (`fail_open`); anything else waits for the store.

use std::collections::HashSet;
use std::ops::Range;
use std::time::Duration;

use super::{Created, MasterCore, OpenFile, Pending, Tail, lock};
use crate::error::{Error, ErrorKind, Result};
use crate::path::CvPath;
use crate::state::{CachePolicy, EntryKind, InodeId, MountEntry, State, UfsObject, key_of};
use cv_wire::footer;

/// Largest footer read into the tail cache; a bigger one is read from the workers.
pub const MAX_TAIL: u64 = 16 << 20;

/// What an object store says of one object (HEAD, or an entry of a LIST).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectHead {
    pub len: u64,
    /// The store's version of it (ETag, or what the store layer makes up without one).
    pub version: String,
    pub mtime_ms: u64,
}

/// Whether two heads are the same version of an object: the store's rule, which the server's
/// store layer knows (ETags, local files' identities, mtimes).
pub type SameVersion<'a> = &'a dyn Fn(&ObjectHead, &ObjectHead) -> bool;

/// What an open needs before it is answered.
#[derive(Debug)]
pub enum OpenStep {
    /// Answer with this: not under a cache-mode mount, or checked within `cv.ttl`.
    Serve(Pending<OpenFile>),
    /// Check the path at its store first ([`MasterCore::refresh_plan`]), then open again
    /// ([`MasterCore::begin_open_checked`]).
    Check(StoreCheck),
}

/// A path under a cache-mode mount to check at its store.
#[derive(Debug, Clone)]
pub struct StoreCheck {
    pub path: CvPath,
    /// The mount (its store's URL and options).
    pub mount: MountEntry,
    /// The path's object key in that store.
    pub key: String,
    /// `Some(within)`: cv holds a copy checked within `cv.max_stale`, which is served if the
    /// store fails or does not answer within `within` (the check goes on in the background).
    /// `None`: the request waits for the store and fails with it.
    pub fail_open: Option<Duration>,
    policy: CachePolicy,
}

/// The store I/O a file check needs, decided once the requests for the path are one.
#[derive(Debug)]
pub enum Refresh {
    /// Checked meanwhile (by the request this one waited for): nothing to ask.
    Done,
    /// Ask the store for the object's head, then [`MasterCore::object_stated`].
    Head,
    /// The head is known (listed lately): read only the tail, then [`MasterCore::tail_read`].
    Tail(TailRead),
}

/// What the store's answer to a HEAD comes to.
#[derive(Debug)]
pub enum Stated {
    /// The version cv holds, tail and all: checked.
    Fresh,
    /// Gone from the store, so gone from cv: wait for the copy's removal, if any, and fail
    /// with the store's answer.
    Gone(Option<Pending<usize>>),
    /// The version cv holds, without its tail: read it, then [`MasterCore::tail_read`].
    Tail(TailRead),
    /// A new version, being recorded: read its tail meanwhile, then wait for the record, set
    /// [`TailRead::file`] from it and call [`MasterCore::tail_read`].
    Recording(Pending<Created>, TailRead),
}

/// The tail of an object to read: [`TailRead::first`], then [`TailRead::more`] if its format's
/// footer is larger.
#[derive(Debug, Clone)]
pub struct TailRead {
    /// The copy (file id, version) the tail is for.
    pub file: Option<(InodeId, u64)>,
    pub len: u64,
    /// The object version to read (a read of another fails).
    pub version: String,
    /// The first ranged read: the default tail size.
    pub first: Range<u64>,
    default_tail: u64,
}

impl TailRead {
    fn new(file: Option<(InodeId, u64)>, head: &ObjectHead, default_tail: u64) -> Self {
        let budget = default_tail.min(head.len);
        Self { file, len: head.len, version: head.version.clone(), first: head.len - budget..head.len, default_tail }
    }

    /// The second read, when `first` (the bytes the first read gave) shows a larger footer
    /// than it holds and one that fits the tail cache ([`MAX_TAIL`]).
    pub fn more(&self, first: &[u8]) -> Option<Range<u64>> {
        let need = footer::tail_len(self.len, first, self.default_tail);
        (need > first.len() as u64 && need <= MAX_TAIL.min(self.len)).then(|| self.len - need..self.len)
    }
}

/// A directory under a cache-mode mount to list at its store.
#[derive(Debug, Clone)]
pub struct ListCheck {
    pub dir: CvPath,
    pub mount: MountEntry,
    pub key: String,
    /// As [`StoreCheck::fail_open`], for a listing cv made within `cv.max_stale`.
    pub fail_open: Option<Duration>,
    policy: CachePolicy,
}

/// One entry of a store's listing: a directory (`head: None`) or an object.
#[derive(Debug, Clone)]
pub struct Listed {
    pub name: String,
    pub head: Option<ObjectHead>,
}

/// What cv holds at `path` as a copy of an object: (file id, version, the object's head).
fn recorded(st: &State, path: &CvPath) -> Option<(InodeId, u64, EntryKind, Option<ObjectHead>)> {
    let s = st.stat(path).ok()?;
    let head = st.ufs_object(s.id).map(|o| ObjectHead { len: s.length, version: o.version.clone(), mtime_ms: s.mtime });
    Some((s.id, s.version, s.kind, head))
}

impl MasterCore {
    /// An open: answered at once, under one state lock with one path resolution and one tail
    /// lookup, unless it is under a cache-mode mount and not checked at the store within its
    /// `cv.ttl` (or its tail is not held), which the answer then asks for.
    pub fn begin_open_cached(&self, path: &CvPath) -> Result<OpenStep> {
        let mut g = lock(&self.inner);
        self.healthy(&mut g)?;
        let policy = match g.state.cache_mount_for(path) {
            None => None,
            Some((_, p)) => Some(p?),
        };
        let opened = self.open_in(&mut g, path, true);
        let Some(policy) = policy else {
            return Ok(OpenStep::Serve(Pending { value: opened?, ticket: self.read_ticket(g.last_seq) }));
        };
        let now = self.clock.now_ms();
        let held = matches!(&opened, Ok(info) if info.tail != Tail::Evicted);
        if held && g.fresh.within(path.as_str(), now, policy.ttl) {
            return Ok(OpenStep::Serve(Pending { value: opened?, ticket: self.read_ticket(g.last_seq) }));
        }
        let copy = matches!(&opened, Ok(info) if info.ufs.is_some());
        let servable = held && copy && g.fresh.within(path.as_str(), now, policy.max_stale);
        let fail_open = servable.then_some(policy.revalidate_within);
        let Some((mount, _)) = g.state.cache_mount_for(path) else {
            return Err(Error::new(ErrorKind::NotFound, format!("{path} is not under a mount")));
        };
        let key = key_of(&mount.path, path.as_str());
        Ok(OpenStep::Check(StoreCheck { path: path.clone(), mount: mount.clone(), key, fail_open, policy }))
    }

    /// The I/O a check of a file needs now (the requests for its path are one): refused if
    /// the file was deleted through cv and its object is still queued for deletion.
    pub fn refresh_plan(&self, check: &StoreCheck) -> Result<Refresh> {
        let g = self.settled();
        if g.state.object_delete_queued(&check.mount.path, &check.key) {
            return Err(Error::new(ErrorKind::NotFound, format!("{} was deleted", check.path)));
        }
        let now = self.clock.now_ms();
        if !g.fresh.within(check.path.as_str(), now, check.policy.ttl) {
            return Ok(Refresh::Head);
        }
        // Listed or stated lately: what was recorded is the object's head.
        match recorded(&g.state, &check.path) {
            Some((id, _, _, Some(head))) if self.tail_held(id, head.len) => Ok(Refresh::Done),
            Some((id, version, _, Some(head))) => {
                Ok(Refresh::Tail(TailRead::new(Some((id, version)), &head, self.config.default_tail_bytes)))
            }
            _ => Ok(Refresh::Head),
        }
    }

    /// The store's answer to the HEAD of a check (`None`: no such object), judged with the
    /// store's rule for versions.
    pub fn object_stated(&self, check: &StoreCheck, head: Option<ObjectHead>, same: SameVersion) -> Result<Stated> {
        let known = recorded(&self.settled().state, &check.path);
        let Some(head) = head else {
            return Ok(match known {
                Some((_, _, _, Some(_))) => Stated::Gone(Some(self.begin_delete(&check.path, false)?)),
                _ => Stated::Gone(None),
            });
        };
        let tail = self.config.default_tail_bytes;
        match known {
            Some((id, version, _, Some(rec))) if same(&rec, &head) => {
                if self.tail_held(id, head.len) {
                    self.mark_checked(&check.path);
                    return Ok(Stated::Fresh);
                }
                Ok(Stated::Tail(TailRead::new(Some((id, version)), &head, tail)))
            }
            _ => {
                let object = UfsObject {
                    mount: check.mount.path.clone(),
                    key: check.key.clone(),
                    version: head.version.clone(),
                };
                // The record needs only the head: the tail's read and the journal's sync overlap.
                let pending = self.begin_ufs_file(&check.path, object, head.len, head.mtime_ms)?;
                Ok(Stated::Recording(pending, TailRead::new(None, &head, tail)))
            }
        }
    }

    /// The tail of a check was read (`bytes`, the object's last bytes): kept, and the path is
    /// checked as of now.
    pub fn tail_read(&self, check: &StoreCheck, read: &TailRead, bytes: &[u8]) {
        if let Some((file_id, version)) = read.file {
            self.put_tail(file_id, version, read.len, bytes);
        }
        self.mark_checked(&check.path);
    }

    /// A listing of `dir` to make before a request reads it (`may_serve_stale`: one that only
    /// reads, which may be answered from a listing cv made within `cv.max_stale` if the store
    /// cannot say); `None` when it is not under a cache-mode mount or was listed within its
    /// `cv.ttl`.
    pub fn list_check(&self, dir: &CvPath, may_serve_stale: bool) -> Result<Option<ListCheck>> {
        let g = self.settled();
        let Some((mount, policy)) = g.state.cache_mount_for(dir) else { return Ok(None) };
        let policy = policy?;
        let now = self.clock.now_ms();
        if g.fresh.within(dir.as_str(), now, policy.ttl) {
            return Ok(None);
        }
        let servable = may_serve_stale && g.fresh.within(dir.as_str(), now, policy.max_stale);
        let fail_open = servable.then_some(policy.revalidate_within);
        let key = key_of(&mount.path, dir.as_str());
        Ok(Some(ListCheck { dir: dir.clone(), mount: mount.clone(), key, fail_open, policy }))
    }

    /// Whether a listing is still to be made (the request it waited for made it).
    pub fn list_needed(&self, check: &ListCheck) -> bool {
        !lock(&self.inner).fresh.within(check.dir.as_str(), self.clock.now_ms(), check.policy.ttl)
    }

    /// The store listed `dir` (`entries`; none for a prefix it has no objects under): each
    /// object cv holds no copy of (or a copy of another version) is recorded, each
    /// subdirectory made, and copies of objects no longer there removed; files written through
    /// cv and objects deleted through cv but still queued stay as they are. Waiting on the
    /// answer waits for all of it.
    pub fn listed(&self, check: &ListCheck, entries: Vec<Listed>, same: SameVersion) -> Result<Pending<()>> {
        let dir = &check.dir;
        let (make_dir, mut dirs, mut records, fresh, gone) = {
            let g = self.settled();
            let st = &g.state;
            let make_dir = st.stat(dir).is_err();
            let (mut dirs, mut records, mut fresh, mut seen) = (Vec::new(), Vec::new(), Vec::new(), HashSet::new());
            for e in entries {
                let Ok(child) = dir.child(&e.name) else { continue };
                seen.insert(e.name);
                let known = recorded(st, &child);
                let key = key_of(&check.mount.path, child.as_str());
                match e.head {
                    None if known.is_none() => dirs.push(child),
                    None => {}
                    // Deleted through cv; the store has not caught up yet.
                    Some(_) if st.object_delete_queued(&check.mount.path, &key) => {}
                    Some(head) => {
                        let same_copy = matches!(&known, Some((_, _, EntryKind::File, Some(rec))) if same(rec, &head));
                        if !same_copy {
                            let object =
                                UfsObject { mount: check.mount.path.clone(), key, version: head.version.clone() };
                            records.push((child.clone(), object, head));
                        }
                        fresh.push(child);
                    }
                }
            }
            // Copies of objects no longer in the store go; files written through cv stay.
            let gone: Vec<CvPath> = match st.list(dir, None, usize::MAX) {
                Ok(page) => page
                    .entries
                    .into_iter()
                    .filter(|e| !seen.contains(&e.name) && st.ufs_object(e.stat.id).is_some())
                    .filter_map(|e| dir.child(&e.name).ok())
                    .collect(),
                Err(_) => Vec::new(),
            };
            (make_dir, dirs, records, fresh, gone)
        };
        let mut last = None;
        if make_dir {
            last = Some(self.begin_mkdir(dir, true)?.ticket);
        }
        for d in dirs.drain(..) {
            last = Some(self.begin_mkdir(&d, true)?.ticket);
        }
        for (child, object, head) in records.drain(..) {
            last = Some(self.begin_ufs_file(&child, object, head.len, head.mtime_ms)?.ticket);
        }
        for child in gone {
            last = Some(self.begin_delete(&child, false)?.ticket);
        }
        let now = self.clock.now_ms();
        let mut g = lock(&self.inner);
        for child in fresh {
            g.fresh.mark(child.as_str(), now);
        }
        g.fresh.mark(dir.as_str(), now);
        let ticket = last.unwrap_or_else(|| self.read_ticket(g.last_seq));
        Ok(Pending { value: (), ticket })
    }

    /// `path` was checked at its store now (a file written through to it, say).
    pub fn mark_checked(&self, path: &CvPath) {
        let now = self.clock.now_ms();
        lock(&self.inner).fresh.mark(path.as_str(), now);
    }

    /// Forgets the checks at or under `path` (`mount sync`, an unmount, a rename): the next
    /// request asks the store again. Whether `path` is under a mount.
    pub fn forget_checks(&self, path: &CvPath) -> bool {
        let mut g = lock(&self.inner);
        g.fresh.forget_under(path);
        g.state.mount_for(path).is_some()
    }

    /// How long ago each check kept was made (by the injected clock), for the `tails` file.
    pub fn check_ages(&self) -> Vec<(String, Duration)> {
        let now = self.clock.now_ms();
        let g = lock(&self.inner);
        g.fresh.checks().into_iter().map(|(p, at)| (p, Duration::from_millis(now.saturating_sub(at)))).collect()
    }

    /// Takes back a check of `path` made `age` ago (from the `tails` file, at start).
    pub fn restore_check(&self, path: String, age: Duration) {
        if let Some(at) = self.clock.now_ms().checked_sub(age.as_millis() as u64) {
            lock(&self.inner).fresh.restore(path, at);
        }
    }

    /// A change count of the checks kept.
    pub fn checks_generation(&self) -> u64 {
        lock(&self.inner).fresh.changes()
    }

    /// Whether the tail of file `id` (`len` bytes) is held: an empty file needs none.
    fn tail_held(&self, id: InodeId, len: u64) -> bool {
        len == 0 || lock(&self.tails).contains(id)
    }
}
