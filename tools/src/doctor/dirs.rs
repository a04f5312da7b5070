//! The worker's data directories and the master's journal directory: each exists or can be
//! made, takes a file, and (data) supports O_DIRECT with the store's alignment; the data
//! directories' file systems have room for the capacity configured on them, less what the
//! store already allocated there (a restarted worker keeps its files).

use super::direct_io::{self, DirectIo, STORE_ALIGN};
use super::{Check, Finding, Problem, human};
use crate::config::CvConfig;
use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Below this much free space the journal warns: snapshots are written beside the journal
/// before the old ones go.
const JOURNAL_MIN_FREE: u64 = 1 << 30;

/// The findings for the configured directories.
pub(super) fn check(cfg: &CvConfig) -> Vec<Finding> {
    let mut out = Vec::new();
    if let Some(w) = &cfg.worker {
        // Capacity to find room for, per file system (several data dirs may share one).
        let mut per_fs: BTreeMap<u64, Room> = BTreeMap::new();
        for d in &w.data_dirs {
            let Some(at) = usable_dir(Check::DataDir, &d.path, &mut out) else { continue };
            out.push(direct_io_finding(&d.path, &at));
            let Ok(meta) = std::fs::metadata(&at) else { continue };
            let room = per_fs.entry(meta.dev()).or_insert_with(|| Room { probe: at.clone(), ..Room::default() });
            room.paths.push(d.path.display().to_string());
            room.capacity += d.capacity.bytes();
            room.allocated += allocated(&d.path);
        }
        out.extend(per_fs.values().map(Room::finding));
    }
    if let Some(m) = &cfg.master
        && let Some(at) = usable_dir(Check::Journal, &m.journal_dir, &mut out)
    {
        let subject = m.journal_dir.display().to_string();
        out.push(match free_bytes(&at) {
            Ok(free) if free < JOURNAL_MIN_FREE => Finding::warn(
                Check::Journal,
                subject,
                Problem::NoSpace,
                format!("{} free: the journal and its snapshots need room to grow", human(free)),
            ),
            Ok(free) => Finding::ok(Check::Journal, subject, format!("{} free", human(free))),
            Err(e) => Finding::fail(Check::Journal, subject, Problem::NotWritable, format!("statvfs failed: {e}")),
        });
    }
    out
}

/// Checks that `path` is (or can be made) a writable directory; pushes the finding and gives
/// the directory to probe further: `path` itself, or its nearest existing ancestor when the
/// server will create it.
fn usable_dir(check: Check, path: &Path, out: &mut Vec<Finding>) -> Option<PathBuf> {
    let subject = path.display().to_string();
    let fail = |d: String| Finding::fail(check, subject.clone(), Problem::NotWritable, d);
    let (at, created) = match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => (path.to_path_buf(), false),
        Ok(_) => {
            out.push(fail("exists but is not a directory".into()));
            return None;
        }
        Err(_) => match path.ancestors().skip(1).find(|a| a.exists()) {
            Some(a) if a.is_dir() => (a.to_path_buf(), true),
            Some(a) => {
                out.push(fail(format!("cannot be created: {} is not a directory", a.display())));
                return None;
            }
            None => {
                out.push(fail("no part of the path exists".into()));
                return None;
            }
        },
    };
    if let Err(e) = write_probe(&at) {
        let d = match created {
            true => format!("does not exist and cannot be created in {}: {e}", at.display()),
            false => format!("not writable by this user (uid {}): {e}", nix::unistd::geteuid()),
        };
        out.push(fail(d));
        return None;
    }
    let note = match created {
        true => format!("does not exist yet; the server can create it (in {})", at.display()),
        false => "writable".into(),
    };
    out.push(Finding::ok(check, subject, note));
    Some(at)
}

/// Makes, writes, syncs and removes a temporary file in `dir`.
fn write_probe(dir: &Path) -> std::io::Result<()> {
    let mut f = tempfile::Builder::new().prefix(".cv-doctor-").tempfile_in(dir)?;
    f.write_all(b"cv doctor")?;
    f.as_file().sync_all()
}

fn direct_io_finding(path: &Path, at: &Path) -> Finding {
    let subject = path.display().to_string();
    let fail = |d: String| Finding::fail(Check::DataDir, subject.clone(), Problem::NoDirectIo, d);
    match direct_io::probe(at) {
        DirectIo::Works { logical_block } => Finding::ok(
            Check::DataDir,
            subject,
            format!("O_DIRECT works: logical block {logical_block} B, the store aligns to {STORE_ALIGN} B"),
        ),
        DirectIo::NoOpen(e) => fail(format!("O_DIRECT is not supported here (tmpfs? overlayfs?): {e}")),
        DirectIo::TooCoarse(e) => {
            fail(format!("no O_DIRECT write of up to {STORE_ALIGN} B is accepted (the store's alignment): {e}"))
        }
        DirectIo::Mismatch(d) => fail(format!("O_DIRECT I/O misbehaves: {d}")),
        DirectIo::NoFile(e) => fail(format!("cannot make a file for the O_DIRECT probe: {e}")),
    }
}

/// Data directories on one file system.
#[derive(Default)]
struct Room {
    probe: PathBuf,
    paths: Vec<String>,
    capacity: u64,
    allocated: u64,
}

impl Room {
    fn finding(&self) -> Finding {
        let subject = self.paths.join(", ");
        let needed = self.capacity.saturating_sub(self.allocated);
        let what = format!(
            "capacity {} needs {} more ({} allocated already)",
            human(self.capacity),
            human(needed),
            human(self.allocated)
        );
        match free_bytes(&self.probe) {
            Ok(free) if free < needed => {
                Finding::fail(Check::DataDir, subject, Problem::NoSpace, format!("{what}, only {} free", human(free)))
            }
            Ok(free) => Finding::ok(Check::DataDir, subject, format!("{what}, {} free", human(free))),
            Err(e) => Finding::fail(Check::DataDir, subject, Problem::NoSpace, format!("statvfs failed: {e}")),
        }
    }
}

/// Bytes an unprivileged writer may still use on the file system of `dir`.
fn free_bytes(dir: &Path) -> nix::Result<u64> {
    let s = nix::sys::statvfs::statvfs(dir)?;
    Ok(s.blocks_available().saturating_mul(s.fragment_size()))
}

/// Disk bytes already allocated to the store's files (`<dir>/shard-*/…`).
fn allocated(dir: &Path) -> u64 {
    let Ok(shards) = std::fs::read_dir(dir) else { return 0 };
    shards
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("shard-"))
        .filter_map(|e| std::fs::read_dir(e.path()).ok())
        .flat_map(|files| files.flatten())
        .filter_map(|f| f.metadata().ok())
        .filter(|m| m.is_file())
        .map(|m| m.blocks() * 512)
        .sum()
}
