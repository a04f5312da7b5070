//! A group of real `RaftMaster`s (real openraft, real files) over an in-memory network that
//! loses, delays (so reorders) and cuts messages, driven from a seed.

#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cv_master_core::config::SystemClock;
use cv_master_core::{CvPath, ErrorKind, MasterConfig, MasterCore};
use cv_master_raft::openraft::error::{InstallSnapshotError, NetworkError, RPCError, RaftError, Unreachable};
use cv_master_raft::openraft::network::RPCOption;
use cv_master_raft::openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse, VoteRequest,
    VoteResponse,
};
use cv_master_raft::openraft::{BasicNode, RaftNetwork, RaftNetworkFactory};
use cv_master_raft::{Prober, RaftMaster, RaftOptions, ReadMode, Refused, TypeConfig};

#[derive(Default)]
pub struct Router {
    /// Each master as its peers reach it: through `RaftMaster`, as the QUIC handlers do.
    nodes: Mutex<HashMap<u64, Arc<RaftMaster>>>,
    /// Nodes cut off from every other.
    isolated: Mutex<HashSet<u64>>,
    /// Links cut, both ways (smaller id first).
    cut: Mutex<HashSet<(u64, u64)>>,
    /// Nodes no request reaches, while their own requests (and the replies) go through: a
    /// gray failure, as a firewall dropping what arrives at one master's port.
    inbound_cut: Mutex<HashSet<u64>>,
    /// Messages lost, per thousand (the request or its reply).
    pub loss: AtomicU32,
    rng: Mutex<u64>,
}

#[derive(Debug)]
struct Down(String);
impl std::fmt::Display for Down {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for Down {}

impl Router {
    pub fn new(seed: u64) -> Arc<Self> {
        Arc::new(Self { rng: Mutex::new(seed | 1), ..Self::default() })
    }

    fn roll(&self) -> u64 {
        let mut x = self.rng.lock().unwrap();
        *x ^= *x << 13;
        *x ^= *x >> 7;
        *x ^= *x << 17;
        *x
    }

    pub fn isolate(&self, id: u64, cut: bool) {
        let mut g = self.isolated.lock().unwrap();
        if cut {
            g.insert(id);
        } else {
            g.remove(&id);
        }
    }

    /// Cuts (or restores) the link between `a` and `b`.
    pub fn cut_link(&self, a: u64, b: u64, cut: bool) {
        let mut g = self.cut.lock().unwrap();
        if cut {
            g.insert((a.min(b), a.max(b)));
        } else {
            g.remove(&(a.min(b), a.max(b)));
        }
    }

    /// Cuts (or restores) every request to `id`; its own requests still go through.
    pub fn cut_inbound(&self, id: u64, cut: bool) {
        let mut g = self.inbound_cut.lock().unwrap();
        if cut {
            g.insert(id);
        } else {
            g.remove(&id);
        }
    }

    /// Whether a client can reach master `id`: it is neither isolated nor cut inbound.
    pub fn client_reaches(&self, id: u64) -> bool {
        !self.isolated.lock().unwrap().contains(&id) && !self.inbound_cut.lock().unwrap().contains(&id)
    }

    /// The target if the link is up and the message is not lost; the delay to apply.
    fn route(&self, from: u64, to: u64) -> Result<(Arc<RaftMaster>, Duration), Down> {
        if self.inbound_cut.lock().unwrap().contains(&to) {
            return Err(Down(format!("requests to {to} are dropped")));
        }
        let iso = self.isolated.lock().unwrap();
        if iso.contains(&from) || iso.contains(&to) || self.cut.lock().unwrap().contains(&(from.min(to), from.max(to)))
        {
            return Err(Down(format!("link {from}→{to} is cut")));
        }
        drop(iso);
        let loss = u64::from(self.loss.load(Ordering::Relaxed));
        if loss > 0 && self.roll() % 1000 < loss {
            return Err(Down(format!("message {from}→{to} lost")));
        }
        let delay = Duration::from_micros(self.roll() % 2000);
        let raft = self.nodes.lock().unwrap().get(&to).cloned().ok_or_else(|| Down(format!("master {to} is down")))?;
        Ok((raft, delay))
    }

    fn reply_lost(&self) -> bool {
        let loss = u64::from(self.loss.load(Ordering::Relaxed));
        loss > 0 && self.roll() % 1000 < loss
    }
}

#[derive(Clone)]
pub struct Net {
    router: Arc<Router>,
    from: u64,
}

impl Prober for Net {
    async fn probe(&self, peer: u64, _addr: String) -> bool {
        match self.router.route(self.from, peer) {
            Ok((m, delay)) => {
                tokio::time::sleep(delay).await;
                m.probed_by(self.from);
                !self.router.reply_lost()
            }
            Err(_) => false,
        }
    }
}

pub struct Link {
    router: Arc<Router>,
    from: u64,
    to: u64,
}

impl RaftNetworkFactory<TypeConfig> for Net {
    type Network = Link;
    async fn new_client(&mut self, target: u64, _node: &BasicNode) -> Link {
        Link { router: self.router.clone(), from: self.from, to: target }
    }
}

type E<T> = RPCError<u64, BasicNode, RaftError<u64, T>>;

impl Link {
    /// A refusal travels as the QUIC handlers' error reply does: a network error to openraft.
    async fn call<F, Fut, T, X>(&self, f: F) -> Result<T, E<X>>
    where
        F: FnOnce(Arc<RaftMaster>) -> Fut,
        Fut: std::future::Future<Output = Result<T, Refused>>,
        X: std::error::Error,
    {
        let (raft, delay) =
            self.router.route(self.from, self.to).map_err(|e| RPCError::Unreachable(Unreachable::new(&e)))?;
        tokio::time::sleep(delay).await;
        let r = f(raft).await.map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        if self.router.reply_lost() {
            return Err(RPCError::Network(NetworkError::new(&Down("reply lost".into()))));
        }
        Ok(r)
    }
}

impl RaftNetwork<TypeConfig> for Link {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        _o: RPCOption,
    ) -> Result<AppendEntriesResponse<u64>, E<cv_master_raft::openraft::error::Infallible>> {
        self.call(|m| async move { m.append_entries(rpc).await }).await
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        _o: RPCOption,
    ) -> Result<InstallSnapshotResponse<u64>, E<InstallSnapshotError>> {
        self.call(|m| async move { m.install_snapshot(rpc).await }).await
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<u64>,
        _o: RPCOption,
    ) -> Result<VoteResponse<u64>, E<cv_master_raft::openraft::error::Infallible>> {
        self.call(|m| async move { m.vote(rpc).await }).await
    }
}

