//! Mounting and unmounting.

use crate::attr::Owner;
use crate::config::MountOptions;
use crate::error::{FuseError, FuseErrorKind};
use crate::fs::CvFs;
use crate::volume::Volume;
use cv_client::{Client, FileKind};
use fuser::BackgroundSession;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A mounted cv; dropping it unmounts.
#[derive(Debug)]
pub struct Mounted {
    session: Option<BackgroundSession>,
    mountpoint: PathBuf,
    /// The staged files' directory; removed after the session ends (field order).
    _staging: tempfile::TempDir,
    /// The kernel's requests, counted for `/metrics`.
    stats: Arc<crate::stats::FuseStats>,
}

/// Mounts the cv directory `opts.root` at `mountpoint`. Requests are served
/// on the current tokio runtime until [`Mounted::unmount`], a drop, or an
/// external `umount`.
pub async fn mount(client: Client, mountpoint: &Path, opts: MountOptions) -> Result<Mounted, FuseError> {
    opts.validate()?;
    let root = opts.normalized_root();
    let st = client
        .stat(&root)
        .await
        .map_err(|e| FuseError::new(FuseErrorKind::Root, format!("cannot stat cv root {root}")).with_source(e))?;
    if st.kind != FileKind::Dir {
        return Err(FuseError::new(FuseErrorKind::Root, format!("cv root {root} is not a directory")));
    }
    let owner = process_owner()?;
    let base = opts.staging_dir.clone().unwrap_or_else(std::env::temp_dir);
    let staging = tempfile::Builder::new().prefix("cv-fuse-staging-").tempdir_in(&base).map_err(|e| {
        FuseError::new(FuseErrorKind::Config, format!("staging_dir: cannot make a directory in {}", base.display()))
            .with_source(e)
    })?;
    let config = crate::session::session_config(&opts);
    let stats = Arc::new(crate::stats::FuseStats::default());
    let vol = Arc::new(Volume::new(client, opts, owner, staging.path().to_path_buf(), stats.clone()));
    let fs = CvFs::new(vol, tokio::runtime::Handle::current(), stats.clone());
    let at = mountpoint.to_path_buf();
    // Mounting waits for the kernel's INIT exchange: blocking, so off the runtime.
    let session = tokio::task::spawn_blocking(move || fuser::spawn_mount(fs, &at, &config))
        .await
        .map_err(|e| FuseError::new(FuseErrorKind::Mount, format!("mount task: {e}")))?
        .map_err(|e| FuseError::new(FuseErrorKind::Mount, format!("mount {}", mountpoint.display())).with_source(e))?;
    Ok(Mounted { session: Some(session), mountpoint: mountpoint.to_path_buf(), _staging: staging, stats })
}

/// Owner shown on every file: whoever runs the mount.
fn process_owner() -> Result<Owner, FuseError> {
    let m = std::fs::metadata("/proc/self")
        .map_err(|e| FuseError::new(FuseErrorKind::Mount, "cannot read /proc/self").with_source(e))?;
    Ok(Owner { uid: m.uid(), gid: m.gid() })
}

impl Mounted {
    /// The mount's request counters (shared: they keep counting after this call).
    pub fn stats(&self) -> Arc<crate::stats::FuseStats> {
        self.stats.clone()
    }

    /// Where it is mounted.
    pub fn mountpoint(&self) -> &Path {
        &self.mountpoint
    }

    /// Whether the session ended (unmounted from outside, e.g. `umount`).
    pub fn is_finished(&self) -> bool {
        self.session.as_ref().is_none_or(|s| s.guard.is_finished())
    }

    /// Unmounts (unless already unmounted from outside) and waits for the
    /// session to end.
    pub fn unmount(mut self) -> Result<(), FuseError> {
        let fail =
            |e| FuseError::new(FuseErrorKind::Mount, format!("unmount {}", self.mountpoint.display())).with_source(e);
        match self.session.take() {
            Some(s) if s.guard.is_finished() => s.join().map_err(fail),
            Some(s) => s.umount_and_join().map_err(fail),
            None => Ok(()),
        }
    }
}
