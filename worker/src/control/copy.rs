//! Copies ordered by the master (re-replication, drains): each block is read from the worker
//! holding it, checked (the shard verifies every chunk, `verify`; the frame checksum covers
//! the transfer; length and crc32 are compared again after the write) and written pinned
//! to this worker's own shard through its ordinary write path, so it is committed as any
//! written block is. The shard's next report carries it, and the master counts the copy.
//! Runs on the control thread's runtime, a few copies at a time, never on a shard.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cv_net::rpc::Conn;
use cv_net::{NetError, NetErrorKind};
use cv_wire::msg::{CopyOrder, ReadBlock, ReadBlockOk, Role, WriteBlock, WriteBlockOk};
use cv_wire::{Limits, block_shard};
use tokio::sync::Semaphore;

/// Copies running at once.
const PARALLEL: usize = 4;
/// Deadline of one copy (both connections, the read and the write).
const COPY_TIMEOUT: Duration = Duration::from_secs(30);

/// Runs the copies one worker was ordered to make.
#[derive(Debug, Clone)]
pub(crate) struct Copier {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    ep: quinn::Endpoint,
    node: String,
    /// This worker's own shard endpoints, by shard index.
    own: Vec<SocketAddr>,
    slots: Semaphore,
    /// Blocks being copied now: an order repeated meanwhile is not run twice.
    running: Mutex<HashSet<u64>>,
    conns: tokio::sync::Mutex<HashMap<SocketAddr, Conn>>,
}

impl Copier {
    pub(crate) fn new(ep: quinn::Endpoint, node: String, own: Vec<SocketAddr>) -> Self {
        let inner = Inner {
            ep,
            node,
            own,
            slots: Semaphore::new(PARALLEL),
            running: Mutex::new(HashSet::new()),
            conns: tokio::sync::Mutex::new(HashMap::new()),
        };
        Copier { inner: Arc::new(inner) }
    }

    /// Starts each order in the background (a few at a time); failures are logged, and the
    /// master orders a copy not reported in time again.
    pub(crate) fn start(&self, orders: Vec<CopyOrder>) {
        for order in orders {
            if !self.inner.running.lock().unwrap_or_else(|p| p.into_inner()).insert(order.block_id) {
                continue;
            }
            let me = self.clone();
            tokio::spawn(async move {
                let Ok(_slot) = me.inner.slots.acquire().await else { return };
                let block = order.block_id;
                match tokio::time::timeout(COPY_TIMEOUT, me.copy(&order)).await {
                    Ok(Ok(())) => tracing::debug!(block, from = order.from_worker, "block copied"),
                    Ok(Err(e)) => {
                        tracing::warn!(block, from = order.from_worker, at = %order.from, error = %e, "block copy failed")
                    }
                    Err(_) => tracing::warn!(block, from = order.from_worker, "block copy took over {COPY_TIMEOUT:?}"),
                }
                me.inner.running.lock().unwrap_or_else(|p| p.into_inner()).remove(&block);
            });
        }
    }

    async fn copy(&self, order: &CopyOrder) -> Result<(), NetError> {
        let shard = usize::from(block_shard(order.block_id));
        let Some(&own) = self.inner.own.get(shard) else {
            return Err(NetError::new(NetErrorKind::Protocol, format!("block {} names shard {shard}", order.block_id)));
        };
        let from = self.conn(order.from.socket_addr()).await?;
        let read = ReadBlock {
            block_id: order.block_id,
            offset: 0,
            len: order.len,
            source: None,
            fill_only: false,
            verify: true,
            // A copy on the master's order: this worker's certificate is its right.
            cap: Default::default(),
        };
        let reply = from.call(&read, &[]).await?;
        let _: ReadBlockOk = reply.decode_body()?;
        let bytes = reply.payload();
        if bytes.len() as u64 != order.len {
            let got = bytes.len();
            return Err(NetError::new(NetErrorKind::Protocol, format!("read {got} of {} bytes", order.len)));
        }
        let to = self.conn(own).await?;
        let ok: WriteBlockOk = to
            .call(&WriteBlock { block_id: order.block_id, pinned: true, cap: Default::default() }, &[bytes])
            .await?
            .decode_body()?;
        let crc = crc32fast::hash(bytes);
        if ok.len != order.len || ok.crc32 != crc {
            let msg = format!("stored {} bytes crc {:08x}, read {} crc {crc:08x}", ok.len, ok.crc32, order.len);
            return Err(NetError::new(NetErrorKind::Protocol, msg));
        }
        Ok(())
    }

    /// A connection to the shard at `addr`, kept for the next copy; it must be a worker's.
    async fn conn(&self, addr: SocketAddr) -> Result<Conn, NetError> {
        let mut conns = self.inner.conns.lock().await;
        if let Some(c) = conns.get(&addr).filter(|c| !c.is_closed()) {
            return Ok(c.clone());
        }
        let c = Conn::connect(&self.inner.ep, addr, Role::Worker, &self.inner.node, Limits::DEFAULT).await?;
        if c.peer_role() != Role::Worker {
            return Err(NetError::new(
                NetErrorKind::Protocol,
                format!("{addr} is a {:?}, not a worker", c.peer_role()),
            ));
        }
        conns.insert(addr, c.clone());
        Ok(c)
    }
}
