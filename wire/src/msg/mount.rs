//! Mount table requests to the master.

use super::{KeyValue, check_count, check_path, check_str, no_limits};
use crate::error::WireError;
use crate::kinds::CheckLimits;
use crate::limits::Limits;
use rkyv::{Archive, Deserialize, Serialize};

/// Who is the source of truth under a mount.
#[derive(Archive, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug, PartialEq, Eq, Clone, Copy))]
pub enum MountMode {
    /// Object storage is the truth; cv caches reads and writes through.
    Cache,
    /// cv is the truth; files are exported to object storage in the background.
    Fs,
}

/// Mount an object-store location at a cv path. Its `Debug` names the options but shows none
/// of their values: they carry credentials, and a request may end up in a log or a panic.
#[derive(Archive, Serialize, Deserialize, Clone, PartialEq, Eq)]
pub struct Mount {
    /// OpenDAL-style URL, e.g. `s3://bucket/prefix`.
    pub ufs_url: String,
    /// Where it appears in cv's namespace.
    pub cv_path: String,
    /// Cache or fs mode.
    pub mode: MountMode,
    /// Service options (endpoint, region, credentials...).
    pub options: Vec<KeyValue>,
}

impl std::fmt::Debug for Mount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let keys: Vec<&str> = self.options.iter().map(|kv| kv.key.as_str()).collect();
        f.debug_struct("Mount")
            .field("ufs_url", &self.ufs_url)
            .field("cv_path", &self.cv_path)
            .field("mode", &self.mode)
            .field("options (values not shown)", &keys)
            .finish()
    }
}

/// Remove a mount.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct Unmount {
    /// The mount point.
    pub cv_path: String,
    /// Unmount an fs-mode mount even though some of its files are not yet in the store
    /// (they stay in cv, and are never exported). Without it such an unmount is refused.
    pub force: bool,
}

/// List the mount table.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct ListMounts {}

/// One mount as shown to clients: option values that are secrets are redacted.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct MountInfo {
    /// OpenDAL-style URL.
    pub ufs_url: String,
    /// Mount point.
    pub cv_path: String,
    /// Cache or fs mode.
    pub mode: MountMode,
    /// Options with secrets replaced by `***`.
    pub options: Vec<KeyValue>,
}

/// Reply to [`ListMounts`].
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct ListMountsOk {
    /// The mount table, sorted by mount point.
    pub mounts: Vec<MountInfo>,
}

/// A worker asks for one mount's full configuration, credentials included,
/// to fetch blocks. Only node identities get an answer.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct GetMount {
    /// The mount point.
    pub cv_path: String,
}

/// Reply to [`GetMount`].
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct GetMountOk {
    /// The mount, options unredacted.
    pub mount: Mount,
}

/// Forget the cached listings and object versions under a mount (or a
/// directory in it), so the next use reads them from the store again.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct SyncMount {
    /// A mount point or a path under one.
    pub cv_path: String,
}

/// Drop the cached blocks of a file or tree, keeping its metadata; the next
/// read fetches them from object storage again.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct Free {
    /// A file or directory under a mount.
    pub path: String,
}

/// Reply to [`Free`].
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct FreeOk {
    /// Files whose blocks were dropped.
    pub files: u64,
    /// Blocks dropped.
    pub blocks: u64,
    /// Files skipped because cv holds their only copy (fs mode, not yet exported).
    pub skipped: u64,
}

impl CheckLimits for ArchivedGetMount {
    fn check_limits(&self, l: &Limits) -> Result<(), WireError> {
        check_path(&self.cv_path, l, "get_mount.cv_path")
    }
}

impl CheckLimits for ArchivedGetMountOk {
    fn check_limits(&self, l: &Limits) -> Result<(), WireError> {
        self.mount.check_limits(l)
    }
}

impl CheckLimits for ArchivedSyncMount {
    fn check_limits(&self, l: &Limits) -> Result<(), WireError> {
        check_path(&self.cv_path, l, "sync_mount.cv_path")
    }
}

impl CheckLimits for ArchivedFree {
    fn check_limits(&self, l: &Limits) -> Result<(), WireError> {
        check_path(&self.path, l, "free.path")
    }
}

impl CheckLimits for ArchivedMount {
    fn check_limits(&self, l: &Limits) -> Result<(), WireError> {
        check_str(&self.ufs_url, l, "mount.ufs_url")?;
        check_path(&self.cv_path, l, "mount.cv_path")?;
        check_count(self.options.len(), l, "mount.options")?;
        self.options.iter().try_for_each(|o| o.check(l))
    }
}

impl CheckLimits for ArchivedUnmount {
    fn check_limits(&self, l: &Limits) -> Result<(), WireError> {
        check_path(&self.cv_path, l, "unmount.cv_path")
    }
}

impl CheckLimits for ArchivedListMountsOk {
    fn check_limits(&self, l: &Limits) -> Result<(), WireError> {
        check_count(self.mounts.len(), l, "list_mounts_ok.mounts")?;
        self.mounts.iter().try_for_each(|m| {
            check_str(&m.ufs_url, l, "mount.ufs_url")?;
            check_path(&m.cv_path, l, "mount.cv_path")?;
            check_count(m.options.len(), l, "mount.options")?;
            m.options.iter().try_for_each(|o| o.check(l))
        })
    }
}

no_limits!(ArchivedListMounts, ArchivedFreeOk);

#[cfg(test)]
mod debug_tests {
    use super::*;

    #[test]
    fn debug_output_never_shows_an_option_value() {
        let m = Mount {
            ufs_url: "s3://b/p".into(),
            cv_path: "/m".into(),
            mode: MountMode::Cache,
            options: vec![KeyValue { key: "secret_access_key".into(), value: "hunter2".into() }],
        };
        for text in [format!("{m:?}"), format!("{:?}", GetMountOk { mount: m.clone() })] {
            assert!(text.contains("secret_access_key") && !text.contains("hunter2"), "{text}");
        }
    }
}
