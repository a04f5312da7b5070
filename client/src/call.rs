//! Every call the client makes to a master or a worker's shard, under one request id with its
//! deadline and bounded retries (`retry.rs`): the lower half of the route (`route.rs`), which
//! the short-circuit reader (`local/`) also calls for its hellos and leases.
//!
//! Master calls go to the one that leads: a `NotLeader` answer's leader at once, the others
//! asked who leads (`leader.rs`) when one names none, cannot be reached, or hangs (the hedge).
//! Worker calls fail fast with `WorkerUnreachable` when the shard cannot be dialed or its
//! connection dies, for the caller to go elsewhere. A block read of one copy over QUIC
//! (`read_copy`) asks the worker to verify after a checksum failure.

use crate::block::{Dst, ReadBlockRef};
use crate::config::ClientSettings;
use crate::error::{Error, ErrorKind, Result};
use crate::leader;
use crate::pool::{Dialing, Pool};
use crate::retry::{Attempts, with_retries};
use cv_net::dial::Persist;
use cv_net::masters::MasterList;
use cv_net::quic::TransportSettings;
use cv_net::tls::Identity;
use cv_wire::{ErrorCode, Frame, Message};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The connections, the masters and the request ids of one client.
#[derive(Debug)]
pub(crate) struct Calls {
    settings: ClientSettings,
    pool: Arc<Pool>,
    /// The masters, and the one calls go to now.
    masters: MasterList<SocketAddr>,
    /// Request ids, one per call: its retries reuse it, so a mutation whose reply was lost
    /// is answered again by the master, not applied twice.
    call_ids: AtomicU64,
}

impl Calls {
    /// Calls of a client that presents `identity`; nothing is dialed yet.
    pub(crate) fn new(settings: ClientSettings, identity: &Identity, transport: &TransportSettings) -> Result<Calls> {
        let endpoint = cv_net::rpc::client_endpoint(identity, transport)?;
        let pool = Arc::new(Pool::new(endpoint, settings.node.clone(), transport.idle_timeout.get()));
        let call_ids = AtomicU64::new(cv_net::rpc::random_request_id());
        let masters = MasterList::new(settings.master, &settings.masters);
        Ok(Calls { settings, pool, masters, call_ids })
    }

    /// The settings in force.
    pub(crate) fn settings(&self) -> &ClientSettings {
        &self.settings
    }

    /// How many masters the client knows.
    pub(crate) fn master_count(&self) -> usize {
        self.masters.len()
    }

    /// The master calls go to now (under Raft, the leader as last heard).
    pub(crate) fn current_master(&self) -> SocketAddr {
        self.masters.current()
    }

    /// How long ago `addr` was found unreachable, if it still counts (`pool.rs`).
    pub(crate) fn down_since(&self, addr: SocketAddr) -> Option<Duration> {
        self.pool.down_since(addr)
    }

    /// `addr` answered.
    pub(crate) fn mark_up(&self, addr: SocketAddr) {
        self.pool.mark_up(addr)
    }

    /// `addr` did not answer: passed over for a while.
    pub(crate) fn mark_down(&self, addr: SocketAddr) {
        self.pool.mark_down(addr)
    }

    /// QUIC connections open now.
    pub(crate) fn open_connections(&self) -> usize {
        self.pool.open_connections()
    }

    /// Closes every connection (see [`crate::Client::close`]).
    pub(crate) fn close(&self) {
        self.pool.close()
    }

    /// Closes every connection and waits, at most `limit`, until the servers were told.
    pub(crate) async fn close_and_tell(&self, limit: Duration) {
        self.pool.close_and_tell(limit).await
    }

