//! One master of a replicated group: its core, its Raft node, and the tasks that tie them
//! (records into entries, leadership into `set_leading`, quorum rounds into read proofs).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cv_master_core::config::Clock;
use cv_master_core::journal::{FileStorage, Storage};
use cv_master_core::state::State;
use cv_master_core::{Error, ErrorKind, MasterConfig, MasterCore, Result};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse, VoteRequest,
    VoteResponse,
};
use openraft::{BasicNode, Raft, RaftNetworkFactory, ServerState, SnapshotPolicy, StoredMembership};
use tokio::task::JoinHandle;

use crate::TypeConfig;
use crate::fitness::Unfit;
use crate::log_store::FileLog;
use crate::machine::{Applied, Machine, Node, Stored};
use crate::raft_log::{RaftLog, submit};
use crate::reach::{Prober, Reach, Verdict, probe_loop};
pub use crate::shared::ReadMode;
use crate::shared::{Shared, lock};
use crate::snapshot;
use crate::term_floor::{self, Refused, TermFloor};

/// How one master takes part in the group.
#[derive(Debug, Clone)]
pub struct RaftOptions {
    pub node_id: u64,
    /// Where `raft-log`, `raft-vote` and `raft-snapshot` live.
    pub dir: PathBuf,
    pub heartbeat: Duration,
    pub election_min: Duration,
    pub election_max: Duration,
    pub read_mode: ReadMode,
    /// A snapshot is built once this many entries were applied since the last one.
    pub snapshot_every: u64,
    /// Bytes per snapshot chunk sent to a follower.
    pub snapshot_chunk: u64,
    /// A master that starts with no Raft files at all (a new member, or one whose disk was
    /// lost) neither stands for election nor grants a vote until it holds everything the
    /// leader had applied when it first asked ([`RaftMaster::catch_up_to`]): a wiped voter
    /// that voted at once could elect a leader lacking entries it had acknowledged before.
    /// Off for the master that founds the group.
    pub catch_up_before_voting: bool,
    /// The group as configured, `(id, address)`, this master included: whom a master that
    /// started without files asks for the group's term before it takes entries
    /// (`term_floor.rs`). Empty: it asks no one and is not held.
    pub peers: Vec<(u64, String)>,
    /// How far back the probes between masters are judged (`reach.rs`): a master that reaches
    /// the others but has not been reached by enough of them for this long stops leading.
    pub reach_window: Duration,
}

impl RaftOptions {
    /// Defaults: a dead leader is replaced in about half a second to a second (heartbeat
    /// 60 ms, election timeout 250–500 ms; a follower refuses votes until the leader's lease,
    /// the longest timeout, is over since its last heartbeat, so a first candidate that fires
    /// early is refused and tries again).
    pub fn new(node_id: u64, dir: PathBuf) -> Self {
        Self {
            node_id,
            dir,
            heartbeat: Duration::from_millis(60),
            election_min: Duration::from_millis(250),
            election_max: Duration::from_millis(500),
            read_mode: ReadMode::Lease,
            snapshot_every: 20_000,
            snapshot_chunk: 4 << 20,
            catch_up_before_voting: false,
            peers: Vec::new(),
            reach_window: Duration::from_secs(1),
        }
    }

    fn raft_config(&self) -> Result<openraft::Config> {
        let ms = |d: Duration| d.as_millis() as u64;
        openraft::Config {
            cluster_name: "cv-masters".into(),
            heartbeat_interval: ms(self.heartbeat),
            election_timeout_min: ms(self.election_min),
            election_timeout_max: ms(self.election_max),
            snapshot_policy: SnapshotPolicy::LogsSinceLast(self.snapshot_every.max(1)),
            snapshot_max_chunk_size: self.snapshot_chunk.max(64 << 10),
            max_in_snapshot_log_to_keep: 1000,
            ..Default::default()
        }
        .validate()
        .map_err(|e| Error::new(ErrorKind::InvalidArgument, format!("raft timeouts: {e}")))
    }
}

