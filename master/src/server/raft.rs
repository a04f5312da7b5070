//! Raft between masters over QUIC (wire kinds 112–117, master/HA.md): openraft's network (this
//! master dials each other one as `Role::Master`, one connection per peer, dialed again once
//! it closes) and the handlers that hand a peer's RPC to the local Raft node. Log entries and
//! snapshot chunks travel in the frame's checksummed payload, entries framed as in the Raft
//! log file.

use std::net::SocketAddr;
use std::time::Duration;

use cv_master_raft::codec::{decode_entries, decode_membership, encode_entry, encode_membership};
use cv_master_raft::openraft::error::{InstallSnapshotError, NetworkError, RPCError, RaftError, Unreachable};
use cv_master_raft::openraft::network::RPCOption;
use cv_master_raft::openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse, VoteRequest,
    VoteResponse,
};
use cv_master_raft::openraft::{
    BasicNode, CommittedLeaderId, RaftNetwork, RaftNetworkFactory, SnapshotMeta, StoredMembership,
};
use cv_master_raft::{LogId, Prober, RaftMaster, TypeConfig, Vote};
use cv_net::rpc::{Conn, Reply};
use cv_wire::msg::{
    ChangeMasters, Done, ListMastersOk, MasterMember, RaftAppend, RaftAppendOk, RaftLogId, RaftProbe, RaftProbeOk,
    RaftSnapshot, RaftSnapshotOk, RaftVote, RaftVoteOk, RaftVoteReq, Role,
};
use cv_wire::{ErrorCode, Frame, Limits, Message};

use super::errors::Fail;
use super::raft_members::MemberCerts;
use std::sync::Arc;

fn to_wire_id(l: &LogId) -> RaftLogId {
    RaftLogId { term: l.leader_id.term, node: l.leader_id.node_id, index: l.index }
}

fn from_wire_id(l: &RaftLogId) -> LogId {
    LogId::new(CommittedLeaderId::new(l.term, l.node), l.index)
}

fn to_wire_vote(v: &Vote) -> RaftVote {
    RaftVote { term: v.leader_id.term, node: v.leader_id.node_id, committed: v.committed }
}

fn from_wire_vote(v: &RaftVote) -> Vote {
    if v.committed { Vote::new_committed(v.term, v.node) } else { Vote::new(v.term, v.node) }
}

/// Dials the other masters of the group.
#[derive(Debug, Clone)]
pub struct QuicNetwork {
    endpoint: quinn::Endpoint,
    node: String,
    /// Each member dialed shows its certificate: recorded for the checks of its messages.
    members: Arc<MemberCerts>,
}

impl QuicNetwork {
    pub fn new(endpoint: quinn::Endpoint, node: String, members: Arc<MemberCerts>) -> Self {
        Self { endpoint, node, members }
    }
}

impl RaftNetworkFactory<TypeConfig> for QuicNetwork {
    type Network = QuicLink;

    async fn new_client(&mut self, target: u64, node: &BasicNode) -> QuicLink {
        QuicLink { net: self.clone(), target, addr: node.addr.parse().ok(), name: node.addr.clone(), conn: None }
    }
}

/// How long a dial may take whatever the call's ttl: a heartbeat's ttl is tens of ms, which a
/// QUIC + TLS handshake on a busy machine can outlast; cut short every time, the link to a
/// restarted master would never come up. A master that cannot be reached still fails the call
/// (`Unreachable`, and openraft backs off) within this.
const DIAL: Duration = Duration::from_secs(1);

/// The connection to one other master.
pub struct QuicLink {
    net: QuicNetwork,
    target: u64,
    addr: Option<SocketAddr>,
    name: String,
    conn: Option<Conn>,
}

#[derive(Debug)]
struct LinkError(String);

impl std::fmt::Display for LinkError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for LinkError {}

type RpcErr<E> = RPCError<u64, BasicNode, RaftError<u64, E>>;