    /// The connection to `addr`, for tests that look at its statistics.
    #[cfg(test)]
    pub(crate) async fn conn_for_test(&self, addr: SocketAddr) -> Result<cv_net::rpc::Conn> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        self.pool.get(addr, Dialing { peer: &"master", persist: Persist::Once, deadline }).await
    }

    /// Finds the master to call first, within one call deadline: the only one, the hinted
    /// one if it leads, else the first of all (asked at once) that answers as the leader, or
    /// names it; one that answers at all during an election.
    pub(crate) async fn first_master(&self, hinted: Option<SocketAddr>) -> Result<()> {
        let deadline = tokio::time::Instant::now() + self.settings.deadline.get();
        let masters = &self.masters;
        if masters.len() == 1 {
            let dialing = Dialing { peer: &"master", persist: Persist::UntilDeadline, deadline };
            return self.pool.master(masters.current(), dialing).await.map(|_| ());
        }
        if let Some(hinted) = hinted {
            let hedge = (tokio::time::Instant::now() + HEDGE).min(deadline);
            let found = leader::find_leader(&self.pool, &[hinted], &|_| false, hedge, Duration::ZERO).await;
            if let Some(best) = found.best() {
                masters.set(best);
                return Ok(());
            }
        }
        let mut pause = ELECTION_PAUSE;
        loop {
            let down = |a: SocketAddr| self.pool.master_down(a);
            let found = leader::find_leader(&self.pool, masters.list(), &down, deadline, HEDGE).await;
            if let Some(best) = found.best() {
                masters.set(best);
                return Ok(());
            }
            let last = found.failed.unwrap_or_else(|| Error::new(ErrorKind::Unavailable, "no master answered"));
            if tokio::time::Instant::now() + pause >= deadline {
                let tried: Vec<String> = masters.list().iter().map(|a| a.to_string()).collect();
                let msg = format!("connect: no master of [{}] answered; last: {last}", tried.join(", "));
                return Err(Error::new(last.kind(), msg));
            }
            tokio::time::sleep(pause).await;
            pause = pause.saturating_mul(2).min(HEDGE);
        }
    }

    /// Sends `msg` to `addr` with deadline and retries; the reply frame (not an error frame)
    /// is returned.
    pub(crate) async fn call<M: Message>(
        &self,
        addr: SocketAddr,
        what: &str,
        msg: &M,
        payload: &[&[u8]],
    ) -> Result<Frame> {
        self.call_at(addr, false, what, msg, payload).await
    }

    /// [`Self::call`], to a master when `master` (an address where something else answers is
    /// then a configuration error).
    async fn call_at<M: Message>(
        &self,
        addr: SocketAddr,
        master: bool,
        what: &str,
        msg: &M,
        payload: &[&[u8]],
    ) -> Result<Frame> {
        let id = self.call_ids.fetch_add(1, Ordering::Relaxed);
        let deadline = tokio::time::Instant::now() + self.settings.deadline.get();
        // The only master is dialed until the deadline; a worker once per attempt.
        let (peer, persist): (&(dyn std::fmt::Display + Sync), _) =
            if master { (&"master", Persist::UntilDeadline) } else { (&"worker", Persist::Once) };
        let dialing = Dialing { peer, persist, deadline };
        with_retries(&self.settings, what, || async {
            let conn =
                if master { self.pool.master(addr, dialing).await? } else { self.pool.get(addr, dialing).await? };
            match conn.call_as(id, msg, payload).await {
                Ok(f) => Ok(f),
                Err(e) => {
                    if conn.is_closed() {
                        self.pool.forget(addr);
                    }
                    Err(Error::from(e))
                }
            }
        })
        .await
        .map_err(|e| e.with_request(id))
    }

    /// Reads `req.len` bytes of block `req.block_id` from the shard `worker` over QUIC into
    /// `dst`, with the retries of [`Calls::call`] until `deadline`. On error `dst` holds
    /// unspecified bytes. The caller has checked the shard is not down ([`WorkerAt::check_down`]).
    ///
    /// After a `Corrupt` answer (bytes failing their checksum here, or the worker's own
    /// finding) the retries ask the worker to check every chunk (`verify`): a corrupt block is
    /// then dropped there and, if it has a source, fetched again.
    ///
    /// A shard that cannot be dialed, or whose connection dies under the read (silent past the
    /// transport's idle timeout: a dead, paused or cut-off worker), is not tried again:
    /// `WorkerUnreachable`, naming it, for the caller to fail over.
    pub(crate) async fn read_copy(
        &self,
        worker: WorkerAt,
        req: &ReadBlockRef<'_>,
        mut dst: Dst<'_>,
        deadline: tokio::time::Instant,
    ) -> Result<()> {
        let mut attempts = Attempts::until(&self.settings, "read block", deadline);
        let mut verified: Option<ReadBlockRef<'_>> = None;
        // The first `Corrupt` answer's message: a later `NotFound` means the worker dropped
        // its copy.
        let mut corrupt: Option<String> = None;
        let block_id = req.block_id;
        loop {
            let req = verified.as_ref().unwrap_or(req);
            let attempt = async {
                let conn = worker.conn(self, deadline).await?;
                let res = crate::block::read_block(&conn, req, dst.reborrow()).await;
                worker.outcome(self, &conn, res)
            };
            match attempts.run(attempt).await {
                Ok(()) => return Ok(()),
                Err(e) if e.kind() == ErrorKind::WorkerUnreachable => return Err(e),
                Err(e) => {
                    if e.kind() == ErrorKind::Corrupt && !req.verify {
                        verified = Some(ReadBlockRef { verify: true, ..*req });
                    }
                    if e.kind() == ErrorKind::Corrupt && corrupt.is_none() {
                        corrupt = Some(e.message().to_owned());
                    }
                    // Found corrupt, then gone: the worker dropped the copy that failed its
                    // checksum. Say so; "no copy" alone would hide why.
                    if let (ErrorKind::NotFound, Some(c)) = (e.kind(), &corrupt) {
                        let why = format!(
                            "block {} on worker {}: its copy failed its checksum and the worker dropped it ({c})",
                            block_id, worker.worker_id,
                        );
                        return Err(Error::new(ErrorKind::Corrupt, why).final_());
                    }
                    attempts.retry(e).await?
                }
            }
        }
    }

    /// One call to a worker's shard, with the retries of [`Calls::call`] until the deadline,
    /// but a shard that cannot be dialed or whose connection dies under the call is
    /// `WorkerUnreachable` at once (as for reads): the caller goes elsewhere.
    pub(crate) async fn worker<M: Message>(
        &self,
        worker: WorkerAt,
        what: &str,
        msg: &M,
        payload: &[&[u8]],
    ) -> Result<Frame> {
        worker.check_down(self, false)?;
        let id = self.call_ids.fetch_add(1, Ordering::Relaxed);
        let deadline = tokio::time::Instant::now() + self.settings.deadline.get();
        let mut attempts = Attempts::until(&self.settings, what, deadline);
        loop {
            let attempt = async {
                let conn = worker.conn(self, deadline).await?;
                let res = conn.call_as(id, msg, payload).await.map_err(Error::from);
                worker.outcome(self, &conn, res)
            };
            match attempts.run(attempt).await {
                Ok(f) => return Ok(f),
                Err(e) if e.kind() == ErrorKind::WorkerUnreachable => return Err(e.with_request(id)),
                Err(e) => attempts.retry(e.with_request(id)).await?,
            }
        }
    }

    /// One call to the master that leads, with the retries of [`Calls::call`] (one request
    /// id for all of them). With several masters, one that answers `NotLeader` sends the call
    /// on to the leader it names; one that names none, or cannot be reached, has the others
    /// asked at once who leads (`leader.rs`), within the same attempt; a call unanswered for
    /// a moment asks them too (a leader killed under it looks alive until the idle timeout).
    /// A round without a leader (an election under way) pauses briefly, until the deadline.
    pub(crate) async fn master<M: Message>(&self, what: &str, msg: &M, payload: &[&[u8]]) -> Result<Frame> {
        let masters = &self.masters;
        if masters.len() == 1 {
            return self.call_at(masters.current(), true, what, msg, payload).await;
        }
        let id = self.call_ids.fetch_add(1, Ordering::Relaxed);
        let mut attempts = Attempts::new(&self.settings, what);
        let deadline = attempts.deadline();
        let mut last: Option<Error> = None;
        let pool = &self.pool;
        let down = |a: SocketAddr| self.pool.master_down(a);
        loop {
            let addr = masters.current();
            // A master whose connection just closed, or that could not be reached a moment
            // ago, is passed over while some master is not down.
            if down(addr) && !masters.list().iter().all(|a| down(*a)) {
                if pool.closed(addr) {
                    pool.mark_down(addr);
                }
                tracing::debug!(%addr, "{what}: master down, asking the others who leads");
                if !self.relocate(addr, false, deadline).await {
                    tokio::time::sleep(ELECTION_PAUSE).await;
                }
                if attempts.expired() {
                    return Err(Error::timeout(what, self.settings.deadline.get()).with_request(id));
                }
                continue;
            }
            let attempt = async {
                let dialing = Dialing { peer: &"master", persist: Persist::UntilDeadline, deadline };
                let call = async {
                    let conn = self.pool.master(addr, dialing).await?;
                    conn.call_as(id, msg, payload).await.map_err(|e| {
                        if conn.is_closed() {
                            pool.forget(addr);
                        }
                        Error::from(e)
                    })
                };
                tokio::pin!(call);
                let (mut wait, asked) = (HEDGE, tokio::time::Instant::now());
                loop {
                    tokio::select! {
                        r = &mut call => return r,
                        _ = tokio::time::sleep(wait) => {
                            if let Some(leader) = self.leads_instead(addr).await {
                                masters.moved(&addr, Some(leader));
                                let waited = asked.elapsed().as_millis();
                                let msg = format!("master at {addr} did not answer in {waited} ms; master at {leader} leads");
                                return Err(Error::new(ErrorKind::Unavailable, msg));
                            }
                            wait = REPROBE;
                        }
                    }
                }
            };
            match attempts.run(attempt).await {
                Ok(f) => {
                    pool.mark_up(addr);
                    return Ok(f);
                }
                Err(e) if attempts.expired() => {
                    let Some(last) = last else { return Err(e.with_request(id)) };
                    let tried: Vec<String> = masters.list().iter().map(|a| a.to_string()).collect();
                    return Err(Error::new(
                        ErrorKind::Unavailable,
                        format!("{what}: no master of [{}] answered as leader in time; last: {last}", tried.join(", ")),
                    )
                    .with_request(id));
                }
                Err(e) if elsewhere(&e) => {
                    let leader = e.redirect().and_then(|r| r.parse().ok()).filter(|l| *l != addr && !down(*l));
                    tracing::debug!(%addr, ?leader, error = %e, "{what}: master did not serve the call");
                    let answered = e.code().is_some();
                    if !answered {
                        pool.mark_down(addr);
                    }
                    last = Some(e);
                    match leader {
                        Some(l) => {
                            masters.moved(&addr, Some(l));
                        }
                        // One that answered is asked again with the others: it may learn the
                        // new leader first, and its answer ends the wait for a dead master.
                        None if !self.relocate(addr, answered, deadline).await => {
                            tokio::time::sleep(ELECTION_PAUSE).await
                        }
                        None => {}
                    }
                }
                Err(e) => attempts.retry(e.with_request(id)).await?,
            }
        }
    }

    /// `failed` did not serve a call and named no leader: the other masters (but those down)
    /// are asked at once who leads, and calls go there, or to one that answers, else to the
    /// next master. Returns whether a leader was found or named. A `failed` master that
    /// `answered` (it lives, but knew no leader: an election) is asked too: otherwise a
    /// round whose only other master is dead but not yet known down would wait for that
    /// master's dial until the call's deadline, while the election ends in a moment.
    async fn relocate(&self, failed: SocketAddr, answered: bool, deadline: tokio::time::Instant) -> bool {
        let masters = &self.masters;
        let skip = |a: SocketAddr| (a == failed && !answered) || self.pool.master_down(a);
        let others: Vec<SocketAddr> = masters.list().iter().copied().filter(|a| !skip(*a)).collect();
        let found = leader::find_leader(&self.pool, &others, &skip, deadline, HEDGE).await;
        tracing::debug!(%failed, ?others, ?found, "asked the masters who leads");
        masters.moved(&failed, found.best());
        found.leader.or(found.named).is_some()
    }

    /// Which other master leads, as the others say when asked at once (within [`HEDGE`]), if
    /// not `slow`.
    async fn leads_instead(&self, slow: SocketAddr) -> Option<SocketAddr> {
        let skip = |a: SocketAddr| a == slow || self.pool.master_down(a);
        let others: Vec<SocketAddr> = self.masters.list().iter().copied().filter(|a| !skip(*a)).collect();
        let until = tokio::time::Instant::now() + HEDGE;
        let found = leader::find_leader(&self.pool, &others, &skip, until, HEDGE).await;
        found.leader.or(found.named)
    }
}

