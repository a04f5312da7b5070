//! Where the core sends its journal records: the local journal (one master), or a replicated
//! log that answers once a majority of masters has them durable (`cv-master-raft`).

use std::fmt::Debug;

use super::{Journal, Ticket, WriterStats};

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
}
