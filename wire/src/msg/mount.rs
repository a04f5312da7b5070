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

/// Mount an object-store location at a cv path.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
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

/// Remove a mount.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct Unmount {
    /// The mount point.
    pub cv_path: String,
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

no_limits!(ArchivedListMounts);
