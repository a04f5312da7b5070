//! The store work under mounts other than checks (`cache.rs`): which files to export and what
//! an upload needs, which queued object deletes to make, which objects a rename moves, and what
//! a completion under a mount asks for. Each is decided under one state lock and returned as a
//! value naming the store I/O; the server does it and records the outcome through the
//! journaled `begin_*` calls of `objects.rs`.

use super::{MasterCore, OpenFile, Pending};
use crate::error::{Error, ErrorKind, Result};
use crate::path::CvPath;
use crate::state::{EntryKind, InodeId, MountEntry, MountMode, ObjectCopy, PendingExport, key_of};

/// An upload the exporter makes: the file as it is now, and where it goes.
#[derive(Debug, Clone)]
pub struct ExportJob {
    pub file_id: InodeId,
    pub version: u64,
    pub path: CvPath,
    pub mount: MountEntry,
    pub key: String,
    /// The file's length and blocks.
    pub open: OpenFile,
}

/// What an export of a file comes to.
#[derive(Debug)]
pub enum ExportStep {
    /// Exported already (by the background loop, or before a restart): nothing to upload.
    Done,
    /// Upload the file's blocks to `key`, then record it (`begin_exported`).
    Upload(Box<ExportJob>),
}

/// Queued object deletes of one mount, to make in its store.
#[derive(Debug, Clone)]
pub struct DeleteBatch {
    pub mount: MountEntry,
    pub keys: Vec<String>,
}

/// One object a rename moves: the file's copy and the key it takes.
#[derive(Debug, Clone)]
pub struct ObjectMove {
    pub copy: ObjectCopy,
    pub to_key: String,
}

/// What a file's completion asks of the server besides its answer.
#[derive(Debug, Clone)]
pub struct Completed {
    /// The file's (version, length) once complete.
    pub file: Option<(u64, u64)>,
    /// The mount it is under: (its path, the mount's mode, the store's URL, the version at
    /// that path).
    pub under: Option<(CvPath, MountMode, String, u64)>,
}

impl MasterCore {
    /// Files to export (`cache_too`: also cache-mode files whose write-through a crash cut
    /// off), unless nothing that could change the answer was applied since `seen` (the
    /// epoch an earlier answer gave): then `None`, and the earlier list stands.
    pub fn export_queue(&self, cache_too: bool, seen: Option<u64>) -> Option<(u64, Vec<PendingExport>)> {
        let g = self.settled();
        let epoch = g.state.exports_epoch();
        (seen != Some(epoch)).then(|| (epoch, g.state.pending_exports(cache_too)))
    }

    /// Files under fs-mode mounts waiting to be exported (the backlog `/metrics` and reports
    /// show).
    pub fn export_backlog(&self) -> Vec<PendingExport> {
        self.settled().state.pending_exports(false)
    }

    /// What exporting file `file_id` at `version`, at `path`, takes now: refused if the path
    /// is no longer under a mount or holds another file or version.
    pub fn export_plan(&self, file_id: InodeId, version: u64, path: &CvPath) -> Result<Pending<ExportStep>> {
        let mut g = super::lock(&self.inner);
        self.healthy(&mut g)?;
        let ticket = self.read_ticket(g.last_seq);
        if g.state.ufs_object(file_id).is_some() {
            return Ok(Pending { value: ExportStep::Done, ticket });
        }
        let Some(mount) = g.state.mount_for(path).cloned() else {
            return Err(Error::new(ErrorKind::NotFound, format!("{path} is no longer under a mount")));
        };
        let open = self.open_in(&mut g, path, true)?;
        if open.file_id != file_id || open.version != version {
            return Err(Error::new(ErrorKind::Changed, format!("{path} changed before its export")));
        }
        let key = key_of(&mount.path, path.as_str());
        let job = ExportJob { file_id, version, path: path.clone(), mount, key, open };
        Ok(Pending { value: ExportStep::Upload(Box::new(job)), ticket })
    }