/// A running master of a Raft group. Serve requests through [`Self::core`]; Raft's own RPCs go
/// to [`Self::raft`].
pub struct RaftMaster {
    core: Arc<MasterCore>,
    raft: Raft<TypeConfig>,
    node: Arc<Node>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
    /// Who reached this master and whom it reached (`reach.rs`).
    reach: Arc<Reach>,
    /// Started with no Raft files: leaders of terms below the group's are refused.
    floor: Arc<TermFloor>,
}

impl std::fmt::Debug for RaftMaster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RaftMaster").field("node", &self.node.shared.me).finish()
    }
}

fn io(what: &str, dir: &std::path::Path, e: &dyn std::fmt::Display) -> Error {
    Error::new(ErrorKind::Io, format!("{what} in {}: {e}", dir.display()))
}

impl RaftMaster {
    /// Opens this master's Raft files (the snapshot, then the log) and starts its node. A
    /// fresh directory is a node with no log that waits to be made a member (or
    /// [`Self::initialize`]d).
    pub async fn start<N: RaftNetworkFactory<TypeConfig> + Clone>(
        opts: RaftOptions,
        config: MasterConfig,
        clock: Arc<dyn Clock>,
        network: N,
    ) -> Result<Self> {
        let raft_config = Arc::new(opts.raft_config()?);
        let dir = opts.dir.clone();
        let pristine = !["raft-log", "raft-vote", "raft-snapshot"].iter().any(|f| dir.join(f).exists());
        let log = FileLog::open(&dir).map_err(|e| io("opening the raft log", &dir, &e))?;
        let mut snapshot_file = FileStorage::new(dir.join("raft-snapshot"));
        let bytes = snapshot_file.read_all().map_err(|e| io("reading the raft snapshot", &dir, &e))?;
        let (state, seq, current, applied) = if bytes.is_empty() {
            (State::new(), 0, None, Applied { last: None, membership: StoredMembership::default() })
        } else {
            let (meta, seq, data) = snapshot::decode(&bytes)
                .map_err(|e| Error::new(ErrorKind::CorruptData, format!("raft snapshot in {}: {e}", dir.display())))?;
            let applied = Applied { last: meta.last_log_id, membership: meta.last_membership.clone() };
            (State::from_data(data), seq, Some(Stored { meta, file: Arc::new(bytes) }), applied)
        };
        let shared = Arc::new(Shared::new(opts.node_id, opts.read_mode, opts.election_min, seq));
        let (raft_log, queue) = RaftLog::new(shared.clone());
        let core = Arc::new(MasterCore::replicated(config, state, seq, Box::new(raft_log), clock)?);
        let node = Arc::new(Node {
            shared: shared.clone(),
            core: core.clone(),
            started_with: log.last_log_id(),
            log: log.clone(),
            current: Mutex::new(current),
            applied: Mutex::new(applied),
            snapshot_file: Mutex::new(snapshot_file),
        });
        let raft = Raft::new(opts.node_id, raft_config, network.clone(), log, Machine(node.clone()))
            .await
            .map_err(|e| Error::new(ErrorKind::Io, format!("starting raft node {}: {e}", opts.node_id)))?;
        let mut tasks = vec![
            tokio::spawn(submit(raft.clone(), shared.clone(), queue)),
            tokio::spawn(watch_leadership(raft.clone(), node.clone())),
            tokio::spawn(prove_leadership(raft.clone(), node.clone(), opts.heartbeat, opts.election_max)),
        ];
        let reach = Arc::new(Reach::new(opts.node_id, opts.reach_window));
        tasks.push(tokio::spawn(keep_fit(raft.clone(), node.clone(), reach.clone(), opts.heartbeat)));
        let catching_up = pristine && opts.catch_up_before_voting;
        let others = opts.peers.iter().filter(|(id, _)| *id != opts.node_id).count();
        let floor = Arc::new(TermFloor::new(opts.node_id, catching_up, others));
        if floor.is_learning() {
            tasks.push(tokio::spawn(term_floor::learn(floor.clone(), network, opts.peers.clone(), opts.election_max)));
        }
        shared.fitness.set(Unfit::CatchingUp, catching_up);
        shared.fitness.apply(&raft);
        tracing::info!(node = opts.node_id, seq, pristine, dir = %dir.display(), "raft master started");
        Ok(Self { core, raft, node, tasks: Mutex::new(tasks), reach, floor })
    }

