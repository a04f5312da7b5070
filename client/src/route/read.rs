//! A block read, in one place: the short-circuit read of a copy on this host, else the copy
//! over QUIC with its retries; failover to the next copy, to where the master says the block
//! is now, or, for a block the object store holds, through another worker that fills it.

use super::Route;
use super::blocks::Blocks;
use crate::block::{Dst, ReadBlockRef};
use crate::call::WorkerAt;
use crate::error::{Error, ErrorKind, Result};
use cv_wire::ErrorCode;
use cv_wire::msg::{BlockLoc, SyncMount};
use std::borrow::Cow;
use tokio::time::{Instant, sleep};

impl Route {
    /// Reads `len` bytes at `offset` of block `loc` of `file` into `dst`, within one call
    /// deadline however many owners it takes.
    ///
    /// Failover: an owner that is unreachable (`WorkerUnreachable`, after the transport's idle
    /// timeout at most) is not waited on again; the master is asked where the block is now and
    /// the read goes there. A block the object store holds has a new owner as soon as the master
    /// has noticed the loss (its connection to the worker times out the same way), which fills it
    /// from the store; if the master still names the dead owner, or cannot answer, such a block is
    /// read through another worker at once. A cv-only block waits for the master's word, asking
    /// again with backoff. A block whose only copy is gone fails with `DataLoss` naming the file: marked lost
    /// by the master, or missing from the worker that should hold it while the master still names
    /// that worker for this version. One missing because the version read was replaced or removed
    /// (its blocks deleted) fails with `Stale`.
    pub(crate) async fn read(
        &self,
        file: &Blocks,
        loc: &BlockLoc,
        offset: u64,
        len: u64,
        mut dst: Dst<'_>,
    ) -> Result<()> {
        let settings = self.settings();
        let deadline = Instant::now() + settings.deadline.get();
        let mut pause = settings.backoff.get();
        let mut loc = file.current(loc);
        // Whether the master named `loc` after it was found unreachable (so it is dialed again).
        let mut confirmed = false;
        // Until when a block no live worker holds is waited for: a worker the master lost for a
        // moment (stalled, restarting) comes back with its copies.
        let lost_until = Instant::now() + RELOCATE_WITHIN;
        // Copies tried in this read, and the workers that dropped theirs for failing its checksum.
        let (mut tried, mut dropped_on) = (0usize, Vec::<u64>::new());
        // Whether this read asked the master for a fresh capability already.
        let mut refreshed = false;
        loop {
            if loc.lost {
                // No copy on a live worker says nothing of whether one exists: unreachable
                // (retryable), not lost. `DataLoss` is only a worker the master names answering
                // that it holds no copy (below).
                let why = "no live worker holds a copy: the master lost its worker, which may come back with it";
                let err = file.unreachable(&loc, why);
                if Instant::now() + pause >= deadline.min(lost_until) {
                    return Err(err);
                }
                sleep(pause).await;
                pause = pause.saturating_mul(2).min(std::time::Duration::from_millis(500));
                match self.ask_master(file, &loc, deadline).await? {
                    Ok(now) => (loc, confirmed) = (Cow::Owned(now), false),
                    Err(m) => {
                        return Err(Error::new(
                            err.kind(),
                            format!("{}; the master cannot say more: {m}", err.message()),
                        ));
                    }
                }
                continue;
            }
            let source = file.source(&loc);
            let cv_only = source.is_none();
            let req = ReadBlockRef {
                block_id: loc.block_id,
                offset,
                len,
                source,
                fill_only: false,
                verify: false,
                cap: loc.cap,
            };
            let err = match self.read_copy(&loc, &req, dst.reborrow(), deadline, confirmed).await {
                Ok(()) => return Ok(()),
                // Another copy can serve: the next one is read at once. One that is unreachable
                // is not dialed again by later reads of this block.
                Err(e) if !loc.replicas.is_empty() && copy_failed(&e, cv_only) => {
                    tried += 1;
                    if dropped_corrupt(&e) {
                        dropped_on.push(loc.worker_id);
                    }
                    let next = Blocks::next_copy(&loc, &self.calls);
                    tracing::debug!(block = loc.block_id, from = %loc.addr.socket_addr(), to = %next.addr.socket_addr(), error = %e, "reading another copy");
                    if e.kind() == ErrorKind::WorkerUnreachable {
                        file.remember(next.clone());
                    }
                    (loc, confirmed) = (Cow::Owned(next), false);
                    continue;
                }
                // The last copy failed its checksum and was dropped, as every other one was:
                // nothing is left to read it from.
                Err(e) if dropped_corrupt(&e) && cv_only && dropped_on.len() == tried => {
                    dropped_on.push(loc.worker_id);
                    let why = match dropped_on.len() {
                        1 => format!("its only copy failed its checksum and was dropped: {}", e.message()),
                        _ => format!(
                            "every copy failed its checksum and was dropped (workers {dropped_on:?}): {}",
                            e.message()
                        ),
                    };
                    return Err(file.data_loss(&loc, &why));
                }
                // The block is gone: the version read was replaced or removed (its blocks are
                // deleted), the block moved, or its only copy is lost. The master tells which.
                Err(e) if e.kind() == ErrorKind::NotFound && cv_only => {
                    let why = format!("the worker holds no copy ({})", e.message());
                    match self.ask_master(file, &loc, deadline).await? {
                        Ok(now) if now.addr != loc.addr && !now.lost => {
                            tracing::debug!(block = loc.block_id, to = %now.addr.socket_addr(), "block moved; read there");
                            (loc, confirmed) = (Cow::Owned(now), false);
                            continue;
                        }
                        Ok(_) => return Err(file.data_loss(&loc, &why)),
                        Err(m) => {
                            let why = format!("{why}; the master could not say whether the file changed: {m}");
                            return Err(file.data_loss(&loc, &why));
                        }
                    }
                }
                // The worker cannot accept the capability, though it may be genuine: it expired
                // (the file was open longer than a capability lives) or its key is one the
                // worker has not been handed. The master mints a fresh one (opening the file
                // again), once per read; a worker still without the key is waited for.
                Err(e) if e.code() == Some(ErrorCode::StaleCapability) => {
                    if !refreshed {
                        refreshed = true;
                        match self.ask_master(file, &loc, deadline).await? {
                            Ok(now) => {
                                file.remember(now.clone());
                                (loc, confirmed) = (Cow::Owned(now), false);
                                continue;
                            }
                            Err(m) => {
                                let why = format!("{}; no fresh capability from the master: {m}", e.message());
                                return Err(Error::new(e.kind(), why));
                            }
                        }
                    }
                    if Instant::now() + pause >= deadline {
                        return Err(e);
                    }
                    sleep(pause).await;
                    pause = pause.saturating_mul(2).min(std::time::Duration::from_millis(500));
                    continue;
                }
                Err(e) if e.kind() == ErrorKind::WorkerUnreachable => e,
                // The store's object is not the version recorded (a fill found it changed): the
                // master is told, so the next open sees the new version.
                Err(e) if e.kind() == ErrorKind::Stale && !cv_only => {
                    self.object_changed(file).await;
                    return Err(e);
                }
                Err(e) => return Err(e),
            };
            if Instant::now() + pause >= deadline {
                return Err(err);
            }
            let asked = self.ask_master(file, &loc, deadline).await?;
            let named_again = asked.as_ref().is_ok_and(|now| now.addr == loc.addr && !now.lost);
            // A block the store holds waits neither for a master that cannot answer nor for one
            // that has not noticed yet: it is read through another worker now.
            if !cv_only
                && (asked.is_err() || named_again)
                && let Some(other) = file.other_worker(&loc, &self.calls)
            {
                tracing::debug!(block = loc.block_id, to = %other.addr.socket_addr(), error = %err, "reading through another worker");
                file.remember(other.clone());
                (loc, confirmed) = (Cow::Owned(other), false);
                continue;
            }
            let now = match asked {
                Ok(now) => now,
                Err(master) => {
                    let why = format!("{}; the master cannot say where else: {master}", err.message());
                    return Err(Error::new(err.kind(), why));
                }
            };
            confirmed = named_again;
            if named_again {
                // The master has not noticed yet, or the worker is back.
                tracing::debug!(block = loc.block_id, error = %err, "owner unreachable; asking the master again");
                sleep(pause).await;
                pause = pause.saturating_mul(2).min(std::time::Duration::from_millis(500));
            } else {
                tracing::debug!(block = loc.block_id, from = %loc.addr.socket_addr(), to = %now.addr.socket_addr(), "read fails over");
            }
            loc = Cow::Owned(now);
        }
    }

