//! Seeded simulation: random operations against MasterCore on crashable in-memory storage, with
//! crashes at random points (including mid-write, with torn unsynced bytes) and restarts, and
//! disks that fill up (a write that does not fit fails `NoSpace` and must leave nothing behind,
//! live or after a restart) and get room again. After every restart the namespace must equal a
//! simple model, and every acknowledged mutation must have survived. CV_SIM_SEEDS (default 50) and CV_SIM_OPS (default 300) scale it; CV_SIM_SEED
//! runs one seed.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use cv_master_core::config::ManualClock;
use cv_master_core::core::Storages;
use cv_master_core::journal::MemStorage;
use cv_master_core::state::{InodeBody, MountMode, ROOT_ID, StateData};
use cv_master_core::{CvPath, ErrorKind, MasterConfig, MasterCore};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

const TIMEOUT_MS: u64 = 5_000;
const BLOCK: u64 = 1_000;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Node {
    Dir,
    File { id: u64, blocks: usize, len: u64, complete: bool },
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Worker {
    last_hb: u64,
    live: bool,
}

/// The simple model: paths to kinds, mounts, workers.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
struct Model {
    nodes: BTreeMap<String, Node>,
    /// Files created over another, held back until complete: id to (the path they will
    /// take, the file).
    held: BTreeMap<u64, (String, Node)>,
    mounts: BTreeMap<String, String>,
    workers: BTreeMap<u64, Worker>,
}

type R = Result<(), ErrorKind>;

fn ancestors(p: &str) -> Vec<String> {
    let parts: Vec<&str> = p.split('/').filter(|c| !c.is_empty()).collect();
    (1..parts.len()).map(|i| format!("/{}", parts[..i].join("/"))).collect()
}

fn under(p: &str, dir: &str) -> bool {
    p == dir || (p.starts_with(dir) && p.as_bytes().get(dir.len()) == Some(&b'/'))
}

impl Model {
    fn new() -> Self {
        let mut m = Self::default();
        m.nodes.insert("/".into(), Node::Dir);
        m
    }

    /// Proper ancestors top-down: a missing one is NotFound, a file is NotADirectory.
    fn check_ancestors(&self, p: &str) -> R {
        for a in ancestors(p) {
            match self.nodes.get(&a) {
                None => return Err(ErrorKind::NotFound),
                Some(Node::File { .. }) => return Err(ErrorKind::NotADirectory),
                Some(Node::Dir) => {}
            }
        }
        Ok(())
    }

    fn lookup(&self, p: &str) -> Result<&Node, ErrorKind> {
        self.check_ancestors(p)?;
        self.nodes.get(p).ok_or(ErrorKind::NotFound)
    }

    fn mkdir(&mut self, p: &str, parents: bool) -> R {
        let mut missing = None;
        for a in ancestors(p) {
            match self.nodes.get(&a) {
                None => {
                    missing = Some(a);
                    break;
                }
                Some(Node::File { .. }) => return Err(ErrorKind::NotADirectory),
                Some(Node::Dir) => {}
            }
        }
        if missing.is_none() {
            return match (self.nodes.get(p), parents) {
                (Some(Node::Dir), true) => Ok(()),
                (Some(_), _) => Err(ErrorKind::AlreadyExists),
                (None, _) => {
                    self.nodes.insert(p.into(), Node::Dir);
                    Ok(())
                }
            };
        }
        if !parents {
            return Err(ErrorKind::NotFound);
        }
        for a in ancestors(p) {
            self.nodes.entry(a).or_insert(Node::Dir);
        }
        self.nodes.insert(p.into(), Node::Dir);
        Ok(())
    }

    /// `Ok(true)`: the new file is held back (it replaces a file when complete).
    fn create(&mut self, p: &str, overwrite: bool) -> Result<bool, ErrorKind> {
        if p == "/" {
            return Err(ErrorKind::IsADirectory);
        }
        self.check_ancestors(p)?;
        match self.nodes.get(p) {
            Some(Node::Dir) => Err(ErrorKind::IsADirectory),
            Some(Node::File { .. }) if !overwrite => Err(ErrorKind::AlreadyExists),
            Some(Node::File { .. }) => Ok(true),
            None => Ok(false),
        }
    }

    /// Completes file `id` (checked already) as `done`: a held-back one is published at its
    /// path, where a complete file is replaced and one being written is held back in turn.
    fn publish(&mut self, id: u64, done: Node) -> R {
        let Some((p, _)) = self.held.get(&id).cloned() else {
            *self.file_by_id(id).expect("checked") = done;
            return Ok(());
        };
        if matches!(self.nodes.get(&p), Some(Node::Dir)) {
            return Err(ErrorKind::IsADirectory);
        }
        self.held.remove(&id);
        if let Some(old @ Node::File { complete: false, id: old_id, .. }) = self.nodes.insert(p.clone(), done) {
            self.held.insert(old_id, (p, old));
        }
        Ok(())
    }

    fn rename(&mut self, src: &str, dst: &str) -> R {
        if src == "/" || dst == "/" {
            return Err(ErrorKind::InvalidArgument);
        }
        let is_dir = matches!(self.lookup(src)?, Node::Dir);
        if src == dst {
            return Ok(());
        }
        if is_dir && under(dst, src) {
            return Err(ErrorKind::InvalidArgument);
        }
        self.check_ancestors(dst)?;
        if self.nodes.contains_key(dst) {
            return Err(ErrorKind::AlreadyExists);
        }
        let moved: Vec<String> = self.nodes.keys().filter(|k| under(k, src)).cloned().collect();
        for k in moved {
            let node = self.nodes.remove(&k).unwrap();
            self.nodes.insert(format!("{dst}{}", &k[src.len()..]), node);
        }
        // A held-back file moves with its directory, not with the file it replaces.
        for (p, _) in self.held.values_mut() {
            if under(p, src) && p != src {
                *p = format!("{dst}{}", &p[src.len()..]);
            }
        }
        Ok(())
    }

    fn delete(&mut self, p: &str, recursive: bool) -> R {
        if p == "/" {
            return Err(ErrorKind::InvalidArgument);
        }
        self.lookup(p)?;
        let sub: Vec<String> = self.nodes.keys().filter(|k| under(k, p)).cloned().collect();
        if sub.len() > 1 && !recursive {
            return Err(ErrorKind::NotEmpty);
        }
        for k in sub {
            self.nodes.remove(&k);
        }
        // Held-back files aimed into a removed directory go with it.
        self.held.retain(|_, (h, _)| !(under(h, p) && h != p));
        Ok(())
    }

    fn file_by_id(&mut self, id: u64) -> Option<&mut Node> {
        let held = self.held.values_mut().map(|(_, n)| n);
        self.nodes.values_mut().chain(held).find(|n| matches!(n, Node::File { id: i, .. } if *i == id))
    }

    fn live_workers(&self) -> bool {
        self.workers.values().any(|w| w.live)
    }

    /// `started`: when the master last started; silence counts from then at the earliest.
    fn tick(&mut self, now: u64, started: u64) {
        for w in self.workers.values_mut() {
            if w.live && now.saturating_sub(w.last_hb.max(started)) > TIMEOUT_MS {
                w.live = false;
            }
        }
    }
}

/// The model's view of what the master holds.
fn observe(d: &StateData) -> Model {
    let mut m = Model::default();
    let mut stack = vec![("/".to_owned(), ROOT_ID)];
    while let Some((path, id)) = stack.pop() {
        let inode = &d.inodes[&id];
        match &inode.body {
            InodeBody::Dir { children } => {
                m.nodes.insert(path.clone(), Node::Dir);
                for (name, child) in children {
                    let p = if path == "/" { format!("/{name}") } else { format!("{path}/{name}") };
                    stack.push((p, *child));
                }
            }
            InodeBody::File(f) => {
                let complete = f.state == cv_master_core::state::FileState::Complete;
                let node = Node::File { id, blocks: f.blocks.len(), len: f.length, complete };
                m.nodes.insert(path, node);
            }
        }
    }
    // Files no directory lists: held back, at the path they will take.
    for (id, inode) in &d.inodes {
        let InodeBody::File(f) = &inode.body else { continue };
        if m.nodes.values().any(|n| matches!(n, Node::File { id: i, .. } if i == id)) {
            continue;
        }
        let mut names = vec![inode.name.clone()];
        let mut cur = inode.parent;
        while cur != ROOT_ID {
            names.push(d.inodes[&cur].name.clone());
            cur = d.inodes[&cur].parent;
        }
        names.reverse();
        let node = Node::File { id: *id, blocks: f.blocks.len(), len: f.length, complete: false };
        m.held.insert(*id, (format!("/{}", names.join("/")), node));
    }
    m.mounts = d.mounts.iter().map(|(k, v)| (k.clone(), v.ufs_url.clone())).collect();
    m.workers = d.workers.iter().map(|(id, w)| (*id, Worker { last_hb: w.last_heartbeat, live: w.live })).collect();
    m
}

struct Sim {
    rng: SmallRng,
    clock: ManualClock,
    j: MemStorage,
    s: MemStorage,
    cfg: MasterConfig,
    core: Option<MasterCore>,
    model: Model,
    /// When the master last started, or its journal took writes again after a full disk
    /// (the grace period for workers' heartbeats).
    started: u64,
    restarts: u32,
    uncertain: u32,
    /// Mutations refused for lack of room.
    full: u32,
}

fn path(rng: &mut SmallRng) -> String {
    if rng.gen_ratio(1, 40) {
        return ["/../x", "rel/a", "/a/\0"][rng.gen_range(0..3)].to_owned();
    }
    let depth = rng.gen_range(1..=3);
    let mut p = String::new();
    for _ in 0..depth {
        p.push('/');
        p.push_str(["a", "b", "c"][rng.gen_range(0..3)]);
    }
    p
}

impl Sim {
    fn new(seed: u64) -> Self {
        let mut rng = SmallRng::seed_from_u64(seed);
        let cfg = MasterConfig {
            heartbeat_timeout: Duration::from_millis(TIMEOUT_MS),
            block_size: BLOCK,
            snapshot_every: rng.gen_range(5..60),
            ..MasterConfig::default()
        };
        let mut sim = Self {
            rng,
            clock: ManualClock::new(1_000),
            j: MemStorage::new(),
            s: MemStorage::new(),
            cfg,
            core: None,
            model: Model::new(),
            started: 0,
            restarts: 0,
            uncertain: 0,
            full: 0,
        };
        sim.start();
        sim
    }

    fn core(&self) -> &MasterCore {
        self.core.as_ref().expect("core running")
    }

    fn start(&mut self) {
        let storages = Storages { journal: Box::new(self.j.clone()), snapshot: Box::new(self.s.clone()) };
        let clock = Arc::new(self.clock.clone());
        self.started = self.clock.now_ms_pub();
        self.core = Some(MasterCore::start(self.cfg.clone(), storages, clock).expect("recovery"));
    }

    /// Crash (keeping a random torn prefix of unsynced bytes), restart, compare with the model.
    /// `maybe` is the model after an operation whose outcome was not acknowledged.
    fn crash_restart(&mut self, maybe: Option<Model>) {
        let before = self.core().state_data();
        self.core = None; // stops the writer thread
        let torn_j = self.rng.gen_range(0..=self.j.unsynced_len());
        let torn_s = self.rng.gen_range(0..=self.s.unsynced_len());
        self.j.crash(torn_j);
        self.s.crash(torn_s);
        self.start();
        self.restarts += 1;
        let after = self.core().state_data();
        let seen = observe(&after);
        if seen == self.model {
            if maybe.is_none() {
                assert_eq!(after, before, "acknowledged state differs after restart");
            }
        } else if let Some(m) = maybe.filter(|m| *m == seen) {
            self.model = m;
        } else {
            panic!("after restart the master holds\n{seen:#?}\nbut the model says\n{:#?}", self.model);
        }
    }

    fn check(&self) {
        assert_eq!(observe(&self.core().state_data()), self.model, "live master diverged from the model");
    }

    /// Runs one operation; compares the outcome with the model's prediction.
    fn step(&mut self) {
        self.clock.advance(Duration::from_millis(self.rng.gen_range(0..1_500)));
        if self.rng.gen_ratio(1, 25) {
            // Arm a failure a few storage operations ahead: the next op(s) may die mid-write.
            let k = self.rng.gen_range(0..4);
            if self.rng.gen_bool(0.8) { self.j.fail_after(k) } else { self.s.fail_after(k) }
        }
        if self.rng.gen_ratio(1, 20) {
            // A disk fills up (a little room left: writes may tear) or gets room again.
            let disk = if self.rng.gen_bool(0.8) { &self.j } else { &self.s };
            let room = self.rng.gen_bool(0.6).then(|| disk.bytes().len() as u64 + self.rng.gen_range(0..300));
            disk.set_room(room);
        }
        let mut next = self.model.clone();
        let (got, want): (Result<(), cv_master_core::Error>, R) = match self.rng.gen_range(0..100) {
            0..15 => {
                let (p, parents) = (path(&mut self.rng), self.rng.gen_bool(0.5));
                let want = CvPath::parse(&p).map_err(|_| ErrorKind::InvalidPath).and_then(|_| next.mkdir(&p, parents));
                (self.core().mkdir(&p, parents), want)
            }
            15..35 => {
                let (p, ow) = (path(&mut self.rng), self.rng.gen_bool(0.3));
                let want = CvPath::parse(&p).map_err(|_| ErrorKind::InvalidPath).and_then(|_| next.create(&p, ow));
                // The id the master will pick, so the model knows it even if the ack is lost.
                let id = self.core().state_data().next_inode;
                let node = Node::File { id, blocks: 0, len: 0, complete: false };
                let at = CvPath::parse(&p).map(|c| c.to_string()).unwrap_or(p.clone());
                match want {
                    Ok(true) => drop(next.held.insert(id, (at, node))),
                    Ok(false) => drop(next.nodes.insert(at, node)),
                    Err(_) => {}
                }
                let got = self.core().create(&p, ow, 0o644);
                if let Ok(c) = &got {
                    assert_eq!(c.file_id, id);
                }
                (got.map(|_| ()), want.map(|_| ()))
            }
            35..50 => {
                let id = self.pick_file();
                let want = if !next.live_workers() {
                    Err(ErrorKind::NoWorkers)
                } else {
                    match next.file_by_id(id) {
                        None => Err(ErrorKind::NotFound),
                        Some(Node::File { complete: true, .. }) => Err(ErrorKind::FileNotWritable),
                        Some(Node::File { blocks, .. }) => {
                            *blocks += 1;
                            Ok(())
                        }
                        Some(Node::Dir) => unreachable!(),
                    }
                };
                (self.core().add_block(id).map(|_| ()), want)
            }
            50..62 => {
                let id = self.pick_file();
                let n = match next.file_by_id(id) {
                    Some(Node::File { blocks, .. }) => *blocks,
                    _ => 0,
                };
                let wrong = self.rng.gen_ratio(1, 10);
                let lens: Vec<u64> = (0..n + usize::from(wrong)).map(|_| self.rng.gen_range(1..=BLOCK)).collect();
                let len = lens.iter().sum();
                let want = match next.file_by_id(id) {
                    None => Err(ErrorKind::NotFound),
                    // Completing it again with the same content is a retry: done. (Random
                    // lengths match an earlier completion for a file of at most one block;
                    // of more, all of them match about never.)
                    Some(Node::File { complete: true, blocks, len: was, .. })
                        if *blocks <= 1 && *was == len && !wrong =>
                    {
                        Ok(())
                    }
                    Some(Node::File { complete: true, .. }) => Err(ErrorKind::FileNotWritable),
                    Some(_) if wrong => Err(ErrorKind::InvalidArgument),
                    Some(_) => next.publish(id, Node::File { id, blocks: n, len, complete: true }),
                };
                let tail = (len > 0).then(|| (len - 1, vec![7u8]));
                (self.core().complete(id, len, lens, tail), want)
            }
            62..74 => {
                let (a, b) = (path(&mut self.rng), path(&mut self.rng));
                let valid = CvPath::parse(&a).is_ok() && CvPath::parse(&b).is_ok();
                let want = if valid { next.rename(&a, &b) } else { Err(ErrorKind::InvalidPath) };
                (self.core().rename(&a, &b), want)
            }
            74..84 => {
                let (p, rec) = (path(&mut self.rng), self.rng.gen_bool(0.5));
                let want = CvPath::parse(&p).map_err(|_| ErrorKind::InvalidPath).and_then(|_| next.delete(&p, rec));
                (self.core().delete(&p, rec).map(|_| ()), want)
            }
            84..88 => {
                let p = format!("/m{}", self.rng.gen_range(0..3));
                if self.rng.gen_bool(0.6) {
                    let want = if next.mounts.contains_key(&p) {
                        Err(ErrorKind::AlreadyExists)
                    } else {
                        next.mounts.insert(p.clone(), format!("s3://b{p}"));
                        Ok(())
                    };
                    (self.core().mount(&p, &format!("s3://b{p}"), MountMode::Cache, vec![]), want)
                } else {
                    let want = next.mounts.remove(&p).map(|_| ()).ok_or(ErrorKind::NotFound);
                    (self.core().unmount(&p, true), want)
                }
            }
            88..92 => {
                let now = self.clock.now_ms_pub();
                let prev = self.rng.gen_bool(0.5).then(|| self.rng.gen_range(1..5));
                // A worker without a known id that comes back at a known address (every
                // simulated worker uses the same one) gets that address's id again.
                let data = self.core().state_data();
                let same_addr = data.workers.values().find(|w| w.host == "127.0.0.1" && w.shard_ports == [7000, 7001]);
                let id = match prev {
                    Some(p) if next.workers.contains_key(&p) => p,
                    _ => same_addr.map(|w| w.id).unwrap_or(data.next_worker),
                };
                next.workers.insert(id, Worker { last_hb: now, live: true });
                let got = self.core().register_worker(prev, "127.0.0.1", vec![7000, 7001], 1 << 30);
                if let Ok(got_id) = &got {
                    assert_eq!(*got_id, id);
                }
                (got.map(|_| ()), Ok(()))
            }
            92..97 => {
                let now = self.clock.now_ms_pub();
                let id = self.rng.gen_range(1..5);
                let want = match next.workers.get_mut(&id) {
                    Some(w) => {
                        w.last_hb = w.last_hb.max(now);
                        w.live = true;
                        Ok(())
                    }
                    None => Err(ErrorKind::UnknownWorker),
                };
                (self.core().heartbeat(id, 1 << 30, 0, vec![], vec![]).map(|_| ()), want)
            }
            _ => {
                self.clock.advance(Duration::from_millis(self.rng.gen_range(0..6_000)));
                let got = self.core().tick().map(|_| ());
                // A journal that had no room and found some in this tick gave workers a whole
                // timeout from now (their heartbeats were refused).
                self.started = self.core().heartbeats_count_from();
                next.tick(self.clock.now_ms_pub(), self.started);
                (got, Ok(()))
            }
        };
        match got {
            Ok(()) => {
                assert_eq!(want, Ok(()), "master succeeded where the model fails");
                self.model = next;
            }
            Err(e) if e.kind() == ErrorKind::NoSpace => {
                // Failed for sure: nothing of it stays, and the master goes on serving.
                self.full += 1;
                self.check();
            }
            Err(e) if matches!(e.kind(), ErrorKind::Io | ErrorKind::Poisoned) => {
                // Not acknowledged: it may or may not have reached the disk.
                self.uncertain += 1;
                let maybe = want.is_ok().then_some(next);
                self.crash_restart(maybe);
            }
            Err(e) => assert_eq!(Err(e.kind()), want, "{e}"),
        }
    }

    /// Usually the id of a file in the model, sometimes a bogus one.
    fn pick_file(&mut self) -> u64 {
        let ids: Vec<u64> = self
            .model
            .nodes
            .values()
            .chain(self.model.held.values().map(|(_, n)| n))
            .filter_map(|n| match n {
                Node::File { id, .. } => Some(*id),
                Node::Dir => None,
            })
            .collect();
        if ids.is_empty() || self.rng.gen_ratio(1, 10) {
            return 1_000_000 + self.rng.gen_range(0..10);
        }
        ids[self.rng.gen_range(0..ids.len())]
    }
}

trait NowPub {
    fn now_ms_pub(&self) -> u64;
}

impl NowPub for ManualClock {
    fn now_ms_pub(&self) -> u64 {
        cv_master_core::config::Clock::now_ms(self)
    }
}

fn run(seed: u64, ops: u64) -> (u32, u32, u32) {
    let _guard = common::SeedGuard { prefix: "CV_SIM", seed };
    let mut sim = Sim::new(seed);
    for i in 0..ops {
        sim.step();
        if sim.rng.gen_ratio(1, 30) {
            sim.crash_restart(None);
        }
        if i % 50 == 0 {
            sim.check();
        }
    }
    sim.crash_restart(None);
    (sim.restarts, sim.uncertain, sim.full)
}

#[test]
fn simulation_with_crashes() {
    let (seeds, ops) = common::plan("CV_SIM", 50, 300);
    let (mut restarts, mut uncertain, mut full) = (0, 0, 0);
    for seed in seeds {
        let (r, u, f) = run(seed, ops);
        restarts += r;
        uncertain += u;
        full += f;
    }
    // The run must actually have exercised crashes, including mid-write ones, and full disks.
    assert!(restarts > 0 && uncertain > 0 && full > 0, "restarts {restarts}, uncertain {uncertain}, full {full}");
    eprintln!("simulation: {restarts} restarts, {uncertain} unacknowledged mutations, {full} refused for lack of room");
}
