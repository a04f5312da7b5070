//! Mounts: a cv directory mapped to an object-store location, in cache or fs mode.

use super::{MasterCore, Pending, cv};
use crate::error::{Error, ErrorKind, Result};
use crate::path::CvPath;
use crate::state::{MountEntry, MountMode, Mutation};

impl MasterCore {
    pub fn begin_mount(
        &self,
        path: &CvPath,
        ufs_url: &str,
        mode: MountMode,
        options: Vec<(String, String)>,
    ) -> Result<Pending<()>> {
        let (_, t) = self.submit(|_, _| {
            Ok(Mutation::Mount {
                path: path.as_str().to_owned(),
                ufs_url: ufs_url.to_owned(),
                mode,
                options: options.into(),
            })
        })?;
        Ok(Self::done((), t))
    }

    pub fn mount(&self, path: &str, ufs_url: &str, mode: MountMode, options: Vec<(String, String)>) -> Result<()> {
        self.begin_mount(&cv(path)?, ufs_url, mode, options)?.wait()
    }

    /// Removes the mount at `path`. An fs-mode mount with files not yet exported is refused
    /// (`NotEmpty`, naming how many) unless `force`: they would never reach the store.
    /// The copies of the mount's objects go with it (their tails too).
    pub fn begin_unmount(&self, path: &CvPath, force: bool) -> Result<Pending<()>> {
        let mut copies = Vec::new();
        let (_, t) = self.submit(|g, _| {
            let unexported = if force { 0 } else { g.state.unexported_under(path) };
            if unexported > 0 {
                return Err(Error::new(
                    ErrorKind::NotEmpty,
                    format!(
                        "mount at {path}: {unexported} file(s) not yet exported to the store; wait for the \
                         export (cvctl report shows the backlog) or unmount with force (they stay in cv only)"
                    ),
                ));
            }
            // The same copies the state's unmount removes: those of this mount's objects.
            let copies_here = g.state.object_copies_under(path).into_iter();
            copies = copies_here.filter(|c| c.object.mount == path.as_str()).map(|c| c.file_id).collect();
            Ok(Mutation::Unmount { path: path.as_str().to_owned() })
        })?;
        let mut tails = super::lock(&self.tails);
        for id in copies {
            tails.remove(id);
        }
        drop(tails);
        Ok(Self::done((), t))
    }

    pub fn unmount(&self, path: &str, force: bool) -> Result<()> {
        self.begin_unmount(&cv(path)?, force)?.wait()
    }

    pub fn list_mounts(&self) -> Result<Vec<MountEntry>> {
        self.read(|st| Ok(st.mounts()))?.wait()
    }
}
