//! The core's `journal::Log` over Raft. `append` queues a record tagged with the leadership it
//! was built under; one task hands consecutive records of one leadership to openraft as one
//! entry (`client_write_ff`, in seq order), and each record's ticket resolves from that entry's
//! own response: the batch's last seq once a majority has it durable and it is applied here,
//! `NotLeader` if it was refused, truncated or skipped as stale.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use cv_master_core::journal::{Log, Ticket, WriterStats};
use cv_master_core::{Error, ErrorKind, Result};
use openraft::Raft;
use openraft::error::ClientWriteError;

use crate::shared::{LeaderId, Shared, not_leader};
use crate::{Batch, TypeConfig};

/// Entries are cut at this many bytes of records (one record may exceed it alone).
const MAX_BATCH_BYTES: usize = 1 << 20;

#[derive(Debug)]
pub(crate) struct Item {
    built_under: LeaderId,
    bytes: Vec<u8>,
    tx: flume::Sender<Result<u64>>,
}

#[derive(Debug)]
pub(crate) struct RaftLog {
    shared: Arc<Shared>,
    tx: flume::Sender<Item>,
}

impl RaftLog {
    pub fn new(shared: Arc<Shared>) -> (Self, flume::Receiver<Item>) {
        let (tx, rx) = flume::unbounded();
        (Self { shared, tx }, rx)
    }
}

fn ready_err(e: Error) -> Ticket {
    let (tx, rx) = flume::bounded(1);
    let _ = tx.send(Err(e));
    Ticket::Pending(rx)
}

impl Log for RaftLog {
    fn append(&self, _seq: u64, bytes: Vec<u8>) -> Ticket {
        let g = self.shared.glue();
        let Some(built_under) = g.building else {
            return ready_err(not_leader(g.leader.as_ref()));
        };
        drop(g);
        let (tx, rx) = flume::bounded(1);
        if self.tx.send(Item { built_under, bytes, tx }).is_err() {
            return ready_err(Error::new(ErrorKind::Poisoned, "the raft log stopped"));
        }
        Ticket::Pending(rx)
    }

    fn wait_for(&self, seq: u64) -> Ticket {
        self.shared.wait_for(seq)
    }

    fn snapshot(&self, _seq: u64, _bytes: Vec<u8>) -> Ticket {
        ready_err(Error::new(ErrorKind::InvalidArgument, "under Raft the log takes its own snapshots"))
    }

    fn is_failed(&self) -> bool {
        self.shared.failed.load(Ordering::Acquire)
    }

    fn stats(&self) -> &WriterStats {
        &self.shared.stats
    }

    fn shutdown(&self) {}
}

/// Hands queued records to openraft, one entry per run of records built under one leadership,
/// until the queue closes or Raft stops.
pub(crate) async fn submit(raft: Raft<TypeConfig>, shared: Arc<Shared>, rx: flume::Receiver<Item>) {
    let mut next: Option<Item> = None;
    loop {
        let first = match next.take() {
            Some(i) => i,
            None => match rx.recv_async().await {
                Ok(i) => i,
                Err(_) => return,
            },
        };
        let mut items = vec![first];
        let mut size = items[0].bytes.len();
        while size < MAX_BATCH_BYTES {
            match rx.try_recv() {
                Ok(i) if i.built_under == items[0].built_under => {
                    size += i.bytes.len();
                    items.push(i);
                }
                Ok(i) => {
                    next = Some(i);
                    break;
                }
                Err(_) => break,
            }
        }
        let batch = Batch::build(items[0].built_under, items.iter().map(|i| &i.bytes[..]));
        shared.stats.batches.fetch_add(1, Ordering::Relaxed);
        shared.stats.records.fetch_add(items.len() as u64, Ordering::Relaxed);
        shared.stats.bytes.fetch_add(size as u64, Ordering::Relaxed);
        let waiting: Vec<_> = items.into_iter().map(|i| i.tx).collect();
        match raft.client_write_ff(batch).await {
            Ok(resp) => {
                let shared = shared.clone();
                tokio::spawn(async move {
                    let result = match resp.await {
                        Ok(Ok(r)) if r.data > 0 => Ok(r.data),
                        Ok(Err(ClientWriteError::ForwardToLeader(f))) => Err(named(f.leader_id, f.leader_node)),
                        _ => Err(not_leader(shared.glue().leader.as_ref())),
                    };
                    for tx in waiting {
                        let _ = tx.send(result.clone());
                    }
                });
            }
            Err(_) => {
                shared.failed.store(true, Ordering::Release);
                let e = Error::new(ErrorKind::Poisoned, "raft stopped");
                for tx in waiting {
                    let _ = tx.send(Err(e.clone()));
                }
                return;
            }
        }
    }
}

fn named(id: Option<u64>, node: Option<openraft::BasicNode>) -> Error {
    match (id, node) {
        (Some(id), Some(n)) => not_leader(Some(&(id, n.addr))),
        _ => not_leader(None),
    }
}
