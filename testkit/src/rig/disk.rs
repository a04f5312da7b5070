//! Small disks for hosts: tmpfs mounts of a fixed size (O_DIRECT opens work on tmpfs on this kernel).

use std::path::Path;

use super::error::RigError;
use super::sys;

/// Mounts a tmpfs of `bytes` at `dir` (created).
pub(crate) fn mount_tmpfs(dir: &Path, bytes: u64) -> Result<(), RigError> {
    std::fs::create_dir_all(dir).map_err(|e| RigError::io(format!("create {}", dir.display()), e))?;
    let size = format!("size={bytes}");
    sys::run(
        "mount",
        &["-t".as_ref(), "tmpfs".as_ref(), "-o".as_ref(), size.as_ref(), "tmpfs".as_ref(), dir.as_os_str()],
    )
    .map(drop)
}

/// Unmounts every mount at or under `dir`, deepest first; a busy one lazily.
pub(crate) fn unmount_under(dir: &Path) -> Result<(), RigError> {
    let mut first_err = None;
    for m in sys::mounts_under(dir) {
        if sys::run("umount", &[&m]).is_err()
            && let Err(e) = sys::run("umount", &["-l", &m])
        {
            first_err.get_or_insert(e);
        }
    }
    first_err.map_or(Ok(()), Err)
}