impl QuicLink {
    /// One call within `ttl`: a master that cannot be dialed is `Unreachable` (openraft backs
    /// off), a call that fails on the way is a network error and drops the connection.
    async fn call<M: Message, E: std::error::Error>(
        &mut self,
        msg: &M,
        payload: &[&[u8]],
        ttl: Duration,
    ) -> Result<Frame, RpcErr<E>> {
        let what = |e: &dyn std::fmt::Display| LinkError(format!("master {} at {}: {e}", self.target, self.name));
        let addr = self.addr.ok_or_else(|| RPCError::Unreachable(Unreachable::new(&what(&"not a socket address"))))?;
        if self.conn.as_ref().is_none_or(Conn::is_closed) {
            self.conn = None;
            let dial = Conn::connect(&self.net.endpoint, addr, Role::Master, &self.net.node, Limits::DEFAULT);
            match tokio::time::timeout(ttl.max(DIAL), dial).await {
                Ok(Ok(c)) => {
                    self.net.members.learnt(self.target, &c);
                    self.conn = Some(c);
                }
                Ok(Err(e)) => return Err(RPCError::Unreachable(Unreachable::new(&what(&e)))),
                Err(_) => return Err(RPCError::Unreachable(Unreachable::new(&what(&"dial timed out")))),
            }
        }
        let conn =
            self.conn.as_ref().ok_or_else(|| RPCError::Unreachable(Unreachable::new(&what(&"no connection"))))?;
        match tokio::time::timeout(ttl, conn.call(msg, payload)).await {
            Ok(Ok(f)) => Ok(f),
            Ok(Err(e)) => {
                if e.code().is_none() {
                    self.conn = None;
                }
                // A master that cannot take Raft RPCs now (it learns the group's term after
                // losing its files, or its node stopped) is backed off from as one that cannot
                // be dialed: not asked again, and logged, every heartbeat.
                if e.code() == Some(ErrorCode::Unavailable) {
                    return Err(RPCError::Unreachable(Unreachable::new(&what(&e))));
                }
                Err(RPCError::Network(NetworkError::new(&what(&e))))
            }
            Err(_) => {
                self.conn = None;
                Err(RPCError::Network(NetworkError::new(&what(&"no answer in time"))))
            }
        }
    }

    fn bad_reply<E: std::error::Error>(&self, e: impl std::fmt::Display) -> RpcErr<E> {
        let err = LinkError(format!("master {} at {} sent a bad raft reply: {e}", self.target, self.name));
        RPCError::Network(NetworkError::new(&err))
    }
}

impl RaftNetwork<TypeConfig> for QuicLink {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<u64>, RpcErr<cv_master_raft::openraft::error::Infallible>> {
        let mut payload = Vec::new();
        for e in &rpc.entries {
            payload.extend_from_slice(&encode_entry(e).map_err(|e| self.bad_reply(e))?);
        }
        let msg = RaftAppend {
            vote: to_wire_vote(&rpc.vote),
            prev: rpc.prev_log_id.as_ref().map(to_wire_id),
            commit: rpc.leader_commit.as_ref().map(to_wire_id),
            entries: rpc.entries.len() as u32,
        };
        let f = self.call(&msg, &[&payload], option.hard_ttl()).await?;
        let ok: RaftAppendOk = f.decode_body().map_err(|e| self.bad_reply(e))?;
        Ok(match (ok.outcome, ok.vote) {
            (0, _) => AppendEntriesResponse::Success,
            (1, _) => AppendEntriesResponse::PartialSuccess(ok.matched.as_ref().map(from_wire_id)),
            (2, _) => AppendEntriesResponse::Conflict,
            (3, Some(v)) => AppendEntriesResponse::HigherVote(from_wire_vote(&v)),
            (o, _) => return Err(self.bad_reply(format!("append outcome {o}"))),
        })
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<InstallSnapshotResponse<u64>, RpcErr<InstallSnapshotError>> {
        let m = &rpc.meta;
        let msg = RaftSnapshot {
            vote: to_wire_vote(&rpc.vote),
            last: m.last_log_id.as_ref().map(to_wire_id),
            membership_log: m.last_membership.log_id().as_ref().map(to_wire_id),
            membership: encode_membership(m.last_membership.membership()),
            snapshot_id: m.snapshot_id.clone(),
            offset: rpc.offset,
            done: rpc.done,
        };
        let f = self.call(&msg, &[&rpc.data], option.hard_ttl()).await?;
        let ok: RaftSnapshotOk = f.decode_body().map_err(|e| self.bad_reply(e))?;
        Ok(InstallSnapshotResponse { vote: from_wire_vote(&ok.vote) })
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<u64>,
        option: RPCOption,
    ) -> Result<VoteResponse<u64>, RpcErr<cv_master_raft::openraft::error::Infallible>> {
        let msg = RaftVoteReq { vote: to_wire_vote(&rpc.vote), last: rpc.last_log_id.as_ref().map(to_wire_id) };
        let f = self.call(&msg, &[], option.hard_ttl()).await?;
        let ok: RaftVoteOk = f.decode_body().map_err(|e| self.bad_reply(e))?;
        Ok(VoteResponse {
            vote: from_wire_vote(&ok.vote),
            vote_granted: ok.granted,
            last_log_id: ok.last.as_ref().map(from_wire_id),
        })
    }
}

/// Probes the other masters' addresses (`RaftProbe`) from the client endpoint, as clients and
/// workers dial them: one connection per peer, kept while it lives (a path cut and restored
/// carries it again), dialed anew once closed.
#[derive(Debug, Clone)]
pub struct QuicProber {
    endpoint: quinn::Endpoint,
    node: String,
    me: u64,
    conns: std::sync::Arc<std::sync::Mutex<std::collections::HashMap<u64, Conn>>>,
    members: Arc<MemberCerts>,
}

impl QuicProber {
    pub fn new(endpoint: quinn::Endpoint, node: String, me: u64, members: Arc<MemberCerts>) -> Self {
        Self { endpoint, node, me, conns: Default::default(), members }
    }

