//! What the state machine, the `Log` impl and the leadership tasks share: whether this node
//! leads and under which leadership its core builds, what is committed, and the reads waiting
//! for commit and for proof of leadership.
//!
//! Lock order: `transition` (taken only by the state machine and the leadership tasks, never
//! under the core's lock) → the core's state lock → `glue` (small data, held briefly, never
//! while calling the core). The core calls `append` and `wait_for` under its state lock, so
//! those take only `glue`.

use std::sync::atomic::AtomicBool;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use cv_master_core::journal::WriterStats;
use cv_master_core::{Error, ErrorKind, Result};
use openraft::CommittedLeaderId;

pub(crate) type LeaderId = CommittedLeaderId<u64>;

/// How a read proves this node still leads (master/HA.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadMode {
    /// A quorum round every heartbeat interval renews a lease shorter than the election
    /// timeout; a read inside the lease answers at once.
    Lease,
    /// Every read waits for a quorum round that started after it (ReadIndex); rounds are
    /// shared by the reads waiting when they start.
    ReadIndex,
}

#[derive(Debug)]
struct Waiter {
    seq: u64,
    since: Instant,
    tx: flume::Sender<Result<u64>>,
}

#[derive(Debug, Default)]
pub(crate) struct Glue {
    /// The term the metrics last said this node leads.
    pub leader_of: Option<u64>,
    /// The last leadership of this node whose Blank entry was applied here.
    pub blank_applied: Option<LeaderId>,
    /// The leadership the core builds records under: set only while the core leads.
    pub building: Option<LeaderId>,
    /// The leadership whose records the core applied ahead of commit (cleared by a reset).
    pub speculating: Option<LeaderId>,
    /// The last record seq committed and applied here (the core may be ahead on a leader).
    pub committed_seq: u64,
    /// The leader the metrics name, with its address, for `NotLeader` answers.
    pub leader: Option<(u64, String)>,
    /// The term in which a failed quorum round took the work away from this leader: only a
    /// round that succeeds gives it back, not the metrics that still say it leads.
    pub cut_off: Option<u64>,
    /// Leadership proven by a quorum round: lease end, and the start of the last round.
    lease_until: Option<Instant>,
    confirmed_since: Option<Instant>,
    waiters: Vec<Waiter>,
}

#[derive(Debug)]
pub(crate) struct Shared {
    pub me: u64,
    pub read_mode: ReadMode,
    pub lease: Duration,
    pub transition: Mutex<()>,
    glue: Mutex<Glue>,
    pub failed: AtomicBool,
    /// Why this master must not lead now, if it must not.
    pub fitness: crate::fitness::Fitness,
    pub stats: WriterStats,
    /// Wakes the read-round task (ReadIndex mode) when a read starts waiting.
    pub round_wanted: tokio::sync::Notify,
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

pub(crate) fn not_leader(leader: Option<&(u64, String)>) -> Error {
    match leader {
        Some((id, addr)) => {
            Error::new(ErrorKind::NotLeader, format!("this master does not lead; master {id} at {addr} does"))
        }
        None => Error::new(ErrorKind::NotLeader, "this master does not lead and no leader is known"),
    }
}

impl Shared {
    pub fn new(me: u64, read_mode: ReadMode, lease: Duration, committed_seq: u64) -> Self {
        Self {
            me,
            read_mode,
            lease,
            transition: Mutex::new(()),
            glue: Mutex::new(Glue { committed_seq, ..Glue::default() }),
            failed: AtomicBool::new(false),
            fitness: Default::default(),
            stats: WriterStats::default(),
            round_wanted: tokio::sync::Notify::new(),
        }
    }

    pub fn glue(&self) -> MutexGuard<'_, Glue> {
        lock(&self.glue)
    }

    /// A ticket for a read that observed the state up to `seq`.
    pub fn wait_for(&self, seq: u64) -> cv_master_core::journal::Ticket {
        use cv_master_core::journal::Ticket;
        let now = Instant::now();
        let mut g = self.glue();
        if g.building.is_none() {
            let (tx, rx) = flume::bounded(1);
            let _ = tx.send(Err(not_leader(g.leader.as_ref())));
            return Ticket::Pending(rx);
        }
        if g.committed_seq >= seq && self.read_mode == ReadMode::Lease && g.lease_until.is_some_and(|t| t > now) {
            return Ticket::Ready(seq);
        }
        let (tx, rx) = flume::bounded(1);
        g.waiters.push(Waiter { seq, since: now, tx });
        drop(g);
        if self.read_mode == ReadMode::ReadIndex {
            self.round_wanted.notify_one();
        }
        Ticket::Pending(rx)
    }

    /// Whether a quorum round proved leadership within the lease.
    pub fn lease_valid(&self) -> bool {
        self.glue().lease_until.is_some_and(|t| t > Instant::now())
    }

    /// Whether reads are waiting for a quorum round.
    pub fn reads_waiting(&self) -> bool {
        !self.glue().waiters.is_empty()
    }

    /// A quorum round that started at `since` confirmed this node leads (and so may take
    /// work again if a failed one took it away).
    pub fn confirmed(&self, since: Instant) {
        let mut g = self.glue();
        g.lease_until = Some(since + self.lease);
        g.confirmed_since = Some(since);
        g.cut_off = None;
        Self::release(&mut g, self.read_mode);
    }

    /// Records are committed up to `seq`.
    pub fn committed(&self, seq: u64) {
        let mut g = self.glue();
        g.committed_seq = seq;
        Self::release(&mut g, self.read_mode);
    }

    /// Answers the reads whose records are committed and whose leadership is proven.
    fn release(g: &mut Glue, mode: ReadMode) {
        let now = Instant::now();
        let (committed, lease, since) = (g.committed_seq, g.lease_until, g.confirmed_since);
        g.waiters.retain(|w| {
            let proven = match mode {
                ReadMode::Lease => lease.is_some_and(|t| t > now),
                ReadMode::ReadIndex => since.is_some_and(|s| s >= w.since),
            };
            if w.seq <= committed && proven {
                let _ = w.tx.send(Ok(w.seq));
                return false;
            }
            true
        });
    }

    /// This node stopped leading: no lease, and every waiting read is refused.
    pub fn deposed(g: &mut Glue) {
        g.building = None;
        g.lease_until = None;
        g.confirmed_since = None;
        let err = not_leader(g.leader.as_ref());
        for w in g.waiters.drain(..) {
            let _ = w.tx.send(Err(err.clone()));
        }
    }
}