/// A worker's shard as a caller dials it: which worker, which shard, where.
#[derive(Clone, Copy, Debug)]
pub(crate) struct WorkerAt {
    pub(crate) worker_id: u64,
    pub(crate) shard: u16,
    pub(crate) addr: SocketAddr,
}

/// How dial errors name a shard.
impl std::fmt::Display for WorkerAt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "worker {} shard {}", self.worker_id, self.shard)
    }
}

impl WorkerAt {
    pub(crate) fn unreachable(&self, why: &dyn std::fmt::Display) -> Error {
        let (w, s, a) = (self.worker_id, self.shard, self.addr);
        Error::new(ErrorKind::WorkerUnreachable, format!("worker {w} shard {s} at {a}: {why}"))
    }

    /// Refuses at once a shard found unreachable a moment ago (or, unless the master named it
    /// again since, within the suspect period).
    pub(crate) fn check_down(&self, c: &Calls, confirmed: bool) -> Result<()> {
        match c.pool.down_since(self.addr) {
            Some(since) if since < crate::pool::DOWN_FOR || !confirmed => {
                Err(self.unreachable(&format_args!("unreachable {} ms ago", since.as_millis())))
            }
            _ => Ok(()),
        }
    }

    /// The connection to the shard, dialed once (a shard that answers is waited for until
    /// `deadline`, one that does not is passed over); a dial that fails marks it down and is
    /// `WorkerUnreachable`.
    async fn conn(&self, c: &Calls, deadline: tokio::time::Instant) -> Result<cv_net::rpc::Conn> {
        let dialing = Dialing { peer: self, persist: Persist::Once, deadline };
        match c.pool.get(self.addr, dialing).await {
            Ok(conn) => Ok(conn),
            Err(e) if matches!(e.kind(), ErrorKind::Unavailable | ErrorKind::Timeout) => {
                c.pool.mark_down(self.addr);
                Err(Error::new(ErrorKind::WorkerUnreachable, e.message().to_string()))
            }
            Err(e) => Err(e),
        }
    }