    fn conns(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<u64, Conn>> {
        self.conns.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Prober for QuicProber {
    async fn probe(&self, peer: u64, addr: String) -> bool {
        let Ok(addr) = addr.parse::<SocketAddr>() else { return false };
        let cached = self.conns().get(&peer).filter(|c| !c.is_closed()).cloned();
        let conn = match cached {
            Some(c) => c,
            None => match Conn::connect(&self.endpoint, addr, Role::Master, &self.node, Limits::DEFAULT).await {
                Ok(c) => {
                    self.members.learnt(peer, &c);
                    self.conns().insert(peer, c.clone());
                    c
                }
                Err(e) => {
                    tracing::debug!(peer, %addr, error = %e, "probing a master: no connection");
                    return false;
                }
            },
        };
        match conn.call(&RaftProbe { from: self.me }, &[]).await.and_then(|f| Ok(f.decode_body::<RaftProbeOk>()?)) {
            // A master at that address other than the one named is not the one probed.
            Ok(ok) => ok.this == peer,
            Err(e) => {
                tracing::debug!(peer, %addr, error = %e, "probing a master");
                if e.code().is_none() {
                    self.conns().remove(&peer);
                }
                false
            }
        }
    }
}

/// Who sent a Raft message: its peer, checked against the member it claims to be.
pub(super) struct Sender<'a> {
    pub peer: &'a cv_net::rpc::Peer,
    pub members: Option<&'a MemberCerts>,
}

impl Sender<'_> {
    /// Whether the peer may speak as member `id`.
    async fn is(&self, raft: &RaftMaster, id: u64) -> Result<(), Fail> {
        match self.members {
            Some(m) => m.check(raft, self.peer, id).await,
            None => Ok(()),
        }
    }
}

/// Another master's probe: it reached this one.
pub(super) async fn probed(raft: &RaftMaster, from: Sender<'_>, frame: &Frame) -> Result<Reply, Fail> {
    let req: RaftProbe = frame.decode_body()?;
    from.is(raft, req.from).await?;
    raft.probed_by(req.from);
    Ok(Reply::ok(frame.header().request_id, &RaftProbeOk { this: raft.node_id() }, Vec::new()))
}

fn raft_fail(e: impl std::fmt::Display) -> Fail {
    Fail::new(ErrorCode::Unavailable, format!("raft: {e}"))
}

/// A peer's AppendEntries, handed to the local node (refused while it learns the group's term
/// after starting without files).
pub(super) async fn append(raft: &RaftMaster, from: Sender<'_>, frame: &Frame) -> Result<Reply, Fail> {
    let req: RaftAppend = frame.decode_body()?;
    from.is(raft, req.vote.node).await?;
    let entries = decode_entries(frame.payload(), req.entries as usize)
        .map_err(|e| Fail::new(ErrorCode::Malformed, e.to_string()))?;
    let rpc = AppendEntriesRequest {
        vote: from_wire_vote(&req.vote),
        prev_log_id: req.prev.as_ref().map(from_wire_id),
        leader_commit: req.commit.as_ref().map(from_wire_id),
        entries,
    };
    let resp = raft.append_entries(rpc).await.map_err(raft_fail)?;
    let (outcome, matched, vote) = match resp {
        AppendEntriesResponse::Success => (0, None, None),
        AppendEntriesResponse::PartialSuccess(m) => (1, m.as_ref().map(to_wire_id), None),
        AppendEntriesResponse::Conflict => (2, None, None),
        AppendEntriesResponse::HigherVote(v) => (3, None, Some(to_wire_vote(&v))),
    };
    Ok(Reply::ok(frame.header().request_id, &RaftAppendOk { outcome, matched, vote }, Vec::new()))
}

/// A peer's RequestVote (refused while this master catches up after starting without files).
pub(super) async fn vote(raft: &RaftMaster, from: Sender<'_>, frame: &Frame) -> Result<Reply, Fail> {
    let req: RaftVoteReq = frame.decode_body()?;
    from.is(raft, req.vote.node).await?;
    let rpc = VoteRequest { vote: from_wire_vote(&req.vote), last_log_id: req.last.as_ref().map(from_wire_id) };
    let resp = raft.vote(rpc).await.map_err(raft_fail)?;
    let ok = RaftVoteOk {
        vote: to_wire_vote(&resp.vote),
        granted: resp.vote_granted,
        last: resp.last_log_id.as_ref().map(to_wire_id),
    };
    Ok(Reply::ok(frame.header().request_id, &ok, Vec::new()))
}

/// One chunk of a peer's snapshot.
pub(super) async fn snapshot(raft: &RaftMaster, from: Sender<'_>, frame: &Frame) -> Result<Reply, Fail> {
    let req: RaftSnapshot = frame.decode_body()?;
    from.is(raft, req.vote.node).await?;
    let membership = decode_membership(&req.membership).map_err(|e| Fail::new(ErrorCode::Malformed, e.to_string()))?;
    let meta = SnapshotMeta {
        last_log_id: req.last.as_ref().map(from_wire_id),
        last_membership: StoredMembership::new(req.membership_log.as_ref().map(from_wire_id), membership),
        snapshot_id: req.snapshot_id,
    };
    let rpc = InstallSnapshotRequest {
        vote: from_wire_vote(&req.vote),
        meta,
        offset: req.offset,
        data: frame.payload().to_vec(),
        done: req.done,
    };
    let resp = raft.install_snapshot(rpc).await.map_err(raft_fail)?;
    Ok(Reply::ok(frame.header().request_id, &RaftSnapshotOk { vote: to_wire_vote(&resp.vote) }, Vec::new()))
}

/// `cvctl master add|remove`: the change, once committed.
pub(super) async fn change_masters(raft: &RaftMaster, frame: &Frame) -> Result<Reply, Fail> {
    let req: ChangeMasters = frame.decode_body()?;
    if req.add {
        let addr: SocketAddr = req.addr.parse().map_err(|_| {
            Fail::new(ErrorCode::InvalidArgument, format!("master address `{}` is not ip:port", req.addr))
        })?;
        raft.add_master(req.id, &addr.to_string()).await?;
    } else {
        raft.remove_master(req.id).await?;
    }
    Ok(Reply::ok(frame.header().request_id, &Done {}, Vec::new()))
}

/// `cvctl master list`: the group as this master knows it.
pub(super) fn list_masters(raft: &RaftMaster, frame: &Frame) -> Result<Reply, Fail> {
    let (leader, members) = raft.members();
    let members = members.into_iter().map(|(id, addr, voter)| MasterMember { id, addr, voter }).collect();
    let ok = ListMastersOk { this: raft.node_id(), leader, members, applied: raft.applied_index() };
    Ok(Reply::ok(frame.header().request_id, &ok, Vec::new()))
}

/// Raft RPCs: only from a peer whose hello says it is a master.
pub(super) fn master_only(peer: &cv_net::rpc::Peer, kind: cv_wire::Kind) -> Result<(), Fail> {
    if peer.role == Role::Master && peer.cert.role.may_lead() {
        return Ok(());
    }
    Err(Fail::new(
        ErrorCode::PermissionDenied,
        format!("{} is for masters; this peer holds a {}", kind.name(), peer.cert),
    ))
}

/// On a master that started without files: asks the leader, once one reaches it, how far it
/// has applied, and ends the catching up once this master has applied as far
/// (`RaftOptions::catch_up_before_voting`).
pub(super) async fn catch_up(raft: std::sync::Arc<RaftMaster>, endpoint: quinn::Endpoint, node: String) {
    loop {
        tokio::time::sleep(Duration::from_millis(200)).await;
        if !raft.is_catching_up() {
            return;
        }
        let Some((id, addr)) = raft.leader().filter(|(id, _)| *id != raft.node_id()) else { continue };
        let Ok(addr) = addr.parse::<SocketAddr>() else { continue };
        let ask = async {
            let conn = Conn::connect(&endpoint, addr, Role::Master, &node, Limits::DEFAULT).await?;
            let ok: cv_wire::msg::ListMastersOk = conn.call(&cv_wire::msg::ListMasters {}, &[]).await?.decode_body()?;
            conn.quinn().close(0u32.into(), b"done");
            Ok::<_, Box<dyn std::error::Error + Send + Sync>>(ok)
        };
        match tokio::time::timeout(Duration::from_secs(2), ask).await {
            Ok(Ok(ok)) if ok.this == id && ok.leader == Some(id) => {
                tracing::info!(leader = id, applied = ?ok.applied, "catching up with the leader before voting");
                raft.catch_up_to(ok.applied).await;
                return;
            }
            Ok(Ok(_)) => {}
            Ok(Err(e)) => tracing::debug!(leader = id, error = %e, "asking the leader how far it applied"),
            Err(_) => tracing::debug!(leader = id, "asking the leader how far it applied: no answer"),
        }
    }
}