    /// Reads block `loc` at its copy there into `dst`: from this host's worker's data files if
    /// it can (`local/`), else over QUIC with retries until `deadline` ([`crate::call::Calls::read_copy`]).
    /// A shard found unreachable recently is not dialed (`WorkerUnreachable` at once) unless
    /// `confirmed`: the master, asked after that, still names it.
    async fn read_copy(
        &self,
        loc: &BlockLoc,
        req: &ReadBlockRef<'_>,
        mut dst: Dst<'_>,
        deadline: Instant,
        confirmed: bool,
    ) -> Result<()> {
        let worker = WorkerAt { worker_id: loc.worker_id, shard: loc.shard, addr: loc.addr.socket_addr() };
        worker.check_down(&self.calls, confirmed)?;
        if self.calls.settings().short_circuit
            && !req.fill_only
            && let Some(bytes) = self.local.read(&self.calls, worker, req.block_id, req.cap, req.offset, req.len).await
        {
            dst.put(bytes);
            return Ok(());
        }
        self.calls.read_copy(worker, req, dst, deadline).await
    }

    /// Asks the master where block `loc` is now (opening the file again: same id and version,
    /// or the file changed under the reader) and remembers the answer for later reads.
    async fn relocate(&self, file: &Blocks, loc: &BlockLoc) -> Result<BlockLoc> {
        let status = file.status();
        let (path, version) = (&status.path, status.version);
        // Not `Unavailable`: the master answered, and the version read is gone.
        let again = match self.open(path).await {
            Err(e) if e.kind() == ErrorKind::NotFound => {
                let why = format!("{path} was removed after it was opened (version {version} read): open it again");
                return Err(Error::new(ErrorKind::Stale, why));
            }
            r => r?,
        };
        let st = &again.status;
        if (st.id, st.version) != (status.id, version) {
            let why = format!("{path} was replaced after it was opened (version {version} read, now {})", st.version);
            return Err(Error::new(ErrorKind::Stale, format!("{why}: open it again")));
        }
        let Some(now) = again.blocks.iter().find(|b| b.block_id == loc.block_id) else {
            return Err(Error::new(ErrorKind::Protocol, format!("{path}: block {} left the block map", loc.block_id)));
        };
        file.moved_to(&again.blocks);
        Ok(now.clone())
    }

