//! The client handle and its namespace operations.

use crate::block::Dst;
use crate::config::ClientSettings;
use crate::error::{Error, ErrorKind, Result};
use crate::file::File;
use crate::pool::{Dialing, Pool};
use crate::retry::{Attempts, with_retries};
use crate::writer::Writer;
use cv_net::dial::Persist;
use cv_net::masters::MasterList;
use cv_net::quic::TransportSettings;
use cv_net::tls::Identity;
use cv_wire::msg::*;
use cv_wire::{ErrorCode, Frame, Message};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// A connected client. Cheap to clone; clones share connections.
#[derive(Clone, Debug)]
pub struct Client {
    pub(crate) inner: Arc<Inner>,
}

#[derive(Debug)]
pub(crate) struct Inner {
    pub(crate) settings: ClientSettings,
    pub(crate) pool: Pool,
    /// The masters, and the one calls go to now.
    pub(crate) masters: MasterList<SocketAddr>,
    /// Request ids, one per call: its retries reuse it, so a mutation whose reply was lost
    /// is answered again by the master, not applied twice.
    call_ids: AtomicU64,
    /// Short-circuit reads of blocks on this host's workers.
    local: crate::local::Local,
    /// The leader hint file, and the master it named when the client started.
    hint: Option<(crate::LeaderHint, Option<SocketAddr>)>,
}

impl Client {
    /// Creates a client that presents `identity`; connections are made on first use, the
    /// master's right away so that errors show early. With several masters, all are dialed at
    /// once and calls go to the first that answers as the leader (a master that is down costs
    /// nothing while another leads).
    pub async fn connect(
        settings: ClientSettings,
        identity: &Identity,
        transport: &TransportSettings,
    ) -> Result<Client> {
        Self::connect_hinted(settings, identity, transport, None).await
    }

    /// [`Client::connect`] that dials the master `hint` names first (alone, for a moment:
    /// when it leads, no other master is dialed) and records the master calls went to in it
    /// at [`Client::shutdown`]. For short-lived processes; a wrong or stale hint costs at most
    /// one redirect or one short wait.
    pub async fn connect_hinted(
        settings: ClientSettings,
        identity: &Identity,
        transport: &TransportSettings,
        hint: Option<crate::LeaderHint>,
    ) -> Result<Client> {
        let endpoint = cv_net::rpc::client_endpoint(identity, transport)?;
        let pool = Pool::new(endpoint, settings.node.clone(), transport.idle_timeout.get());
        let call_ids = AtomicU64::new(cv_net::rpc::random_request_id());
        let masters = MasterList::new(settings.master, &settings.masters);
        // One master needs no hint.
        let hint = hint.filter(|_| masters.len() > 1).map(|h| {
            let named = h.read();
            (h, named)
        });
        let inner = Inner { settings, pool, masters, call_ids, local: Default::default(), hint };
        let client = Client { inner: Arc::new(inner) };
        client.first_master().await?;
        Ok(client)
    }

