//! Writing a file: block-sized pieces stream to their owning shards (one
//! block in flight while the next fills), then `close` completes the file
//! with its tail so the master can serve the footer on open.

use crate::error::{Error, ErrorKind, Result};
use crate::route::{Route, WorkerAt};
use bytes::Bytes;
use cv_wire::ErrorCode;
use cv_wire::msg::{
    Abandon, AddBlock, AddBlockOk, BlockLen, Complete, CompleteIf, Delete, Done, Expect, FileStatus, WriteBlock,
    WriteBlockOk,
};
use std::sync::Arc;
use tokio::task::JoinHandle;

/// Default tail budget for files whose format is not recognised.
const DEFAULT_TAIL: u64 = 64 << 10;

/// Writes a new file. Bytes become visible to readers at [`Writer::close`]: a file created
/// over another (`overwrite`) replaces it only then, in one step, and until then every reader
/// gets the previous version; a writer that fails or gives up leaves that version as it was.
#[derive(Debug)]
pub struct Writer {
    route: Arc<Route>,
    path: String,
    file_id: u64,
    block_size: u64,
    buf: Vec<u8>,
    /// The previous full block, kept so a footer larger than the last block
    /// can still be sent as the tail.
    /// Shared with the block's in-flight write, not copied.
    prev: Bytes,
    blocks: Vec<BlockLen>,
    inflight: Option<JoinHandle<Result<BlockLen>>>,
    length: u64,
    /// Blocks are the only copy until the master exports the file (fs mode).
    pinned: bool,
}

impl Writer {
    pub(crate) fn new(route: Arc<Route>, path: String, file_id: u64, block_size: u64, pinned: bool) -> Self {
        let block_size = block_size.max(4096);
        Writer {
            route,
            path,
            file_id,
            block_size,
            buf: Vec::with_capacity(block_size as usize),
            prev: Bytes::new(),
            blocks: Vec::new(),
            inflight: None,
            length: 0,
            pinned,
        }
    }

    /// Bytes written so far.
    pub fn len(&self) -> u64 {
        self.length
    }

    /// Whether nothing was written yet.
    pub fn is_empty(&self) -> bool {
        self.length == 0
    }

    /// The block size the master gave this file in its create reply: the cluster's, which the
    /// Hadoop binding reports as the default block size.
    pub fn block_size(&self) -> u64 {
        self.block_size
    }

    /// Appends `data`. A failure is final: the file is removed (see [`Writer::abort`]) and
    /// the error returned.
    pub async fn write(&mut self, data: &[u8]) -> Result<()> {
        match self.write_inner(data).await {
            Ok(()) => Ok(()),
            Err(e) => Err(self.failed(e).await),
        }
    }

    async fn write_inner(&mut self, mut data: &[u8]) -> Result<()> {
        while !data.is_empty() {
            let room = self.block_size as usize - self.buf.len();
            let n = room.min(data.len());
            self.buf.extend_from_slice(&data[..n]);
            self.length += n as u64;
            data = &data[n..];
            if self.buf.len() as u64 == self.block_size {
                self.ship_block().await?;
            }
        }
        Ok(())
    }

    /// Sends the filled block; waits for the previous one first, so at most
    /// one block is in flight while the next fills.
    async fn ship_block(&mut self) -> Result<()> {
        self.wait_inflight().await?;
        let full = std::mem::replace(&mut self.buf, Vec::with_capacity(self.block_size as usize));
        let index = self.blocks.len() as u32;
        let route = self.route.clone();
        let file_id = self.file_id;
        let full = Bytes::from(full);
        self.prev = full.clone();
        let pinned = self.pinned;
        self.inflight = Some(tokio::spawn(async move { write_block(&route, file_id, index, full, pinned).await }));
        Ok(())
    }

    async fn wait_inflight(&mut self) -> Result<()> {
        if let Some(h) = self.inflight.take() {
            let done = h.await.map_err(|e| Error::new(ErrorKind::Other, format!("block write task: {e}")))??;
            self.blocks.push(done);
        }
        Ok(())
    }

    /// Writes the last block, sends the tail and completes the file. On failure the file is
    /// removed (unless it did become complete: a completion whose reply was lost) and the
    /// error returned.
    pub async fn close(mut self) -> Result<FileStatus> {
        match self.close_inner(None).await {
            Ok(st) => Ok(st),
            Err(e) => Err(self.failed(e).await),
        }
    }

