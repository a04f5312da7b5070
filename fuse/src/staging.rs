//! Which files are staged, and when their stages start, publish and end.
//! A stage lives while any handle of its inode is open (every handle reads
//! and writes it, so they all see the same bytes), and is published by a
//! writer's flush, fsync and release, and at once by a truncate that comes
//! with no writer open.

use crate::stage::{Stage, Start};
use crate::volume::{Handle, Volume, lock};
use fuser::Errno;
use std::sync::Arc;

impl Volume {
    /// The stage of `ino`, if its content is staged.
    pub(crate) fn stage(&self, ino: u64) -> Option<Arc<Stage>> {
        lock(&self.stages).get(&ino).cloned()
    }

    /// Stages `ino` (or returns its stage if it has one), its content
    /// starting as `start` says.
    pub(crate) async fn begin_stage(&self, ino: u64, start: Start) -> Result<Arc<Stage>, Errno> {
        // One start at a time, so two handles never copy the same file twice.
        let _one = self.stage_start.lock().await;
        if let Some(s) = self.stage(ino) {
            return Ok(s);
        }
        let path = self.path_of(ino)?;
        let local = self.staging_dir.join(format!("{ino}-{}", crate::stage::next_seq()));
        let stage = Arc::new(Stage::begin(&self.client, &path, local, start).await?);
        lock(&self.stages).insert(ino, stage.clone());
        tracing::debug!(ino, path, ?start, "staged");
        Ok(stage)
    }

    /// Publishes the stage of `ino` if it changed; after this returns the
    /// new version is complete. A file unlinked since is not brought back.
    pub(crate) async fn publish(&self, ino: u64) -> Result<(), Errno> {
        let Some(stage) = self.stage(ino) else { return Ok(()) };
        if !self.inodes().linked(ino) {
            stage.discard().await;
            return Ok(());
        }
        let path = self.path_of(ino)?;
        if stage.publish(&self.client, &path).await?.is_some() {
            // The kernel's pages are right (every byte came through it), but
            // a later open compares versions: this is a new one.
            self.content_changed(ino);
        }
        Ok(())
    }

    /// Ends the stage of `ino` when no handle of it is open and nothing is
    /// left to publish.
    pub(crate) async fn end_stage_if_unused(&self, ino: u64) {
        let Some(stage) = self.stage(ino) else { return };
        if stage.is_dirty().await && self.inodes().linked(ino) {
            return;
        }
        // Counted under the stages lock: an open takes it too while it
        // decides whether its handle reads the stage (see `open_staged`).
        let mut stages = lock(&self.stages);
        if self.open_handles(ino, false) == 0 && stages.get(&ino).is_some_and(|s| Arc::ptr_eq(s, &stage)) {
            stages.remove(&ino);
        }
    }

    /// Adds the handle `make` builds if `ino` is staged now (the stage then
    /// lives as long as the handle).
    pub(crate) fn open_staged(&self, ino: u64, make: impl FnOnce() -> Handle) -> Option<u64> {
        let stages = lock(&self.stages);
        stages.contains_key(&ino).then(|| self.add_handle(make()))
    }

    /// Handles of `ino` open now (only writers when `writers_only`).
    pub(crate) fn open_handles(&self, ino: u64, writers_only: bool) -> usize {
        lock(&self.handles)
            .values()
            .filter(|h| match h {
                Handle::Write { ino: i, .. } => *i == ino,
                Handle::Read { ino: i, .. } => !writers_only && *i == ino,
                Handle::Dir(_) => false,
            })
            .count()
    }
}