    /// Finds the master to call first, within one call deadline: the only one, the hinted
    /// one if it leads, else the first of all (asked at once) that answers as the leader, or
    /// names it; one that answers at all during an election.
    async fn first_master(&self) -> Result<()> {
        let inner = &self.inner;
        let deadline = tokio::time::Instant::now() + inner.settings.deadline.get();
        let masters = &inner.masters;
        if masters.len() == 1 {
            let dialing = Dialing { peer: &"master", persist: Persist::UntilDeadline, deadline };
            return self.master_conn(masters.current(), dialing).await.map(|_| ());
        }
        if let Some(hinted) = inner.hint.as_ref().and_then(|(_, named)| *named) {
            let hedge = (tokio::time::Instant::now() + HEDGE).min(deadline);
            let found = self.find_leader(&[hinted], &|_| false, hedge, Duration::ZERO).await;
            if let Some(best) = found.best() {
                masters.set(best);
                return Ok(());
            }
        }
        let mut pause = ELECTION_PAUSE;
        loop {
            let down = |a: SocketAddr| self.down_master(a);
            let found = self.find_leader(masters.list(), &down, deadline, HEDGE).await;
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

    /// The settings in force.
    pub fn settings(&self) -> &ClientSettings {
        &self.inner.settings
    }

    /// The connection to the master at `addr`, dialed as `dialing` says; an address where
    /// something else answers (a worker's shard) is a configuration error, not retried.
    pub(crate) async fn master_conn(&self, addr: SocketAddr, dialing: Dialing<'_>) -> Result<cv_net::rpc::Conn> {
        let conn = self.inner.pool.get(addr, dialing).await?;
        if conn.peer_role() != Role::Master {
            let role = conn.peer_role();
            return Err(Error::new(ErrorKind::Config, format!("{addr} answered as {role:?}, not as a master")));
        }
        Ok(conn)
    }

    /// Whether the master at `addr` is to be passed over while another may serve: its
    /// connection just closed, or it could not be reached a moment ago.
    pub(crate) fn down_master(&self, addr: SocketAddr) -> bool {
        let pool = &self.inner.pool;
        pool.closed(addr) || pool.down_since(addr).is_some_and(|d| d < crate::pool::DOWN_FOR)
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
        let id = self.inner.call_ids.fetch_add(1, Ordering::Relaxed);
        let deadline = tokio::time::Instant::now() + self.inner.settings.deadline.get();
        // The only master is dialed until the deadline; a worker once per attempt.
        let (peer, persist): (&(dyn std::fmt::Display + Sync), _) =
            if master { (&"master", Persist::UntilDeadline) } else { (&"worker", Persist::Once) };
        let dialing = Dialing { peer, persist, deadline };
        with_retries(&self.inner.settings, what, || async {
            let conn = if master {
                self.master_conn(addr, dialing).await?
            } else {
                self.inner.pool.get(addr, dialing).await?
            };
            match conn.call_as(id, msg, payload).await {
                Ok(f) => Ok(f),
                Err(e) => {
                    if conn.is_closed() {
                        self.inner.pool.forget(addr);
                    }
                    Err(Error::from(e))
                }
            }
        })
        .await
        .map_err(|e| e.with_request(id))
    }

    /// Reads `req.len` bytes of block `loc` from its shard into `dst`, with the retries of
    /// [`Client::call`] until `deadline`. On error `dst` holds unspecified bytes.
    ///
    /// After a `Corrupt` answer (bytes failing their checksum here, or the worker's own
    /// finding) the retries ask the worker to check every chunk (`verify`): a corrupt block is
    /// then dropped there and, if it has a source, fetched again.
    ///
    /// A shard that cannot be dialed, or whose connection dies under the read (silent past the
    /// transport's idle timeout: a dead, paused or cut-off worker), is not tried again:
    /// `WorkerUnreachable`, naming it, for the caller to fail over. A shard found unreachable
    /// recently is not dialed (the same error at once) unless `confirmed`: the master, asked
    /// after that, still names it.
    pub(crate) async fn read_block(
        &self,
        loc: &BlockLoc,
        req: &ReadBlock,
        mut dst: Dst<'_>,
        deadline: tokio::time::Instant,
        confirmed: bool,
    ) -> Result<()> {
        let addr = loc.addr.socket_addr();
        let worker = WorkerAt { worker_id: loc.worker_id, shard: loc.shard, addr };
        worker.check_down(self, confirmed)?;
        if self.inner.settings.short_circuit
            && !req.fill_only
            && let Some(bytes) = self.inner.local.read(self, worker, req.block_id, req.offset, req.len).await
        {
            dst.put(bytes);
            return Ok(());
        }
        let mut attempts = Attempts::until(&self.inner.settings, "read block", deadline);
        let mut verified: Option<ReadBlock> = None;
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
                        verified = Some(ReadBlock { verify: true, ..req.clone() });
                    }
                    if e.kind() == ErrorKind::Corrupt && corrupt.is_none() {
                        corrupt = Some(e.message().to_owned());
                    }
                    // Found corrupt, then gone: the worker dropped the copy that failed its
                    // checksum. Say so; "no copy" alone would hide why.
                    if let (ErrorKind::NotFound, Some(c)) = (e.kind(), &corrupt) {
                        let why = format!(
                            "block {} on worker {}: its copy failed its checksum and the worker dropped it ({c})",
                            block_id, loc.worker_id,
                        );
                        return Err(Error::new(ErrorKind::Corrupt, why).final_());
                    }
                    attempts.retry(e).await?
                }
            }
        }
    }

    pub(crate) fn local(&self) -> &crate::local::Local {
        &self.inner.local
    }

    /// Counters of short-circuit reads (blocks read from a local worker's data files).
    pub fn short_circuit_stats(&self) -> crate::LocalStats {
        self.inner.local.stats()
    }

    /// One call to a worker's shard, with the retries of [`Client::call`] until the deadline,
    /// but a shard that cannot be dialed or whose connection dies under the call is
    /// `WorkerUnreachable` at once (as for reads): the caller goes elsewhere.
    pub(crate) async fn call_worker<M: Message>(
        &self,
        worker: WorkerAt,
        what: &str,
        msg: &M,
        payload: &[&[u8]],
    ) -> Result<Frame> {
        worker.check_down(self, false)?;
        let id = self.inner.call_ids.fetch_add(1, Ordering::Relaxed);
        let deadline = tokio::time::Instant::now() + self.inner.settings.deadline.get();
        let mut attempts = Attempts::until(&self.inner.settings, what, deadline);
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

    /// One call to the master that leads, with the retries of [`Client::call`] (one request
    /// id for all of them). With several masters, one that answers `NotLeader` sends the call
    /// on to the leader it names; one that names none, or cannot be reached, has the others
    /// asked at once who leads (`leader.rs`), within the same attempt; a call unanswered for
    /// a moment asks them too (a leader killed under it looks alive until the idle timeout).
    /// A round without a leader (an election under way) pauses briefly, until the deadline.
    pub(crate) async fn master<M: Message>(&self, what: &str, msg: &M, payload: &[&[u8]]) -> Result<Frame> {
        let masters = &self.inner.masters;
        if masters.len() == 1 {
            return self.call_at(masters.current(), true, what, msg, payload).await;
        }
        let id = self.inner.call_ids.fetch_add(1, Ordering::Relaxed);
        let mut attempts = Attempts::new(&self.inner.settings, what);
        let deadline = attempts.deadline();
        let mut last: Option<Error> = None;
        let pool = &self.inner.pool;
        let down = |a: SocketAddr| self.down_master(a);
        loop {
            let addr = masters.current();
            // A master whose connection just closed, or that could not be reached a moment
            // ago, is passed over while some master is not down.
            if down(addr) && !masters.list().iter().all(|a| down(*a)) {
                if pool.closed(addr) {
                    pool.mark_down(addr);
                }
                if !self.relocate(addr, deadline).await {
                    tokio::time::sleep(ELECTION_PAUSE).await;
                }
                if attempts.expired() {
                    return Err(Error::timeout(what, self.inner.settings.deadline.get()).with_request(id));
                }
                continue;
            }
            let attempt = async {
                let dialing = Dialing { peer: &"master", persist: Persist::UntilDeadline, deadline };
                let call = async {
                    let conn = self.master_conn(addr, dialing).await?;
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
                    if e.code().is_none() {
                        pool.mark_down(addr);
                    }
                    last = Some(e);
                    match leader {
                        Some(l) => {
                            masters.moved(&addr, Some(l));
                        }
                        None if !self.relocate(addr, deadline).await => tokio::time::sleep(ELECTION_PAUSE).await,
                        None => {}
                    }
                }
                Err(e) => attempts.retry(e.with_request(id)).await?,
            }
        }
    }

    /// `failed` did not serve a call and named no leader: the other masters (but those down)
    /// are asked at once who leads, and calls go there, or to one that answers, else to the
    /// next master. Returns whether a leader was found or named.
    async fn relocate(&self, failed: SocketAddr, deadline: tokio::time::Instant) -> bool {
        let masters = &self.inner.masters;
        let skip = |a: SocketAddr| a == failed || self.down_master(a);
        let others: Vec<SocketAddr> = masters.list().iter().copied().filter(|a| !skip(*a)).collect();
        let found = self.find_leader(&others, &skip, deadline, HEDGE).await;
        masters.moved(&failed, found.best());
        found.leader.or(found.named).is_some()
    }

    /// Which other master leads, as the others say when asked at once (within [`HEDGE`]), if
    /// not `slow`.
    async fn leads_instead(&self, slow: SocketAddr) -> Option<SocketAddr> {
        let skip = |a: SocketAddr| a == slow || self.down_master(a);
        let others: Vec<SocketAddr> = self.inner.masters.list().iter().copied().filter(|a| !skip(*a)).collect();
        let until = tokio::time::Instant::now() + HEDGE;
        let found = self.find_leader(&others, &skip, until, HEDGE).await;
        found.leader.or(found.named)
    }

    /// The master calls go to now (under Raft, the leader as last heard).
    pub fn current_master(&self) -> SocketAddr {
        self.inner.masters.current()
    }

    /// A null round trip to the master (the transport floor).
    pub async fn ping(&self) -> Result<()> {
        let f = self.master("ping", &Ping { nonce: 1 }, &[]).await?;
        f.access::<Pong>()?;
        Ok(())
    }

    /// Opens a file: one round trip returns its block map and tail.
    pub async fn open(&self, path: &str) -> Result<File> {
        check_path(path)?;
        let frame = self.master("open", &Open { path: path.into() }, &[]).await?;
        let ok: OpenOk = frame.decode_body()?;
        if ok.status.kind != FileKind::File {
            return Err(Error::new(ErrorKind::IsADirectory, path.to_string()));
        }
        let tail = if ok.tail_cached { Some((ok.tail_offset, frame.into_payload())) } else { None };
        File::new(self.clone(), ok.status, ok.blocks, tail, ok.ufs)
    }

    /// Metadata of a path.
    pub async fn stat(&self, path: &str) -> Result<FileStatus> {
        check_path(path)?;
        let frame = self.master("stat", &Stat { path: path.into() }, &[]).await?;
        Ok(frame.decode_body::<StatOk>()?.status)
    }

    /// Every entry of a directory, in name order (pages fetched as needed).
    pub async fn list(&self, path: &str) -> Result<Vec<FileStatus>> {
        check_path(path)?;
        let mut out = Vec::new();
        let mut start_after = None;
        loop {
            let req = List { path: path.into(), start_after: start_after.clone(), limit: 1000 };
            let page: ListOk = self.master("list", &req, &[]).await?.decode_body()?;
            let more = page.more && !page.entries.is_empty();
            start_after = page.entries.last().map(|e| name_of(&e.path).to_string());
            out.extend(page.entries);
            if !more {
                return Ok(out);
            }
        }
    }

    /// Creates a directory (and its parents when asked).
    pub async fn mkdir(&self, path: &str, parents: bool) -> Result<()> {
        check_path(path)?;
        self.master("mkdir", &Mkdir { path: path.into(), parents, mode: 0o755 }, &[]).await?;
        Ok(())
    }

    /// Renames a file or directory atomically.
    pub async fn rename(&self, src: &str, dst: &str) -> Result<()> {
        check_path(src)?;
        check_path(dst)?;
        self.master("rename", &Rename { src: src.into(), dst: dst.into() }, &[]).await?;
        Ok(())
    }

    /// Deletes a path; directories with content only when `recursive`.
    pub async fn delete(&self, path: &str, recursive: bool) -> Result<()> {
        check_path(path)?;
        self.master("delete", &Delete { path: path.into(), recursive }, &[]).await?;
        Ok(())
    }

    /// Makes `path` a new file holding the bytes of the complete files `sources`, in order,
    /// without copying them (it lists their blocks); a file at `path` is replaced in one step.
    /// `Unsupported` for sources or a target under a mount (copy them instead), and from a
    /// master that predates it.
    pub async fn compose(&self, path: &str, sources: &[String]) -> Result<FileStatus> {
        check_path(path)?;
        let req = Compose { path: path.into(), sources: sources.to_vec() };
        match self.master("compose", &req, &[]).await {
            Ok(reply) => Ok(reply.decode_body::<StatOk>()?.status),
            Err(e) if e.code() == Some(cv_wire::ErrorCode::Malformed) => {
                Err(Error::new(ErrorKind::Unsupported, format!("{path}: this master cannot compose files")))
            }
            Err(e) => Err(e),
        }
    }

    /// Creates a file and returns a writer for its content.
    pub async fn create(&self, path: &str, overwrite: bool) -> Result<Writer> {
        check_path(path)?;
        let req = Create { path: path.into(), overwrite, mode: 0o644, block_size: 0 };
        let ok: CreateOk = self.master("create", &req, &[]).await?.decode_body()?;
        Ok(Writer::new(self.clone(), path.to_string(), ok.file_id, ok.block_size, ok.pin_blocks))
    }

    /// Mounts the object-store location `ufs_url` at `cv_path`. The master
    /// lists the location's root first: a wrong URL or credentials fail here.
    pub async fn mount(
        &self,
        ufs_url: &str,
        cv_path: &str,
        mode: MountMode,
        options: Vec<(String, String)>,
    ) -> Result<()> {
        let options = options.into_iter().map(|(key, value)| KeyValue { key, value }).collect();
        let req = Mount { ufs_url: ufs_url.into(), cv_path: cv_path.into(), mode, options };
        self.master("mount", &req, &[]).await?;
        Ok(())
    }

    /// Removes the mount at `cv_path`. An fs-mode mount whose files are not all exported yet
    /// is refused (`NotEmpty`) unless `force` (they then stay in cv only).
    pub async fn unmount(&self, cv_path: &str, force: bool) -> Result<()> {
        check_path(cv_path)?;
        self.master("unmount", &Unmount { cv_path: cv_path.into(), force }, &[]).await?;
        Ok(())
    }

    /// The mount table; secret option values come back as `***`.
    pub async fn list_mounts(&self) -> Result<Vec<MountInfo>> {
        Ok(self.master("list mounts", &ListMounts {}, &[]).await?.decode_body::<ListMountsOk>()?.mounts)
    }

    /// Makes the master read listings and object versions at or under
    /// `cv_path` from the store again at their next use.
    pub async fn sync_mount(&self, cv_path: &str) -> Result<()> {
        check_path(cv_path)?;
        self.master("sync mount", &SyncMount { cv_path: cv_path.into() }, &[]).await?;
        Ok(())
    }

    /// Drops the cached blocks of object copies at or under `path`, keeping
    /// their metadata.
    pub async fn free(&self, path: &str) -> Result<FreeOk> {
        check_path(path)?;
        Ok(self.master("free", &Free { path: path.into() }, &[]).await?.decode_body()?)
    }

    /// The cluster report (workers, capacity, tail cache).
    pub async fn report(&self) -> Result<ReportOk> {
        Ok(self.master("report", &Report {}, &[]).await?.decode_body()?)
    }

    /// Closes every connection. The close frames go out only while this process's runtime
    /// keeps running: a process about to exit calls [`Client::shutdown`] instead.
    pub fn close(&self) {
        self.inner.pool.close();
    }

    /// QUIC connections this client holds open now (to masters and workers): what a FUSE
    /// mount's or a gateway's `/metrics` shows of its side of the cluster.
    pub fn open_connections(&self) -> usize {
        self.inner.pool.open_connections()
    }

    /// Closes every connection and waits (at most a second) until the servers have been
    /// told. Without the wait, a process that exits right after closing leaves its
    /// connections open on the master and the shards until their idle timeout, each
    /// counting against the shards' connection cap.
    pub async fn shutdown(&self) {
        self.record_leader();
        self.inner.pool.close_and_tell(std::time::Duration::from_secs(1)).await;
    }

    /// Writes the master calls go to now into the leader hint, if there is one and it named
    /// another (a failure to write is only logged: the hint is an optimisation).
    fn record_leader(&self) {
        let Some((hint, named)) = &self.inner.hint else { return };
        let now = self.inner.masters.current();
        if *named != Some(now)
            && let Err(e) = hint.write(now)
        {
            tracing::debug!(path = %hint.path().display(), error = %e, "leader hint not written");
        }
    }
}