    /// After an upload whose record was refused: whether no file is at its path now (renamed
    /// or deleted during the upload), so the object uploaded is nobody's and goes.
    pub fn upload_orphaned(&self, job: &ExportJob) -> bool {
        self.settled().state.lookup(&job.path).is_err()
    }

    /// Whether object deletes are queued.
    pub fn deletes_queued(&self) -> bool {
        self.settled().state.has_queued_object_deletes()
    }

    /// The queued object deletes, by mount.
    pub fn delete_batches(&self) -> Vec<DeleteBatch> {
        let g = self.settled();
        let st = &g.state;
        let mut out = Vec::new();
        for (mount, keys) in st.queued_object_deletes() {
            if let Some(m) = st.data().mounts.get(&mount) {
                out.push(DeleteBatch { mount: m.clone(), keys });
            }
        }
        out
    }

    /// Of `keys` queued under mount point `mount`, those still queued, with the mount as it is
    /// now (`None`: unmounted, which drops its queue): a key taken off the queue meanwhile is
    /// a file's object again and not the drain's to delete.
    pub fn still_queued(&self, mount: &str, keys: &[String]) -> Option<DeleteBatch> {
        let g = self.settled();
        let m = g.state.data().mounts.get(mount)?.clone();
        let keys = keys.iter().filter(|k| g.state.object_delete_queued(mount, k)).cloned().collect();
        Some(DeleteBatch { mount: m, keys })
    }

    /// The mount a rename of `src` is under, if any.
    pub fn rename_mount(&self, src: &CvPath) -> Option<MountEntry> {
        self.settled().state.mount_for(src).cloned()
    }

    /// The subdirectories of `dir`, to list before a rename (`None`: not a directory).
    pub fn subdirs(&self, dir: &CvPath) -> Option<Vec<CvPath>> {
        let g = self.settled();
        if !g.state.stat(dir).is_ok_and(|s| s.kind == EntryKind::Dir) {
            return None;
        }
        let page = g.state.list(dir, None, usize::MAX).ok()?;
        let dirs = page.entries.into_iter().filter(|e| e.stat.kind == EntryKind::Dir);
        Some(dirs.filter_map(|e| dir.child(&e.name).ok()).collect())
    }

    /// The objects a rename of `src` to `dst` under `mount` moves, each to the key of its new
    /// path; `None` when the rename is a no-op (a path renamed onto itself), refused when the
    /// state machine refuses it.
    pub fn rename_moves(&self, mount: &MountEntry, src: &CvPath, dst: &CvPath) -> Result<Option<Vec<ObjectMove>>> {
        let g = self.settled();
        if !g.state.check_rename(src, dst)? {
            return Ok(None);
        }
        let moves = g.state.object_copies_under(src).into_iter().map(|copy| {
            let moved = format!("{}{}", dst.as_str(), &copy.path.as_str()[src.as_str().len()..]);
            ObjectMove { to_key: key_of(&mount.path, &moved), copy }
        });
        Ok(Some(moves.collect()))
    }

    /// What the completion of file `file_id` asks for: its tail's check, and under a mount its
    /// export (cache mode: before the answer).
    pub fn completed(&self, file_id: InodeId) -> Completed {
        let g = self.settled();
        let st = &g.state;
        let file = st.complete_file(file_id);
        let under = st.path_of(file_id).and_then(|p| CvPath::parse(&p).ok()).and_then(|cv| {
            let m = st.mount_for(&cv)?;
            let (mode, url) = (m.mode, m.ufs_url.clone());
            let version = st.stat(&cv).ok()?.version;
            Some((cv, mode, url, version))
        });
        Completed { file, under }
    }

    /// Whether `path` exists.
    pub fn exists(&self, path: &CvPath) -> bool {
        self.settled().state.lookup(path).is_ok()
    }
}
