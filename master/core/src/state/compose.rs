//! Composing a file from others without copying a byte: the new file lists their blocks, in
//! order (S3's CompleteMultipartUpload through the gateway, whose parts are cv files). Blocks
//! need not be of one length: a file's block map carries each block's length. A block two files
//! list stays while either does (`shared.rs`), so the sources may be removed afterwards.

use std::collections::BTreeSet;

use super::types::{FileState, InodeId};
use super::{Applied, State, err};
use crate::error::{ErrorKind, Result};
use crate::path::CvPath;

impl State {
    /// Makes `path` file `file_id`, complete, listing the blocks of `sources` in order; a file
    /// at `path` is replaced in the same step. Checks everything before it changes anything.
    pub(super) fn compose(
        &mut self,
        path: &CvPath,
        sources: &[InodeId],
        file_id: InodeId,
        version: u64,
        mode: u32,
        mtime: u64,
    ) -> Result<Applied> {
        if sources.is_empty() {
            return err(ErrorKind::InvalidArgument, format!("{path}: compose names no source"));
        }
        if self.mount_for(path).is_some() {
            let why = format!("{path} is under a mount: its bytes go to the store, so they are copied");
            return err(ErrorKind::Unsupported, why);
        }
        let replaced = self.lookup(path).ok();
        let mut seen = BTreeSet::new();
        let mut parts = Vec::with_capacity(sources.len());
        for &s in sources {
            let f = self.file(s)?;
            let at = self.path_of(s).unwrap_or_else(|| format!("file {s}"));
            if f.state != FileState::Complete || self.is_held_back(s) {
                return err(ErrorKind::FileIncomplete, at);
            }
            if !seen.insert(s) || replaced == Some(s) {
                return err(ErrorKind::InvalidArgument, format!("{path}: {at} named twice, or composed over itself"));
            }
            let under_mount = CvPath::parse(&at).ok().is_some_and(|p| self.mount_for(&p).is_some());
            if under_mount || self.data.ufs_files.contains_key(&s) {
                return err(ErrorKind::Unsupported, format!("{at} is under a mount: its blocks belong to a store"));
            }
            let lens: Option<Vec<u64>> = f.blocks.iter().map(|b| self.data.blocks.get(b).map(|i| i.len)).collect();
            let Some(lens) = lens else { return err(ErrorKind::CorruptData, format!("{at}: a block has no entry")) };
            parts.push((s, f.blocks.clone(), f.length, lens.iter().sum::<u64>()));
        }
        if let Some((s, ..)) = parts.iter().find(|(_, _, len, sum)| len != sum) {
            return err(ErrorKind::CorruptData, format!("file {s}: its blocks do not add up to its length"));
        }
        // The new file replaces what `path` shows at once: it is complete in this same step.
        self.create(path, true, false, file_id, version, mode, mtime)?;
        let (mut blocks, mut length) = (Vec::new(), 0);
        for (s, b, len, _) in parts {
            self.share_blocks(s, file_id, &b);
            blocks.extend(b);
            length += len;
        }
        let f = self.file_mut(file_id)?;
        f.blocks = blocks;
        f.length = length;
        f.state = FileState::Complete;
        Ok(Applied::Created { file_id, version })
    }
}