    /// As [`Writer::close`], publishing the file only if its path then holds what `expect`
    /// says (checked by the master in the same step as the publish, so of two writers with
    /// the same expectation one wins): [`Expect::Absent`], no complete file (`AlreadyExists`
    /// otherwise), or [`Expect::Version`], that file at that version (`Stale` otherwise). On
    /// a failed expectation the file is abandoned and the path keeps what it holds. A master
    /// that predates conditional completion fails it as `Unsupported`.
    pub async fn close_if(mut self, expect: Expect) -> Result<FileStatus> {
        match self.close_inner(Some(expect)).await {
            Ok(st) => Ok(st),
            Err(e) => Err(self.failed(e).await),
        }
    }

    /// Gives the file up: it is removed, so no half-written entry stays behind. (A writer
    /// that dies without this leaves the entry until the master's write lease expires.)
    pub async fn abort(mut self) -> Result<()> {
        self.discard().await
    }

    /// After a failure: removes the unfinished file, best effort, and returns `e`.
    async fn failed(&mut self, e: Error) -> Error {
        if let Err(rm) = self.discard().await {
            tracing::warn!(path = %self.path, error = %rm, "a failed write's file is left for the master's write lease");
        }
        e
    }

    /// Stops the block in flight and removes this writer's file by id if it is not complete
    /// (a replacement's previous version, which its path still shows, stays).
    async fn discard(&mut self) -> Result<()> {
        if let Some(h) = self.inflight.take() {
            h.abort();
        }
        match self.route.master("abandon", &Abandon { file_id: self.file_id }, &[]).await {
            Ok(_) => return Ok(()),
            // A master that predates `Abandon`: delete the path if it still names this file.
            Err(e) if e.code() == Some(ErrorCode::Malformed) => {}
            Err(e) => return Err(e),
        }
        match self.route.stat(&self.path).await {
            Ok(st) if st.id == self.file_id && !st.complete => {
                self.route.master("delete", &Delete { path: self.path.clone(), recursive: false }, &[]).await?;
                Ok(())
            }
            Ok(_) => Ok(()),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e),
        }
    }

    async fn close_inner(&mut self, expect: Option<Expect>) -> Result<FileStatus> {
        self.wait_inflight().await?;
        let last = Bytes::from(std::mem::take(&mut self.buf));
        if !last.is_empty() {
            let index = self.blocks.len() as u32;
            let done = write_block(&self.route, self.file_id, index, last.clone(), self.pinned).await?;
            self.blocks.push(done);
        }
        // `prev` is the block just before `last`, so together they are the
        // end of the file: enough for any footer up to a block long.
        let mut held = std::mem::take(&mut self.prev).to_vec();
        held.extend_from_slice(&last);
        let want = cv_wire::footer::tail_len(self.length, &held, DEFAULT_TAIL).min(held.len() as u64);
        let tail = &held[held.len() - want as usize..];
        let req = Complete {
            file_id: self.file_id,
            length: self.length,
            blocks: std::mem::take(&mut self.blocks),
            tail_offset: self.length - want,
        };
        match expect {
            None => {
                self.route.master("complete", &req, &[tail]).await?.access::<Done>()?;
            }
            Some(expect) => {
                let req = CompleteIf { complete: req, expect };
                match self.route.master("complete", &req, &[tail]).await {
                    Ok(reply) => {
                        reply.access::<Done>()?;
                    }
                    Err(e) if e.code() == Some(ErrorCode::Malformed) => {
                        let why = "this master cannot complete a file conditionally (it predates CompleteIf)";
                        return Err(Error::new(ErrorKind::Unsupported, format!("{}: {why}", self.path)));
                    }
                    Err(e) => return Err(e),
                }
            }
        };
        self.route.stat(&self.path).await
    }

    /// The path being written.
    pub fn path(&self) -> &str {
        &self.path
    }
}