    pub fn core(&self) -> &Arc<MasterCore> {
        &self.core
    }

    pub fn raft(&self) -> &Raft<TypeConfig> {
        &self.raft
    }

    pub fn node_id(&self) -> u64 {
        self.node.shared.me
    }

    /// The leader the metrics name, with its address.
    pub fn leader(&self) -> Option<(u64, String)> {
        self.node.shared.glue().leader.clone()
    }

    /// Whether this master takes mutations now.
    pub fn is_leading(&self) -> bool {
        self.core.is_leading()
    }

    /// A vote request from a peer: refused while this master catches up after starting with no
    /// files (it may have voted in this term before its disk was lost).
    pub async fn vote(&self, rpc: VoteRequest<u64>) -> std::result::Result<VoteResponse<u64>, Refused> {
        self.reach.heard_from(rpc.vote.leader_id.node_id);
        if self.is_catching_up() {
            let m = self.raft.metrics().borrow().clone();
            let last_log_id = m.last_applied;
            return Ok(VoteResponse { vote: m.vote, vote_granted: false, last_log_id });
        }
        self.raft.vote(rpc).await.map_err(Refused::raft)
    }

    /// A leader's entries (or heartbeat), unless this master started without files and has
    /// not yet learned the group's term, or the leader's term is below it (`term_floor.rs`).
    pub async fn append_entries(
        &self,
        rpc: AppendEntriesRequest<TypeConfig>,
    ) -> std::result::Result<AppendEntriesResponse<u64>, Refused> {
        self.reach.heard_from(rpc.vote.leader_id.node_id);
        if let Some(floor) = self.floor.check(&rpc.vote)? {
            return Ok(AppendEntriesResponse::HigherVote(floor));
        }
        self.raft.append_entries(rpc).await.map_err(Refused::raft)
    }

    /// A chunk of a leader's snapshot, under the same rule as [`Self::append_entries`].
    pub async fn install_snapshot(
        &self,
        rpc: InstallSnapshotRequest<TypeConfig>,
    ) -> std::result::Result<InstallSnapshotResponse<u64>, Refused> {
        self.reach.heard_from(rpc.vote.leader_id.node_id);
        if let Some(floor) = self.floor.check(&rpc.vote)? {
            return Ok(InstallSnapshotResponse { vote: floor });
        }
        self.raft.install_snapshot(rpc).await.map_err(Refused::raft)
    }

    /// Whether this master started without files and still learns the group's term.
    pub fn is_learning_term(&self) -> bool {
        self.floor.is_learning()
    }

    /// Whether this master still catches up before it may vote.
    pub fn is_catching_up(&self) -> bool {
        self.node.shared.fitness.is(Unfit::CatchingUp)
    }

    /// Starts probing the other voters' addresses with `prober` (four probes per
    /// `reach_window`). Until then, and without it, this master never judges itself
    /// unreachable: it has reached no one.
    pub fn start_probing<P: Prober>(&self, prober: P) {
        let raft = self.raft.clone();
        let me = self.node_id();
        let targets = move || {
            let m = raft.metrics().borrow().clone();
            let membership = m.membership_config.membership();
            let voters: std::collections::BTreeSet<u64> = membership.voter_ids().collect();
            membership
                .nodes()
                .filter(|(id, _)| **id != me && voters.contains(id))
                .map(|(id, n)| (*id, n.addr.clone()))
                .collect()
        };
        let every = self.reach.window() / 4;
        let task = tokio::spawn(probe_loop(Arc::new(prober), self.reach.clone(), targets, every));
        lock(&self.tasks).push(task);
    }

