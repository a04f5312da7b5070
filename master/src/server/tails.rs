//! The master's `tails` file (master/core/FORMAT.md, "Tails"): the tail cache and when each
//! path under a cache-mode mount was last checked at its store, saved every `SAVE_EVERY` when
//! they changed and at shutdown, and taken back at start. Without it a restarted master
//! HEADs every object again and reads every footer again, round trips of 5–24 ms each.
//!
//! It is a cache, so a lost or damaged file costs only those round trips: a crash loses what
//! changed since the last save, a damaged record ends the read (what came before it is used),
//! and a tail is taken back only while its file is still at the version saved.

use cv_master_core::MasterCore;
use cv_master_core::tail_file::{self, TailRecord};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::watch;

/// How often the file is written again when the cache changed. Each save rewrites the whole
/// cache (up to its budget, 1 GiB by default), so not every minute under churn; a crash loses
/// at most this much of the cache's changes, which cost only round trips to the stores.
const SAVE_EVERY: Duration = Duration::from_secs(300);

/// The file in the master's journal directory.
pub(super) fn path(journal_dir: &Path) -> PathBuf {
    journal_dir.join("tails")
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

/// Takes back what `file` holds. Blocking (a read of up to the tail budget): called once at
/// start, before the master serves.
pub(super) fn load(file: &Path, core: &MasterCore) {
    let bytes = match std::fs::read(file) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
        Err(e) => {
            tracing::warn!(file = %file.display(), error = %e, "tails file unreadable; tails are read from the stores again");
            return;
        }
    };
    let decoded = match tail_file::decode(&bytes) {
        Ok(d) => d,
        Err(e) => {
            tracing::warn!(file = %file.display(), error = %e, "tails file not used");
            return;
        }
    };
    if let Some(at) = decoded.damaged_at {
        tracing::warn!(file = %file.display(), at, "tails file damaged or cut short; the records before it are used");
    }
    let now = now_ms();
    let mut checked = 0;
    let mut tails = Vec::with_capacity(decoded.records.len());
    for r in decoded.records {
        match r {
            // A check dated in the future (the clock went back) is not trusted.
            TailRecord::Fresh { path, checked_at_ms } if checked_at_ms <= now => {
                core.restore_check(path, Duration::from_millis(now - checked_at_ms));
                checked += 1;
            }
            TailRecord::Fresh { .. } => {}
            tail => tails.push(tail),
        }
    }
    let saved = tails.len();
    let taken = core.restore_tails(tails);
    tracing::info!(file = %file.display(), tails = taken, stale = saved - taken, checked, "tails file taken back");
}

/// Writes the file whole: to `tails.tmp`, fsynced, renamed over `tails`, directory fsynced.
pub(super) fn save(file: &Path, core: &MasterCore) -> std::io::Result<usize> {
    let mut records = core.saved_tails();
    let now = now_ms();
    records.extend(
        core.check_ages()
            .into_iter()
            .map(|(path, age)| TailRecord::Fresh { path, checked_at_ms: now.saturating_sub(age.as_millis() as u64) }),
    );
    let tmp = file.with_extension("tmp");
    // Mode 0600 like every file beside the journal: tails are the files' own bytes.
    let create = || {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new().create(true).write(true).truncate(true).mode(0o600).open(&tmp)
    };
    let written = create().and_then(|f| {
        let mut w = std::io::BufWriter::new(f);
        tail_file::write(&mut w, &records)?;
        w.into_inner().map_err(std::io::IntoInnerError::into_error)?.sync_data()
    });
    if let Err(e) = written {
        // A half-written file would keep the space from the journal beside it (a full disk).
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    std::fs::rename(&tmp, file)?;
    if let Some(dir) = file.parent() {
        std::fs::File::open(dir)?.sync_all()?;
    }
    Ok(records.len())
}

/// A change count of what the file holds: the cache's inserts and evictions and the checks.
fn generation(core: &MasterCore) -> (u64, u64, u64) {
    let s = core.tail_stats();
    (s.inserts, s.evictions, core.checks_generation())
}

/// Saves the file every `SAVE_EVERY` if it changed, until stopped; then once more.
pub(super) async fn keep(file: PathBuf, core: Arc<MasterCore>, mut stopped: watch::Receiver<bool>) {
    let mut saved = generation(&core);
    let mut every = tokio::time::interval(SAVE_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    every.tick().await;
    loop {
        let stopping = tokio::select! {
            _ = every.tick() => false,
            _ = stopped.changed() => true,
        };
        let now = generation(&core);
        if now != saved || stopping {
            let (f, c) = (file.clone(), core.clone());
            match tokio::task::spawn_blocking(move || save(&f, &c)).await {
                Ok(Ok(n)) => {
                    saved = now;
                    tracing::debug!(file = %file.display(), records = n, "tails file saved");
                }
                Ok(Err(e)) => tracing::warn!(file = %file.display(), error = %e, "tails file not saved"),
                Err(e) => tracing::warn!(error = %e, "tails save task failed"),
            }
        }
        if stopping {
            return;
        }
    }
}
