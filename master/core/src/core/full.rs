//! A full journal disk: what the core applied past the durable state failed for sure (the
//! journal cut it off), so the core goes back to that state and serves reads from it, and
//! refuses writes until a probe finds room (`journal/writer.rs` does the I/O).

use std::sync::MutexGuard;
use std::sync::atomic::Ordering;

use super::{Inner, MasterCore, lock, replicas};
use crate::error::{Error, Result};
use crate::state::InodeId;

/// How often a full journal disk is asked again whether it has room, at most: a probe
/// writes up to a batch's size, which a nearly full disk may take most of before it fails.
pub(super) const PROBE_EVERY_MS: u64 = 1_000;

impl MasterCore {
    /// The state lock, for a look that does not wait for durability: past a failed write
    /// first back to the durable state, so no look sees what failed.
    pub(super) fn settled(&self) -> MutexGuard<'_, Inner> {
        let mut g = lock(&self.inner);
        if self.journal.needs_rollback()
            && let Err(e) = self.roll_back(&mut g)
        {
            // The journal is poisoned by now: requests are refused.
            tracing::error!(error = %e, "going back to the durable state failed");
        }
        g
    }

    /// While the journal's disk is full: the `NoSpace` error writes are refused with.
    pub fn journal_full(&self) -> Option<Error> {
        self.journal.no_space()
    }

    /// Records this core applied failed for sure (their write ran out of space and was cut
    /// off the journal): they never happened. Their replies all failed or wait on tickets
    /// that fail, so the core goes back to the durable state, read back as at startup, and
    /// drops what it kept beside the state for them.
    pub(super) fn roll_back(&self, g: &mut Inner) -> Result<()> {
        let rec = self.journal.durable_state()?;
        let undone = g.last_seq.saturating_sub(rec.last_seq);
        g.state = rec.state;
        g.last_seq = rec.last_seq;
        g.ring_epoch = u64::MAX;
        g.since_snapshot = g.since_snapshot.saturating_sub(undone);
        // A tail of a completion that failed would be taken for the next file given its
        // (file id, version): those come from the state's counters, which went back too.
        let mut tails = lock(&self.tails);
        for (file_id, version, _, t) in tails.dump() {
            let fits = g
                .state
                .complete_file(file_id)
                .is_some_and(|(v, len)| v == version && t.offset.checked_add(t.bytes.len() as u64) == Some(len));
            if !fits {
                tails.remove(file_id);
            }
        }
        drop(tails);
        let now = self.clock.now_ms();
        let mut writing = lock(&self.writing);
        let being_written: std::collections::HashSet<InodeId> = g.state.writing_files().collect();
        writing.retain(|id, _| being_written.contains(id));
        // A completion that failed leaves its file being written again: its lease runs anew.
        for id in being_written {
            writing.entry(id).or_insert(now);
        }
        drop(writing);
        *lock(&self.copies) = replicas::Copies::default();
        tracing::warn!(
            undone,
            last_seq = g.last_seq,
            "journal write failed for lack of space: back to the durable state"
        );
        Ok(())
    }

    /// A full journal disk is asked again whether it has room (outside the state lock, at
    /// most once a second); `NoSpace` while it has none. Every write asks first;
    /// the server's tick asks too, so the master notices room while nobody writes. Once
    /// there is room, every worker gets a heartbeat timeout from then, as after a restart:
    /// its heartbeats were refused meanwhile.
    pub fn room(&self) -> Result<()> {
        let Some(full) = self.journal.no_space() else { return Ok(()) };
        let now = self.clock.now_ms();
        let last = self.probed_ms.load(Ordering::Acquire);
        if last != 0 && now.saturating_sub(last) < PROBE_EVERY_MS {
            return Err(full);
        }
        match self.journal.probe_space() {
            Ok(()) => {
                self.probed_ms.store(0, Ordering::Release);
                self.started_ms.fetch_max(now, Ordering::AcqRel);
                Ok(())
            }
            Err(e) => {
                self.probed_ms.store(now.max(1), Ordering::Release);
                Err(e)
            }
        }
    }
}