fn name_of(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
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
    fn unreachable(&self, why: &dyn std::fmt::Display) -> Error {
        let (w, s, a) = (self.worker_id, self.shard, self.addr);
        Error::new(ErrorKind::WorkerUnreachable, format!("worker {w} shard {s} at {a}: {why}"))
    }

    /// Refuses at once a shard found unreachable a moment ago (or, unless the master named it
    /// again since, within the suspect period).
    fn check_down(&self, c: &Client, confirmed: bool) -> Result<()> {
        match c.inner.pool.down_since(self.addr) {
            Some(since) if since < crate::pool::DOWN_FOR || !confirmed => {
                Err(self.unreachable(&format_args!("unreachable {} ms ago", since.as_millis())))
            }
            _ => Ok(()),
        }
    }

    /// The connection to the shard, dialed once (a shard that answers is waited for until
    /// `deadline`, one that does not is passed over); a dial that fails marks it down and is
    /// `WorkerUnreachable`.
    async fn conn(&self, c: &Client, deadline: tokio::time::Instant) -> Result<cv_net::rpc::Conn> {
        let dialing = Dialing { peer: self, persist: Persist::Once, deadline };
        match c.inner.pool.get(self.addr, dialing).await {
            Ok(conn) => Ok(conn),
            Err(e) if matches!(e.kind(), ErrorKind::Unavailable | ErrorKind::Timeout) => {
                c.inner.pool.mark_down(self.addr);
                Err(Error::new(ErrorKind::WorkerUnreachable, e.message().to_string()))
            }
            Err(e) => Err(e),
        }
    }

    /// A call's result on `conn`: a failure that closed the connection is `WorkerUnreachable`
    /// and marks the shard down; anything that came back marks it up.
    fn outcome<T>(&self, c: &Client, conn: &cv_net::rpc::Conn, res: Result<T>) -> Result<T> {
        match res {
            Err(e) if conn.is_closed() => {
                c.inner.pool.mark_down(self.addr);
                Err(self.unreachable(&format_args!("connection lost: {}", e.message())))
            }
            other => {
                c.inner.pool.mark_up(self.addr);
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

/// Refuses a path the master would refuse by size, before it is sent: `InvalidPath`, naming
/// the limit (a frame with it would be refused whole, which reads as a protocol error).
fn check_path(path: &str) -> Result<()> {
    let max = cv_wire::Limits::DEFAULT.max_path as usize;
    if path.len() > max {
        let head: String = path.chars().take(64).collect();
        return Err(Error::new(
            ErrorKind::InvalidPath,
            format!("path of {} bytes (at most {max}): {head}…", path.len()),
        ));
    }
    Ok(())
}