    /// A call's result on `conn`: a failure that closed the connection is `WorkerUnreachable`
    /// and marks the shard down; anything that came back marks it up.
    fn outcome<T>(&self, c: &Calls, conn: &cv_net::rpc::Conn, res: Result<T>) -> Result<T> {
        match res {
            Err(e) if conn.is_closed() => {
                c.pool.mark_down(self.addr);
                Err(self.unreachable(&format_args!("connection lost: {}", e.message())))
            }
            other => {
                c.pool.mark_up(self.addr);
                other
            }
        }
    }
}

/// A master call unanswered this long, with other masters to ask, asks them who leads (a
/// leader's call takes well under a millisecond on a LAN; an election about half a second).
const HEDGE: std::time::Duration = std::time::Duration::from_millis(250);

/// Between rounds of masters none of which leads: about a heartbeat, shorter than an election.
const ELECTION_PAUSE: std::time::Duration = std::time::Duration::from_millis(50);

/// After the first [`HEDGE`], how often a call still unanswered asks the others again: a new
/// leader is usually elected within a few of these, and is then found within one.
const REPROBE: std::time::Duration = std::time::Duration::from_millis(100);

/// Whether a master's failure sends the call to another master: it does not lead, or it
/// cannot be reached.
fn elsewhere(e: &Error) -> bool {
    e.code() == Some(ErrorCode::NotLeader)
        || (e.code().is_none() && matches!(e.kind(), ErrorKind::Unavailable | ErrorKind::Timeout))
}
