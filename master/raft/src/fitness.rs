//! Why a master must not lead now (master/HA.md): it catches up after losing its files, the
//! other masters cannot dial it, or its log's disk is full. A master with any reason stands
//! for no election; with the last two it also stops taking work and sending heartbeats, so
//! the others elect a leader that can serve. Each reason clears on its own.

use std::sync::atomic::{AtomicBool, Ordering};

use openraft::Raft;

use crate::TypeConfig;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unfit {
    /// Started with no Raft files, not caught up yet: votes for no one, stands for nothing.
    CatchingUp,
    /// The other masters reach too few times (`reach.rs`).
    Unreachable,
    /// The Raft log cannot be written: no space left on its disk.
    JournalFull,
}

#[derive(Debug, Default)]
pub(crate) struct Fitness {
    catching_up: AtomicBool,
    unreachable: AtomicBool,
    journal_full: AtomicBool,
}

impl Fitness {
    fn flag(&self, why: Unfit) -> &AtomicBool {
        match why {
            Unfit::CatchingUp => &self.catching_up,
            Unfit::Unreachable => &self.unreachable,
            Unfit::JournalFull => &self.journal_full,
        }
    }

    /// Sets or clears one reason; whether that changed anything.
    pub fn set(&self, why: Unfit, on: bool) -> bool {
        self.flag(why).swap(on, Ordering::AcqRel) != on
    }

    pub fn is(&self, why: Unfit) -> bool {
        self.flag(why).load(Ordering::Acquire)
    }

    /// Whether this master may take work and keep a leadership.
    pub fn may_lead(&self) -> bool {
        !self.is(Unfit::Unreachable) && !self.is(Unfit::JournalFull)
    }

    /// Whether this master may stand for election.
    pub fn may_elect(&self) -> bool {
        self.may_lead() && !self.is(Unfit::CatchingUp)
    }

    /// Tells the Raft node: elections and heartbeats on only while fit.
    pub fn apply(&self, raft: &Raft<TypeConfig>) {
        raft.runtime_config().elect(self.may_elect());
        raft.runtime_config().heartbeat(self.may_lead());
    }
}