/// Allocates block `index` of the file at the master and stores `data` on its shard and on
/// each replica's, all at once (the block is acknowledged only once every copy is stored);
/// checks each shard's crc against ours. A copy whose worker cannot be reached has the block
/// placed again on other workers (a new block at the same index), up to [`REPLACEMENTS`] times.
async fn write_block(route: &Arc<Route>, file_id: u64, index: u32, data: Bytes, pinned: bool) -> Result<BlockLen> {
    // Checked against every copy's answer: hashed once, not once per copy.
    let crc = crc32fast::hash(&data);
    let mut exclude = Vec::new();
    let deadline = tokio::time::Instant::now() + route.settings().deadline.get();
    loop {
        let req = AddBlock { file_id, index, exclude: exclude.clone() };
        let ok: AddBlockOk = route.master("add block", &req, &[]).await?.decode_body()?;
        let mut pause = STALE_KEYS_PAUSE;
        let failed = loop {
            match store_copies(route, &ok.block, &data, crc, pinned).await {
                Ok(len) => return Ok(BlockLen { block_id: ok.block.block_id, len }),
                // A worker not yet handed the keys of the master that leads now (a new
                // leader: the worker's next heartbeat there brings them): asked again.
                Err((worker, e))
                    if e.code() == Some(ErrorCode::StaleCapability)
                        && tokio::time::Instant::now() + pause < deadline =>
                {
                    tracing::debug!(block = ok.block.block_id, worker, error = %e, "worker lacks the master's keys; again");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(std::time::Duration::from_millis(500));
                }
                Err(failed) => break failed,
            }
        };
        match failed {
            (worker, e) if e.kind() == ErrorKind::WorkerUnreachable && exclude.len() < REPLACEMENTS => {
                tracing::debug!(block = ok.block.block_id, worker, error = %e, "placing the block again without that worker");
                exclude.push(worker);
            }
            (_, e) => return Err(e),
        }
    }
}

/// First wait before a block write refused for a capability key its worker lacks is tried
/// again (doubling, at most 500 ms).
const STALE_KEYS_PAUSE: std::time::Duration = std::time::Duration::from_millis(50);

/// How many times one block is placed again after a copy's worker could not be reached.
const REPLACEMENTS: usize = 3;

/// Stores `data` as `block` on its owner and every replica at once; its length, or the first
/// failure in copy order and the worker it names.
async fn store_copies(
    route: &Arc<Route>,
    block: &cv_wire::msg::BlockLoc,
    data: &Bytes,
    crc: u32,
    pinned: bool,
) -> std::result::Result<u64, (u64, Error)> {
    let copies =
        std::iter::once((block.worker_id, block.addr)).chain(block.replicas.iter().map(|r| (r.worker_id, r.addr)));
    let mut writes = tokio::task::JoinSet::new();
    for (i, (worker, addr)) in copies.enumerate() {
        let (route, data, id, cap) = (route.clone(), data.clone(), block.block_id, block.cap);
        writes.spawn(async move {
            (i, worker, store_copy(&route, (id, cap), worker, addr.socket_addr(), &data, crc, pinned).await)
        });
    }
    let mut stored = Vec::with_capacity(writes.len());
    while let Some(done) = writes.join_next().await {
        let task =
            done.map_err(|e| (block.worker_id, Error::new(ErrorKind::Other, format!("block write task: {e}"))))?;
        stored.push(task);
    }
    stored.sort_unstable_by_key(|(i, _, _)| *i);
    let mut len = 0;
    for (_, worker, r) in stored {
        len = r.map_err(|e| (worker, e))?;
    }
    Ok(len)
}

/// Stores one copy of block `block_id` (`data`, whose crc32 is `crc`) on `worker`'s shard at
/// `addr`; returns its length.
async fn store_copy(
    route: &Route,
    (block_id, cap): (u64, cv_wire::msg::BlockCap),
    worker: u64,
    addr: std::net::SocketAddr,
    data: &Bytes,
    crc: u32,
    pinned: bool,
) -> Result<u64> {
    let req = WriteBlock { block_id, pinned, cap };
    // Which copy failed is part of the answer (a full worker, a dead one).
    let on = |e: Error| e.context(format_args!("block {block_id} on worker {worker} at {addr}"));
    let shard = cv_wire::block_shard(block_id);
    let at = WorkerAt { worker_id: worker, shard, addr };
    let reply = route.worker(at, "write block", &req, &[data]).await.map_err(on)?;
    let w: WriteBlockOk = reply.decode_body()?;
    if w.len != data.len() as u64 || w.crc32 != crc {
        return Err(Error::new(
            ErrorKind::Corrupt,
            format!(
                "block {block_id}: worker {worker} at {addr} stored {} bytes crc {:08x}, sent {} crc {crc:08x}",
                w.len,
                w.crc32,
                data.len()
            ),
        ));
    }
    Ok(w.len)
}
