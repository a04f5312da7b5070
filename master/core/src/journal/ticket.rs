//! A promise that a journal record (or everything up to a sequence number) is durable.

use crate::error::{Error, ErrorKind, Result};

/// Wait on it blocking ([`Ticket::wait`]) or from async code ([`Ticket::wait_async`]).
#[derive(Debug)]
#[must_use = "a mutation is acknowledged only once its ticket says it is durable"]
pub enum Ticket {
    /// Already durable at this sequence number.
    Ready(u64),
    Pending(flume::Receiver<Result<u64>>),
}

impl Ticket {
    /// Blocks until durable; returns the sequence number made durable.
    pub fn wait(self) -> Result<u64> {
        match self {
            Ticket::Ready(seq) => Ok(seq),
            Ticket::Pending(rx) => rx.recv().unwrap_or_else(|_| Err(writer_gone())),
        }
    }

    pub async fn wait_async(self) -> Result<u64> {
        match self {
            Ticket::Ready(seq) => Ok(seq),
            Ticket::Pending(rx) => rx.recv_async().await.unwrap_or_else(|_| Err(writer_gone())),
        }
    }
}

fn writer_gone() -> Error {
    Error::new(ErrorKind::Poisoned, "journal writer stopped")
}