pub struct Group {
    pub router: Arc<Router>,
    root: tempfile::TempDir,
    pub masters: BTreeMap<u64, Arc<RaftMaster>>,
    pub ids: Vec<u64>,
    pub snapshot_every: u64,
    pub read_mode: ReadMode,
}

impl Group {
    pub async fn new(n: u64, seed: u64, snapshot_every: u64) -> Self {
        let mut g = Group {
            router: Router::new(seed),
            root: tempfile::tempdir().unwrap(),
            masters: BTreeMap::new(),
            ids: (1..=n).collect(),
            snapshot_every,
            read_mode: ReadMode::Lease,
        };
        for id in g.ids.clone() {
            g.start(id).await;
        }
        let members = g.ids.iter().map(|&id| (id, BasicNode::new(format!("mem:{id}")))).collect();
        g.masters[&1].initialize(members).await.unwrap();
        g
    }

    pub fn dir(&self, id: u64) -> std::path::PathBuf {
        self.root.path().join(format!("m{id}"))
    }

    pub async fn start(&mut self, id: u64) {
        self.start_with(id, false).await
    }

    /// Starts master `id`; `catch_up` as the server starts every master (a master without
    /// files learns the group's term, and votes only once caught up).
    pub async fn start_with(&mut self, id: u64, catch_up: bool) {
        let mut opts = RaftOptions::new(id, self.dir(id));
        opts.snapshot_every = self.snapshot_every;
        opts.read_mode = self.read_mode;
        opts.catch_up_before_voting = catch_up;
        opts.peers = self.ids.iter().map(|&p| (p, format!("mem:{p}"))).collect();
        let config = MasterConfig { block_size: 64 * 1024, ..MasterConfig::default() };
        let net = Net { router: self.router.clone(), from: id };
        let m = Arc::new(RaftMaster::start(opts, config, Arc::new(SystemClock), net.clone()).await.unwrap());
        m.start_probing(net);
        self.router.nodes.lock().unwrap().insert(id, m.clone());
        self.masters.insert(id, m);
    }

    /// Stops a master as a crash does: nothing more reaches its files.
    pub async fn kill(&mut self, id: u64) {
        self.router.nodes.lock().unwrap().remove(&id);
        if let Some(m) = self.masters.remove(&id) {
            m.shutdown().await;
        }
    }

    /// The master that leads, once one does (within `timeout`).
    pub async fn leader(&self, timeout: Duration) -> u64 {
        let end = Instant::now() + timeout;
        loop {
            if let Some((&id, _)) =
                self.masters.iter().find(|(id, m)| m.is_leading() && self.router.client_reaches(**id))
            {
                return id;
            }
            assert!(Instant::now() < end, "no master leads after {timeout:?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub fn core(&self, id: u64) -> Arc<MasterCore> {
        self.masters[&id].core().clone()
    }

    /// Waits until every running master holds the same state, and returns it.
    pub async fn converged(&self, timeout: Duration) -> cv_master_core::state::StateData {
        let ids: Vec<u64> = self.masters.keys().copied().collect();
        self.converged_among(&ids, timeout).await
    }

    /// Waits until masters `ids` hold the same state, and returns it.
    pub async fn converged_among(&self, ids: &[u64], timeout: Duration) -> cv_master_core::state::StateData {
        let end = Instant::now() + timeout;
        loop {
            let states: Vec<_> =
                ids.iter().map(|id| &self.masters[id]).map(|m| (m.core().last_seq(), m.core().state_data())).collect();
            if states.windows(2).all(|w| w[0] == w[1]) {
                return states[0].1.clone();
            }
            assert!(
                Instant::now() < end,
                "masters did not converge: seqs {:?}",
                states.iter().map(|s| s.0).collect::<Vec<_>>()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// One mkdir through whichever master leads, as a client does: `NotLeader` and lost leaders
/// are retried on the next; gives up after `timeout`. `Ok(true)` if acknowledged.
pub async fn mkdir(group: &Group, path: &str, timeout: Duration) -> bool {
    let p = CvPath::parse(path).unwrap();
    let end = Instant::now() + timeout;
    while Instant::now() < end {
        for (id, m) in &group.masters {
            if !group.router.client_reaches(*id) {
                continue;
            }
            let r = match m.core().begin_mkdir(&p, true) {
                Ok(pending) => pending.wait_async().await,
                Err(e) => Err(e),
            };
            match r {
                Ok(()) => return true,
                Err(e) if e.kind() == ErrorKind::NotLeader || e.kind() == ErrorKind::Poisoned => {}
                Err(e) => panic!("mkdir {path}: {e}"),
            }
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    false
}
