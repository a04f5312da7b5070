//! Mount options, typed and checked before anything is mounted.

use crate::error::{FuseError, FuseErrorKind};
use std::path::PathBuf;
use std::time::Duration;

/// How to mount.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MountOptions {
    /// The cv directory shown at the mount point (absolute, e.g. `/` or `/warehouse`).
    pub root: String,
    /// How long the kernel may trust file attributes without asking again.
    pub attr_ttl: Duration,
    /// How long the kernel may trust a name → file lookup (and a negative one).
    pub entry_ttl: Duration,
    /// Let every user in (`allow_other`); the kernel then checks permission bits.
    pub allow_other: bool,
    /// Mount read-only (`ro`): the kernel refuses every change with EROFS, and, since no
    /// atime can change, keeps a file's attributes across its READs (a read-write mount's
    /// kernel forgets the atime after each, so each `fstat` after a read asks the mount).
    pub read_only: bool,
    /// How long a read-only mount answers an open, an opendir or a lookup from what the
    /// master said about that path before (zero, the default: it asks every time). Opens may
    /// then see a version up to this old; see `crate::recent`.
    pub open_ttl: Duration,
    /// Name shown in `/proc/mounts`.
    pub fs_name: String,
    /// Where the mount makes its directory of staged files (absolute; it must
    /// exist). `None`: the system's temporary directory. The mount's own
    /// directory in it is removed at unmount.
    pub staging_dir: Option<PathBuf>,
}

impl Default for MountOptions {
    fn default() -> Self {
        MountOptions {
            root: "/".into(),
            attr_ttl: Duration::from_secs(1),
            entry_ttl: Duration::from_secs(1),
            allow_other: false,
            read_only: false,
            open_ttl: Duration::ZERO,
            fs_name: "cv".into(),
            staging_dir: None,
        }
    }
}

impl MountOptions {
    /// Checks the values, naming the one that is wrong.
    pub fn validate(&self) -> Result<(), FuseError> {
        let bad = |what: &str| Err(FuseError::new(FuseErrorKind::Config, what.to_string()));
        if !self.root.starts_with('/') {
            return bad("root must be an absolute cv path");
        }
        if self.attr_ttl > Duration::from_secs(3600) || self.entry_ttl > Duration::from_secs(3600) {
            return bad("attr_ttl and entry_ttl must be at most 1h");
        }
        if self.open_ttl > Duration::from_secs(3600) {
            return bad("open_ttl must be at most 1h");
        }
        if !self.open_ttl.is_zero() && !self.read_only {
            return bad("open_ttl needs read_only: a mount that writes must see its own changes at once");
        }
        if self.fs_name.is_empty() || self.fs_name.contains([',', ' ', '\n']) {
            return bad("fs_name must be non-empty without commas or spaces");
        }
        if let Some(dir) = &self.staging_dir {
            if !dir.is_absolute() {
                return bad("staging_dir must be an absolute path");
            }
            if !dir.is_dir() {
                return bad("staging_dir must be an existing directory");
            }
        }
        Ok(())
    }

    /// The root without a trailing slash, except for `/` itself.
    pub(crate) fn normalized_root(&self) -> String {
        let r = self.root.trim_end_matches('/');
        if r.is_empty() { "/".into() } else { r.into() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validate_names_the_bad_value() {
        assert!(MountOptions::default().validate().is_ok());
        let rel = MountOptions { root: "data".into(), ..MountOptions::default() };
        assert!(rel.validate().unwrap_err().to_string().contains("root"));
        let ttl = MountOptions { attr_ttl: Duration::from_secs(7200), ..MountOptions::default() };
        assert!(ttl.validate().unwrap_err().to_string().contains("attr_ttl"));
        let open = MountOptions { open_ttl: Duration::from_secs(1), ..MountOptions::default() };
        assert!(open.validate().unwrap_err().to_string().contains("read_only"));
        let open = MountOptions { open_ttl: Duration::from_secs(1), read_only: true, ..MountOptions::default() };
        assert!(open.validate().is_ok());
        let name = MountOptions { fs_name: "a,b".into(), ..MountOptions::default() };
        assert_eq!(name.validate().unwrap_err().kind(), FuseErrorKind::Config);
        let rel = MountOptions { staging_dir: Some("stage".into()), ..MountOptions::default() };
        assert!(rel.validate().unwrap_err().to_string().contains("staging_dir"));
        let missing = MountOptions { staging_dir: Some("/nonexistent/cv-stage".into()), ..MountOptions::default() };
        assert!(missing.validate().unwrap_err().to_string().contains("staging_dir"));
        let tmp = MountOptions { staging_dir: Some(std::env::temp_dir()), ..MountOptions::default() };
        assert!(tmp.validate().is_ok());
    }

    #[test]
    fn root_is_normalized() {
        let o = |r: &str| MountOptions { root: r.into(), ..MountOptions::default() }.normalized_root();
        assert_eq!(o("/"), "/");
        assert_eq!(o("///"), "/");
        assert_eq!(o("/a/b/"), "/a/b");
    }
}