    /// Master `from` probed this one (the handler of its `RaftProbe`).
    pub fn probed_by(&self, from: u64) {
        self.reach.heard_from(from);
    }

    /// Whether this master stepped aside because the other masters cannot reach it.
    pub fn is_unreachable(&self) -> bool {
        self.node.shared.fitness.is(Unfit::Unreachable)
    }

    /// The last log index applied here.
    pub fn applied_index(&self) -> Option<u64> {
        self.raft.metrics().borrow().last_applied.map(|l| l.index)
    }

    /// Ends the catching up once everything up to `index` (what the leader had applied when
    /// asked) is applied here; then this master votes and stands for election again. `None`
    /// on the master that founds the group: it has nothing to catch up, nor a term to learn.
    pub async fn catch_up_to(&self, index: Option<u64>) {
        if index.is_none() {
            self.floor.not_needed();
        }
        if let Some(i) = index {
            let _ = self.raft.wait(None).applied_index_at_least(Some(i), "catch up before voting").await;
        }
        self.node.shared.fitness.set(Unfit::CatchingUp, false);
        self.node.shared.fitness.apply(&self.raft);
        tracing::info!(node = self.node_id(), index, "caught up with the leader: votes again");
    }

    /// Makes a new group of `members` (only on a pristine node; an initialized one refuses).
    pub async fn initialize(&self, members: BTreeMap<u64, BasicNode>) -> Result<()> {
        self.raft
            .initialize(members)
            .await
            .map_err(|e| Error::new(ErrorKind::InvalidArgument, format!("initializing raft group: {e}")))
    }

    /// Adds master `id` at `addr` to the group: first as a learner, replicated to until it has
    /// caught up with the leader's log, then promoted to voter (two membership entries, joint
    /// then uniform). Only on the leader.
    pub async fn add_master(&self, id: u64, addr: &str) -> Result<()> {
        self.raft.add_learner(id, BasicNode::new(addr), true).await.map_err(|e| self.membership_err("add", id, &e))?;
        let mut voters = self.voters();
        voters.insert(id);
        self.raft.change_membership(voters, false).await.map_err(|e| self.membership_err("promote", id, &e))?;
        tracing::info!(node = self.node_id(), id, addr, "master added to the group");
        Ok(())
    }

