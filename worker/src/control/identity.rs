//! The worker's id, kept beside its data: a restarted worker registers under
//! the id its blocks were placed with. The file is one line, the decimal id,
//! written whole (temporary file, fsync, rename) so a crash leaves the old id
//! or the new one.

use std::io::Write;
use std::path::Path;

/// The id stored at `path`, if there is a readable one.
pub(crate) fn load(path: &Path) -> Option<u64> {
    let text = std::fs::read_to_string(path).ok()?;
    match text.trim().parse() {
        Ok(id) => Some(id),
        Err(_) => {
            tracing::warn!(path = %path.display(), "worker id file unreadable; registering as new");
            None
        }
    }
}

/// Stores `id` at `path`.
pub(crate) fn store(path: &Path, id: u64) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    let mut f = std::fs::File::create(&tmp)?;
    writeln!(f, "{id}")?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)?;
    if let Some(dir) = path.parent() {
        std::fs::File::open(dir)?.sync_all()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn round_trip_and_garbage() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("worker-id");
        assert_eq!(super::load(&p), None);
        super::store(&p, 42).unwrap();
        assert_eq!(super::load(&p), Some(42));
        std::fs::write(&p, "not a number").unwrap();
        assert_eq!(super::load(&p), None);
    }
}