    /// The object behind this file changed in its store since the master recorded it: the
    /// master is asked to look at the path again (`SyncMount` of it), best effort, so that the
    /// next open records the new version instead of failing the same way until `cv.ttl`.
    async fn object_changed(&self, file: &Blocks) {
        let path = &file.status().path;
        let req = SyncMount { cv_path: path.clone() };
        match tokio::time::timeout(RELOCATE_WITHIN, self.master("sync", &req, &[])).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => {
                tracing::debug!(path = %path, error = %e, "could not ask for the path to be checked again")
            }
            Err(_) => {
                tracing::debug!(path = %path, "the master did not answer the ask to check the path again")
            }
        }
    }

    /// Where the master says block `loc` is now (see [`Self::relocate`]), asked for at most
    /// [`RELOCATE_WITHIN`]: `Ok(Err(_))` when the master cannot answer (it did not answer a
    /// moment ago either, or the ask timed out or failed in transit, which marks it so);
    /// `Err` for an answer that ends the read (the file changed).
    async fn ask_master(&self, file: &Blocks, loc: &BlockLoc, deadline: Instant) -> Result<Result<BlockLoc>> {
        let calls = &self.calls;
        let master = calls.current_master();
        if let Some(since) = calls.down_since(master)
            && since < crate::pool::DOWN_FOR
        {
            let ms = since.as_millis();
            return Ok(Err(Error::new(ErrorKind::Unavailable, format!("master at {master} unreachable {ms} ms ago"))));
        }
        let ask = deadline.saturating_duration_since(Instant::now()).min(RELOCATE_WITHIN);
        let failed = match tokio::time::timeout(ask, self.relocate(file, loc)).await {
            Ok(Ok(now)) => {
                calls.mark_up(master);
                return Ok(Ok(now));
            }
            Ok(Err(e)) if !matches!(e.kind(), ErrorKind::Unavailable | ErrorKind::Timeout) => return Err(e),
            Ok(Err(e)) => e,
            Err(_) => Error::timeout("ask the master where the block is", ask),
        };
        calls.mark_down(master);
        Ok(Err(failed))
    }
}

/// Whether a read of one copy found it corrupt and its worker dropped it (`Calls::read_copy`
/// makes that final): not bytes spoiled on the way, which a later read may get right.
fn dropped_corrupt(e: &Error) -> bool {
    e.kind() == ErrorKind::Corrupt && !e.retryable()
}

/// Whether a read of one copy failed so that another copy may serve: its worker is
/// unreachable, holds no copy of a cv-only block, or found its copy corrupt (and dropped it).
fn copy_failed(e: &Error, cv_only: bool) -> bool {
    match e.kind() {
        ErrorKind::WorkerUnreachable | ErrorKind::Corrupt => true,
        ErrorKind::NotFound => cv_only,
        _ => false,
    }
}

/// How long a read that lost its owner waits for the master's answer before it reads a block
/// the store holds through another worker instead: over the transport's idle timeout, so a
/// connection to a master that just died is seen closing.
const RELOCATE_WITHIN: std::time::Duration = std::time::Duration::from_secs(2);
