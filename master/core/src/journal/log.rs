//! Where the core sends its journal records: the local journal (one master), or a replicated
//! log that answers once a majority of masters has them durable (`cv-master-raft`).

use std::fmt::Debug;

use super::{Journal, Recovered, Ticket, WriterStats};
use crate::error::{Error, ErrorKind, Result};

/// The core's durability seam. Records arrive framed ([`super::encode_record`]), in sequence
/// order (the core holds its state lock while appending), and each ticket resolves once its
/// record is durable where this log promises it to be.
pub trait Log: Send + Sync + Debug {
    fn append(&self, seq: u64, bytes: Vec<u8>) -> Ticket;
    /// Resolves once every record up to `seq` is durable.
    fn wait_for(&self, seq: u64) -> Ticket;
    /// A snapshot of the state at `seq` (bytes from [`super::encode_snapshot`]). A replicated
    /// log takes its snapshots itself and refuses this.
    fn snapshot(&self, seq: u64, bytes: Vec<u8>) -> Ticket;
    /// Nothing more can be made durable (a write failed, or the log stopped).
    fn is_failed(&self) -> bool;
    fn stats(&self) -> &WriterStats;
    /// Flushes what is queued and stops.
    fn shutdown(&self);

    // A log whose disk can fill up and be freed again, without a restart (the local journal):
    // the defaults are those of a log that never says so.

    /// Why [`Log::is_failed`]: where and what failed.
    fn failure(&self) -> Error {
        Error::new(ErrorKind::Poisoned, "journal failed; restart the master")
    }
    /// While its disk is full: the `NoSpace` error writes are refused with (reads go on).
    fn no_space(&self) -> Option<Error> {
        None
    }
    /// Asks the disk again whether writes fit (blocking); `Ok` once they are taken again.
    fn probe_space(&self) -> Result<()> {
        Ok(())
    }
    /// Records appended past what is durable failed for sure: the core must go back to the
    /// durable state ([`Log::durable_state`]) before it appends again.
    fn needs_rollback(&self) -> bool {
        false
    }
    /// The durable state and its last sequence number, read back as recovery does.
    fn durable_state(&self) -> Result<Recovered> {
        Err(Error::new(ErrorKind::Unsupported, "this log cannot read back its durable state"))
    }
}

impl Log for Journal {
    fn append(&self, seq: u64, bytes: Vec<u8>) -> Ticket {
        Journal::append(self, seq, bytes)
    }

    fn wait_for(&self, seq: u64) -> Ticket {
        Journal::wait_for(self, seq)
    }

    fn snapshot(&self, seq: u64, bytes: Vec<u8>) -> Ticket {
        Journal::snapshot(self, seq, bytes)
    }

    fn is_failed(&self) -> bool {
        Journal::is_failed(self)
    }

    fn stats(&self) -> &WriterStats {
        Journal::stats(self)
    }

    fn shutdown(&self) {
        Journal::shutdown(self)
    }

    fn failure(&self) -> Error {
        Journal::failure(self).unwrap_or_else(|| Error::new(ErrorKind::Poisoned, "journal failed; restart the master"))
    }

    fn no_space(&self) -> Option<Error> {
        Journal::no_space(self)
    }

    fn probe_space(&self) -> Result<()> {
        Journal::probe_space(self)
    }

    fn needs_rollback(&self) -> bool {
        Journal::needs_rollback(self)
    }

    fn durable_state(&self) -> Result<Recovered> {
        Journal::durable_state(self)
    }
}
