//! The route: the one way the client reaches the cluster. [`crate::File`], [`crate::Writer`]
//! and [`crate::Client`] call it, never the connections beneath it.
//!
//! Below it, `call.rs` makes each call to a master (following the leader) or a worker's shard
//! under one request id with its retries, and `local/` reads blocks of this host's workers
//! from their data files. The route adds what needs both: a block read that tries the copy
//! on this host first and fails over from copy to copy, to where the master says the block is
//! now, or through another worker that fills it from the object store (`read.rs`), over the
//! file's block map as its reads share it (`blocks.rs`).

mod blocks;
mod read;

pub(crate) use crate::call::WorkerAt;
pub(crate) use blocks::{Blocks, Opened};

use crate::call::Calls;
use crate::config::ClientSettings;
use crate::error::{Error, ErrorKind, Result};
use crate::local::{ChunkMemo, Local, LocalRead, LocalStats};
use cv_net::quic::TransportSettings;
use cv_net::tls::Identity;
use cv_wire::msg::{FileKind, FileStatus, Open, OpenOk, Stat, StatOk};
use cv_wire::{Frame, Message};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// The calls, and the short-circuit reads, of one client (see the module's doc).
#[derive(Debug)]
pub(crate) struct Route {
    calls: Arc<Calls>,
    /// Short-circuit reads of blocks on this host's workers.
    local: Local,
}

impl Route {
    /// A route that presents `identity`; nothing is dialed yet.
    pub(crate) fn new(settings: ClientSettings, identity: &Identity, transport: &TransportSettings) -> Result<Route> {
        Ok(Route { calls: Arc::new(Calls::new(settings, identity, transport)?), local: Local::default() })
    }

    /// Finds the master to call first, `hinted` first if given ([`Calls::first_master`]).
    pub(crate) async fn first_master(&self, hinted: Option<SocketAddr>) -> Result<()> {
        self.calls.first_master(hinted).await
    }

    pub(crate) fn settings(&self) -> &ClientSettings {
        self.calls.settings()
    }

    /// How many masters the client knows.
    pub(crate) fn master_count(&self) -> usize {
        self.calls.master_count()
    }

    /// The master calls go to now.
    pub(crate) fn current_master(&self) -> SocketAddr {
        self.calls.current_master()
    }

    /// One call to the master that leads ([`Calls::master`]).
    pub(crate) async fn master<M: Message>(&self, what: &str, msg: &M, payload: &[&[u8]]) -> Result<Frame> {
        self.calls.master(what, msg, payload).await
    }

    /// One call to the shard at `addr` with retries ([`Calls::call`]).
    pub(crate) async fn call<M: Message>(
        &self,
        addr: SocketAddr,
        what: &str,
        msg: &M,
        payload: &[&[u8]],
    ) -> Result<Frame> {
        self.calls.call(addr, what, msg, payload).await
    }

    /// One call to a worker's shard that fails fast when the shard is unreachable
    /// ([`Calls::worker`]).
    pub(crate) async fn worker<M: Message>(
        &self,
        at: WorkerAt,
        what: &str,
        msg: &M,
        payload: &[&[u8]],
    ) -> Result<Frame> {
        self.calls.worker(at, what, msg, payload).await
    }

    /// Opens `path`: its block map and tail, checked; `IsADirectory` for a directory.
    pub(crate) async fn open(&self, path: &str) -> Result<Opened> {
        let frame = self.master("open", &Open { path: path.into() }, &[]).await?;
        let ok: OpenOk = frame.decode_body()?;
        if ok.status.kind != FileKind::File {
            return Err(Error::new(ErrorKind::IsADirectory, path.to_string()));
        }
        let tail = if ok.tail_cached { Some((ok.tail_offset, frame.into_payload())) } else { None };
        Opened::new(ok.status, ok.blocks, tail, ok.ufs)
    }

    /// Metadata of `path`.
    pub(crate) async fn stat(&self, path: &str) -> Result<FileStatus> {
        let frame = self.master("stat", &Stat { path: path.into() }, &[]).await?;
        Ok(frame.decode_body::<StatOk>()?.status)
    }

    /// A short-circuit read of `[offset, offset + len)` of block `block_id` at shard `addr`
    /// that can start now ([`Local::ready`]).
    pub(crate) fn local_ready(
        &self,
        addr: SocketAddr,
        block_id: u64,
        offset: u64,
        len: u64,
        memo: &Arc<ChunkMemo>,
    ) -> Option<LocalRead> {
        self.local.ready(addr, block_id, offset, len, memo)
    }

    pub(crate) fn local_stats(&self) -> LocalStats {
        self.local.stats()
    }

    /// QUIC connections open now.
    pub(crate) fn open_connections(&self) -> usize {
        self.calls.open_connections()
    }

    /// Closes every connection.
    pub(crate) fn close(&self) {
        self.calls.close()
    }

    /// Closes every connection and waits, at most `limit`, until the servers were told.
    pub(crate) async fn close_and_tell(&self, limit: Duration) {
        self.calls.close_and_tell(limit).await
    }

    /// The connection to `addr`, for tests that look at its statistics.
    #[cfg(test)]
    pub(crate) async fn conn_for_test(&self, addr: SocketAddr) -> Result<cv_net::rpc::Conn> {
        self.calls.conn_for_test(addr).await
    }
}