    /// On the master that founded the group alone: adds the other `peers` as learners, and
    /// makes each a voter once it has every entry the leader has (so a founding group's
    /// members vote only once they hold the log: see `catch_up_before_voting`). Returns once
    /// all are voters, or this master no longer leads.
    pub async fn grow_to(&self, peers: Vec<(u64, String)>) {
        let me = self.node_id();
        let others: Vec<(u64, String)> = peers.into_iter().filter(|(id, _)| *id != me).collect();
        for (id, addr) in &others {
            while let Err(e) = self.raft.add_learner(*id, BasicNode::new(addr.clone()), false).await {
                tracing::debug!(id, error = %e, "adding a founding master as a learner");
                if self.raft.metrics().borrow().current_leader != Some(me) {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
        }
        loop {
            let m = self.raft.metrics().borrow().clone();
            if m.current_leader != Some(me) {
                return;
            }
            let voters = self.voters();
            let missing: Vec<u64> = others.iter().map(|(id, _)| *id).filter(|id| !voters.contains(id)).collect();
            if missing.is_empty() {
                tracing::info!(voters = ?voters, "the founding masters all vote");
                return;
            }
            let matched = |id: &u64| m.replication.as_ref().and_then(|r| r.get(id).copied().flatten()).map(|l| l.index);
            let ready: Vec<u64> = missing.into_iter().filter(|id| matched(id) >= m.last_log_index).collect();
            if !ready.is_empty() {
                let mut next = voters;
                next.extend(ready);
                if let Err(e) = self.raft.change_membership(next, false).await {
                    tracing::debug!(error = %e, "promoting founding masters");
                }
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Removes master `id` from the group (its files stay; it serves nothing more). Only on
    /// the leader; the group keeps a majority of the rest.
    pub async fn remove_master(&self, id: u64) -> Result<()> {
        let mut voters = self.voters();
        if !voters.remove(&id) {
            return Err(Error::new(ErrorKind::NotFound, format!("master {id} is not a voter of the group")));
        }
        if voters.is_empty() {
            return Err(Error::new(ErrorKind::InvalidArgument, "the group's last master cannot be removed"));
        }
        self.raft.change_membership(voters, false).await.map_err(|e| self.membership_err("remove", id, &e))?;
        tracing::info!(node = self.node_id(), id, "master removed from the group");
        Ok(())
    }

    /// The group as the metrics say: the leader, and each member `(id, address, voter)`.
    pub fn members(&self) -> (Option<u64>, Vec<(u64, String, bool)>) {
        let m = self.raft.metrics().borrow().clone();
        let membership = m.membership_config.membership();
        let voters: std::collections::BTreeSet<u64> = membership.voter_ids().collect();
        let members = membership.nodes().map(|(id, n)| (*id, n.addr.clone(), voters.contains(id))).collect();
        (m.current_leader, members)
    }

    fn voters(&self) -> std::collections::BTreeSet<u64> {
        self.raft.metrics().borrow().membership_config.membership().voter_ids().collect()
    }

    fn membership_err(
        &self,
        what: &str,
        id: u64,
        e: &openraft::error::RaftError<u64, openraft::error::ClientWriteError<u64, BasicNode>>,
    ) -> Error {
        use openraft::error::{ClientWriteError, RaftError};
        match e {
            RaftError::APIError(ClientWriteError::ForwardToLeader(f)) => {
                crate::shared::not_leader(f.leader_id.zip(f.leader_node.clone()).map(|(i, n)| (i, n.addr)).as_ref())
            }
            other => Error::new(ErrorKind::InvalidArgument, format!("{what} master {id}: {other}")),
        }
    }

    /// Stops the tasks and the Raft node.
    pub async fn shutdown(&self) {
        for t in lock(&self.tasks).drain(..) {
            t.abort();
        }
        if let Err(e) = self.raft.shutdown().await {
            tracing::warn!(node = self.node.shared.me, error = %e, "raft shutdown");
        }
        self.core.set_leading(false);
    }
}

/// Follows the metrics: records which term this node leads (the core starts leading once its
/// Blank entry is applied, `Node::maybe_lead`), stops the core the moment it does not.
async fn watch_leadership(raft: Raft<TypeConfig>, node: Arc<Node>) {
    let mut rx = raft.metrics();
    loop {
        let m = rx.borrow_and_update().clone();
        let me = node.shared.me;
        let leads = m.state == ServerState::Leader && m.current_leader == Some(me);
        // A leader unfit to lead names no leader: clients sent back to it would find it again.
        let leader = m
            .current_leader
            .filter(|id| *id != me || node.shared.fitness.may_lead())
            .and_then(|id| m.membership_config.membership().get_node(&id).map(|n| (id, n.addr.clone())));
        {
            let _t = lock(&node.shared.transition);
            node.shared.glue().leader = leader;
            if leads {
                node.shared.glue().leader_of = Some(m.current_term);
                if let Err(e) = node.maybe_lead() {
                    tracing::error!(node = me, error = %e, "cannot take the lead");
                }
            } else {
                let was = node.shared.glue().leader_of.take().is_some();
                if was || node.core.is_leading() {
                    node.core.set_leading(false);
                    crate::shared::Shared::deposed(&mut node.shared.glue());
                    tracing::info!(node = me, term = m.current_term, leader = ?m.current_leader, "master stopped leading");
                }
            }
        }
        if m.running_state.is_err() {
            node.shared.failed.store(true, std::sync::atomic::Ordering::Release);
        }
        if rx.changed().await.is_err() {
            return;
        }
    }
}

/// Proves leadership to reads by quorum rounds: every heartbeat interval (the lease), or
/// whenever reads wait (ReadIndex). A leader whose round fails once its lease is over stops
/// taking work (openraft 0.9 keeps a leader cut off from the majority a leader until it hears
/// a higher term); a later round that succeeds gives it back.
async fn prove_leadership(raft: Raft<TypeConfig>, node: Arc<Node>, every: Duration, round_timeout: Duration) {
    loop {
        match node.shared.read_mode {
            ReadMode::Lease => tokio::time::sleep(every).await,
            ReadMode::ReadIndex => {
                if !node.shared.reads_waiting() {
                    let _ = tokio::time::timeout(every, node.shared.round_wanted.notified()).await;
                }
            }
        }
        // A master unfit to lead sends nothing that would keep the others following it.
        if node.shared.glue().leader_of.is_none() || !node.shared.fitness.may_lead() {
            continue;
        }
        let since = Instant::now();
        let ok = matches!(tokio::time::timeout(round_timeout, raft.get_read_log_id()).await, Ok(Ok(_)));
        let _t = lock(&node.shared.transition);
        if ok {
            node.shared.confirmed(since);
            if !node.core.is_leading()
                && let Err(e) = node.maybe_lead()
            {
                tracing::error!(node = node.shared.me, error = %e, "cannot take the lead back");
            }
        } else if node.core.is_leading() && !node.shared.lease_valid() {
            node.core.set_leading(false);
            let mut g = node.shared.glue();
            g.cut_off = g.leader_of;
            crate::shared::Shared::deposed(&mut g);
            drop(g);
            tracing::warn!(node = node.shared.me, "leader cut off from a majority: stops taking work");
        }
    }
}

/// Judges, every heartbeat interval, whether this master may lead (`fitness.rs`): the probes
/// between masters (`reach.rs`), and whether its log is writable. A master that turns unfit
/// stops taking work, sending heartbeats and standing for election, so the others elect a
/// leader that can serve; once fit again it does all three again (a leader it still is takes
/// work back only after a quorum round succeeds, `prove_leadership`).
async fn keep_fit(raft: Raft<TypeConfig>, node: Arc<Node>, reach: Arc<Reach>, every: Duration) {
    let mut was_fit = true;
    loop {
        tokio::time::sleep(every).await;
        let voters: std::collections::BTreeSet<u64> =
            raft.metrics().borrow().membership_config.membership().voter_ids().collect();
        let verdict = reach.verdict(&voters, Instant::now());
        let fitness = &node.shared.fitness;
        if fitness.set(Unfit::Unreachable, verdict != Verdict::Reachable) {
            match verdict {
                Verdict::Unreachable { reached, heard, need } => tracing::warn!(
                    node = node.shared.me,
                    reached,
                    heard,
                    need,
                    window = ?reach.window(),
                    "this master reaches the others but too few of them reach it (clients, which dial the same \
                     address, likely cannot either): it steps aside"
                ),
                Verdict::Reachable => tracing::info!(node = node.shared.me, "the other masters reach this one again"),
            }
        }
        fitness.set(Unfit::JournalFull, node.log.space().is_full());
        let fit = fitness.may_lead();
        if fit == was_fit {
            continue;
        }
        was_fit = fit;
        fitness.apply(&raft);
        if !fit {
            let _t = lock(&node.shared.transition);
            let mut g = node.shared.glue();
            if g.leader_of.is_some() || node.core.is_leading() {
                node.core.set_leading(false);
                g.cut_off = g.leader_of;
                // Clients told "NotLeader" must not be sent back here.
                g.leader = None;
                crate::shared::Shared::deposed(&mut g);
                tracing::warn!(node = node.shared.me, "leader unfit to lead: stops taking work and heartbeats");
            }
        }
    }
}
