//! Earliest-deadline index over the connections' `poll_timeout()`s.

use std::collections::BTreeSet;
use std::time::Instant;

use quinn_proto::ConnectionHandle;

use super::conn::ConnShared;

/// Deadlines ordered by time; each connection has at most one entry (mirrored in its `timer`).
#[derive(Debug, Default)]
pub(crate) struct Timers {
    set: BTreeSet<(Instant, usize)>,
}

impl Timers {
    /// Replaces the connection's registered deadline.
    pub(crate) fn update(&mut self, conn: &ConnShared, deadline: Option<Instant>) {
        let old = conn.timer.replace(deadline);
        if old == deadline {
            return;
        }
        if let Some(t) = old {
            self.set.remove(&(t, conn.handle.0));
        }
        if let Some(t) = deadline {
            self.set.insert((t, conn.handle.0));
        }
    }

    pub(crate) fn next(&self) -> Option<Instant> {
        self.set.first().map(|(t, _)| *t)
    }

    /// Removes and returns the connections whose deadline is at or before `now`.
    /// The caller clears their `timer` mirror.
    pub(crate) fn pop_due(&mut self, now: Instant) -> Vec<ConnectionHandle> {
        let mut due = Vec::new();
        while let Some(&(t, h)) = self.set.first() {
            if t > now {
                break;
            }
            self.set.pop_first();
            due.push(ConnectionHandle(h));
        }
        due
    }
}
