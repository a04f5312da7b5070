//! A cv cluster on a [`Rig`]: `cvctl master` on host 1 (or a Raft group of masters on hosts
//! 1..=M, master/HA.md), `cvctl worker` on the hosts after them, driven
//! through the real `cvctl` binary (its path given by the caller), with a cluster CA from
//! `cvctl cert init`, an application's client config and the operator's admin config for `cvctl`
//! in the root namespace.

use std::net::SocketAddrV4;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use super::cv_config::{self, MASTER_PORT, WorkerFile};
use super::error::RigError;
use super::hosts::Rig;
use super::process::ProcId;
use super::report::Report;

/// How to lay the cluster out.
#[derive(Clone, Debug)]
pub struct ClusterSpec {
    /// The `cvctl` binary (in cv-tools' tests: `env!("CARGO_BIN_EXE_cvctl")`).
    pub cvctl: PathBuf,
    /// Worker processes, one per host after the master's.
    pub workers: usize,
    /// The master declares a worker lost after this long without a heartbeat.
    pub heartbeat_timeout: Duration,
    /// Each worker's disk capacity.
    pub worker_capacity: u64,
    /// Put each worker's data on a tmpfs of this many bytes (`None`: the rig's temp dir).
    pub worker_disk: Option<u64>,
    /// Each worker's memory tier.
    pub memory_tier: u64,
    /// Deadline of each `cvctl fs` / `report` call (the client's `deadline`).
    pub client_deadline: Duration,
    /// How long [`CvCluster::start`] waits for every worker to be live.
    pub ready_timeout: Duration,
    /// The master removes a file being written whose writer is silent this long.
    pub write_lease: Duration,
    /// Copies of each cv-only block (`[master] replicas`).
    pub replicas: u32,
    /// A lost worker's copies count this long before they are made again elsewhere.
    pub replica_grace: Duration,
    /// Zone label of each worker, in order (missing ones: none).
    pub zones: Vec<String>,
    /// Hosts made beside the workers' for workers started later ([`CvCluster::add_worker`]).
    pub spare_hosts: usize,
    /// The master's block size (`None`: its default, 4 MiB).
    pub block_size: Option<u64>,
    /// Masters: 1, or a Raft group of 3 or 5, one per host.
    pub masters: usize,
    /// Put each master's journal (or Raft files) on a tmpfs of this many bytes
    /// ([`CvCluster::master_disk`]; `None`: the rig's temp dir).
    pub master_disk: Option<u64>,
}

impl ClusterSpec {
    /// Small, fast defaults: a 2 s heartbeat timeout, 64 MiB per worker.
    pub fn new(cvctl: impl Into<PathBuf>, workers: usize) -> ClusterSpec {
        ClusterSpec {
            cvctl: cvctl.into(),
            workers,
            heartbeat_timeout: Duration::from_secs(2),
            worker_capacity: 64 << 20,
            worker_disk: None,
            memory_tier: 16 << 20,
            client_deadline: Duration::from_secs(10),
            ready_timeout: Duration::from_secs(15),
            write_lease: Duration::from_secs(300),
            replicas: 2,
            replica_grace: Duration::from_secs(60),
            zones: Vec::new(),
            spare_hosts: 0,
            block_size: None,
            masters: 1,
            master_disk: None,
        }
    }
}

/// A running cluster; dropping it (or its rig) stops every process and removes the rig.
#[derive(Debug)]
pub struct CvCluster {
    rig: Rig,
    cvctl: PathBuf,
    /// An application's file (client certificate).
    client_config: PathBuf,
    /// The operator's file (admin certificate), which [`CvCluster::cvctl`] runs with.
    admin_config: PathBuf,
    /// Per master: its process, and its command to start it again.
    masters: Vec<(ProcId, Command)>,
    /// Per master: a client file naming only it, with a short deadline (who leads?).
    probes: Vec<PathBuf>,
    /// `(host index, process)` per worker.
    workers: Vec<(usize, ProcId)>,
    /// What a worker started later needs.
    later: Later,
}

/// The parts of a worker's start that [`CvCluster::add_worker`] repeats.
#[derive(Debug)]
struct Later {
    spec: ClusterSpec,
    certs: PathBuf,
    master_addrs: Vec<SocketAddrV4>,
}

/// The host of the (first) master; a group's masters are on hosts 1..=M.
const MASTER_HOST: usize = 1;

/// Writes worker `h`'s config and starts `cvctl worker` on its host.
fn start_worker(
    rig: &Rig,
    spec: &ClusterSpec,
    certs: &Path,
    master_addrs: &[SocketAddrV4],
    h: usize,
) -> Result<ProcId, RigError> {
    let data = match spec.worker_disk {
        Some(bytes) => rig.small_disk(h, bytes)?,
        None => rig.host_dir(h)?.join("data"),
    };
    let file = WorkerFile {
        master: master_addrs[0],
        others: master_addrs[1..].to_vec(),
        addr: rig.host(h)?.addr,
        node: format!("rig-worker-h{h}"),
        data_dir: &data,
        capacity: spec.worker_capacity,
        memory_tier: spec.memory_tier,
        master_call_timeout: Duration::from_secs(1),
        zone: spec.zones.get(h - spec.masters.max(1) - 1).cloned().unwrap_or_default(),
    };
    let conf = write(&rig.host_dir(h)?.join("cv.toml"), &cv_config::worker(certs, &file))?;
    rig.spawn(h, &format!("worker-h{h}"), &cvctl_cmd(&spec.cvctl, &["worker", "--config"], &conf))
}

impl CvCluster {
    /// Creates a rig of `1 + spec.workers` hosts, the certificates and configs, starts the master and
    /// the workers, and waits until the master counts every worker live.
    pub fn start(spec: &ClusterSpec) -> Result<CvCluster, RigError> {
        let m = spec.masters.max(1);
        let rig = Rig::new(m + spec.workers + spec.spare_hosts)?;
        let certs = rig.dir().join("certs");
        let out = run(Command::new(&spec.cvctl).args(["cert", "init", "--cluster", "rig", "--dir"]).arg(&certs))?;
        check(&out, "cvctl cert init")?;
        let master_addrs: Vec<SocketAddrV4> = (MASTER_HOST..MASTER_HOST + m)
            .map(|h| Ok(SocketAddrV4::new(rig.host(h)?.addr, MASTER_PORT)))
            .collect::<Result<_, RigError>>()?;
        let peers: Vec<(u64, SocketAddrV4)> =
            master_addrs.iter().enumerate().map(|(i, a)| (i as u64 + 1, *a)).collect();

        let mut masters = Vec::new();
        let mut probes = Vec::new();
        for (i, &listen) in master_addrs.iter().enumerate() {
            let h = MASTER_HOST + i;
            let mdir = rig.host_dir(h)?;
            let journal = match spec.master_disk {
                Some(bytes) => rig.small_disk(h, bytes)?.join("journal"),
                None => mdir.join("journal"),
            };
            let mfile = cv_config::MasterFile {
                listen,
                journal: &journal,
                heartbeat_timeout: spec.heartbeat_timeout,
                write_lease: spec.write_lease,
                replicas: spec.replicas,
                replica_grace: spec.replica_grace,
                block_size: spec.block_size,
                raft: (m > 1).then(|| cv_config::RaftMember {
                    id: i as u64 + 1,
                    peers: peers.clone(),
                    bootstrap: i == 0,
                }),
                store_host: rig.bridge_addr(),
            };
            let mconf = write(&mdir.join("cv.toml"), &cv_config::master(&certs, &mfile))?;
            let cmd = cvctl_cmd(&spec.cvctl, &["master", "--config"], &mconf);
            let p = rig.spawn(h, &master_name(i, m), &cmd)?;
            masters.push((p, cmd));
            let probe = cv_config::client(&certs, &[listen], Duration::from_millis(500));
            probes.push(write(&rig.dir().join(format!("probe-m{}.toml", i + 1)), &probe)?);
        }

        let mut workers = Vec::new();
        for h in MASTER_HOST + m..MASTER_HOST + m + spec.workers {
            workers.push((h, start_worker(&rig, spec, &certs, &master_addrs, h)?));
        }
        let client_config =
            write(&rig.dir().join("client.toml"), &cv_config::client(&certs, &master_addrs, spec.client_deadline))?;
        let admin = cv_config::client_as(&certs, "admin", &master_addrs, spec.client_deadline);
        let admin_config = write(&rig.dir().join("admin.toml"), &admin)?;
        let later = Later { spec: spec.clone(), certs, master_addrs };
        let cluster =
            CvCluster { rig, cvctl: spec.cvctl.clone(), client_config, admin_config, masters, probes, workers, later };
        let hosts: Vec<String> = cluster.worker_hosts().iter().map(|&h| cluster.host_name(h)).collect();
        cluster.wait_for("every worker live", spec.ready_timeout, |r| hosts.iter().all(|h| r.live(h)))?;
        if m > 1 {
            cluster.wait_voters(m, spec.ready_timeout)?;
        }
        Ok(cluster)
    }

    /// The rig under the cluster (kill, pause, cut links…).
    pub fn rig(&self) -> &Rig {
        &self.rig
    }

    /// The (first) master's process.
    pub fn master(&self) -> ProcId {
        self.masters[0].0
    }

    /// Starts the (first) master again (after [`Rig::kill9`] of [`Self::master`]) on the same
    /// host, address and journal; its new process becomes [`Self::master`].
    pub fn restart_master(&mut self) -> Result<ProcId, RigError> {
        self.restart_master_at(0)
    }

    /// Masters in the cluster.
    pub fn master_count(&self) -> usize {
        self.masters.len()
    }

    /// Master `i`'s process (0-based; its host is `1 + i`, its Raft id `1 + i`).
    pub fn master_at(&self, i: usize) -> ProcId {
        self.masters[i].0
    }

    /// The host index of master `i`.
    pub fn master_host(&self, i: usize) -> usize {
        MASTER_HOST + i
    }

    /// The UDP port master `i` serves on (on host [`Self::master_host`]).
    pub fn master_port(&self, i: usize) -> u16 {
        self.later.master_addrs.get(i).map_or(MASTER_PORT, |a| a.port())
    }

    /// Starts master `i` again on the same host, address and files (after a kill); with
    /// `wipe`, its files are removed first (a lost disk).
    pub fn restart_master_at(&mut self, i: usize) -> Result<ProcId, RigError> {
        let n = self.masters.len();
        let p = self.rig.spawn(MASTER_HOST + i, &master_name(i, n), &self.masters[i].1)?;
        self.masters[i].0 = p;
        Ok(p)
    }

    /// `cvctl master list` asked of master `i` alone (a client config naming only it, so no
    /// other master answers in its place): its stdout, or an error while it does not answer.
    /// A master that answers and names a leader is up and following the group.
    pub fn master_list_at(&self, i: usize) -> Result<String, RigError> {
        let probe = self.probes.get(i).ok_or_else(|| RigError::Unknown(format!("master {i}")))?;
        let out = run(Command::new(&self.cvctl).args(["master", "list", "--config"]).arg(probe))?;
        check(&out, &format!("cvctl master list (master {} alone)", i + 1))?;
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// The tmpfs master `i`'s journal is on ([`ClusterSpec::master_disk`]), to fill it.
    pub fn master_disk(&self, i: usize) -> Option<PathBuf> {
        let host = self.rig.host_dir(MASTER_HOST + i).ok()?;
        self.later.spec.master_disk.map(|_| host.join("disk"))
    }

    /// Removes master `i`'s journal (or Raft files): its disk was lost. Kill it first.
    pub fn wipe_master(&self, i: usize) -> Result<(), RigError> {
        let dir = match self.master_disk(i) {
            Some(disk) => disk.join("journal"),
            None => self.rig.host_dir(MASTER_HOST + i)?.join("journal"),
        };
        match std::fs::remove_dir_all(&dir) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(RigError::io(format!("remove {}", dir.display()), e)),
        }
    }

    /// Which master leads now: the first whose own `cvctl report` (a client that knows only it)
    /// succeeds. `None` if none does.
    pub fn leader(&self) -> Option<usize> {
        (0..self.masters.len()).find(|&i| {
            let out = run(Command::new(&self.cvctl).arg("report").arg("--config").arg(&self.probes[i]).arg("--json"));
            out.is_ok_and(|o| o.status.success())
        })
    }

    /// Waits until `n` masters vote in the group (the founding master adds the others as they
    /// catch up), as `cvctl master list` shows.
    pub fn wait_voters(&self, n: usize, timeout: Duration) -> Result<(), RigError> {
        let start = Instant::now();
        loop {
            let out = run(Command::new(&self.cvctl).args(["master", "list", "--config"]).arg(&self.client_config))?;
            let text = String::from_utf8_lossy(&out.stdout);
            if out.status.success()
                && text.lines().filter(|l| l.ends_with("voter") || l.ends_with("leader")).count() >= n
            {
                return Ok(());
            }
            if start.elapsed() > timeout {
                return Err(RigError::Timeout {
                    what: format!("{n} voting masters within {timeout:?}; last list: {text}"),
                    logs: self.rig.logs(),
                });
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Polls [`Self::leader`] until a master other than `not` leads; which one and when.
    pub fn wait_leader(&self, not: Option<usize>, timeout: Duration) -> Result<(usize, Duration), RigError> {
        let start = Instant::now();
        loop {
            if let Some(i) = self.leader().filter(|&i| Some(i) != not) {
                return Ok((i, start.elapsed()));
            }
            if start.elapsed() > timeout {
                return Err(RigError::Timeout {
                    what: format!("a leading master (other than {not:?}) within {timeout:?}"),
                    logs: self.rig.logs(),
                });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Starts a worker on the next spare host ([`ClusterSpec::spare_hosts`]) and waits until the
    /// master counts it live; its host index.
    pub fn add_worker(&mut self, timeout: Duration) -> Result<usize, RigError> {
        let h = MASTER_HOST + self.masters.len() + self.workers.len();
        if h > self.rig.hosts().len() {
            return Err(RigError::Unknown(format!("no spare host for another worker (host {h})")));
        }
        let p = start_worker(&self.rig, &self.later.spec, &self.later.certs, &self.later.master_addrs, h)?;
        self.workers.push((h, p));
        let name = self.host_name(h);
        self.wait_for(&format!("worker {name} live"), timeout, |r| r.live(&name))?;
        Ok(h)
    }

    /// Starts the worker on host `index` again (after [`Rig::kill9`] or [`Rig::terminate`] of
    /// its process) with the same config, address and data; its new process becomes
    /// [`Self::worker`]`(index)`. Does not wait for it to register.
    pub fn restart_worker(&mut self, index: usize) -> Result<ProcId, RigError> {
        let slot = self
            .workers
            .iter()
            .position(|&(h, _)| h == index)
            .ok_or_else(|| RigError::Unknown(format!("worker on host {index}")))?;
        let conf = self.rig.host_dir(index)?.join("cv.toml");
        let p = self.rig.spawn(
            index,
            &format!("worker-h{index}"),
            &cvctl_cmd(&self.cvctl, &["worker", "--config"], &conf),
        )?;
        self.workers[slot].1 = p;
        Ok(p)
    }

    /// The host indices of the workers, in order.
    pub fn worker_hosts(&self) -> Vec<usize> {
        self.workers.iter().map(|&(h, _)| h).collect()
    }

    /// The process of the worker on host `index`.
    pub fn worker(&self, index: usize) -> Result<ProcId, RigError> {
        self.workers
            .iter()
            .find(|&&(h, _)| h == index)
            .map(|&(_, p)| p)
            .ok_or_else(|| RigError::Unknown(format!("worker on host {index}")))
    }

    /// The name the worker on host `index` advertises (its address), as `report` shows it.
    pub fn host_name(&self, index: usize) -> String {
        self.rig.host(index).map(|h| h.addr.to_string()).unwrap_or_default()
    }

    /// An application's config file (`cvctl fs --config …`): a client certificate, no rights
    /// over the cluster.
    pub fn client_config(&self) -> &Path {
        &self.client_config
    }

    /// The operator's config file: an admin certificate (mounts, drain, masters).
    pub fn admin_config(&self) -> &Path {
        &self.admin_config
    }

    /// Runs `cvctl <args…>` in the root namespace with the operator's config after `args[0]`
    /// (e.g. `["fs", "put", a, b]` runs `cvctl fs --config admin.toml put a b`).
    pub fn cvctl(&self, args: &[&str]) -> Result<Output, RigError> {
        self.cvctl_with(&self.admin_config, args)
    }

    /// As [`CvCluster::cvctl`], with the config file `config`.
    pub fn cvctl_with(&self, config: &Path, args: &[&str]) -> Result<Output, RigError> {
        let mut cmd = Command::new(&self.cvctl);
        if let Some((first, rest)) = args.split_first() {
            cmd.arg(first).arg("--config").arg(config).args(rest);
        }
        run(&mut cmd)
    }

    /// `cvctl fs <args…>`, failing (with the processes' logs) unless it exits 0; its stdout.
    pub fn fs(&self, args: &[&str]) -> Result<Vec<u8>, RigError> {
        let mut all = vec!["fs"];
        all.extend_from_slice(args);
        let out = self.cvctl(&all)?;
        check(&out, &format!("cvctl {}", all.join(" "))).map_err(|e| self.with_logs(e))?;
        Ok(out.stdout)
    }

    /// `cvctl report --json`, parsed.
    pub fn report(&self) -> Result<Report, RigError> {
        let out = self.cvctl(&["report", "--json"])?;
        check(&out, "cvctl report --json")?;
        Report::parse(&String::from_utf8_lossy(&out.stdout))
    }

    /// Polls the report until `ok` holds; the time it took. A timeout names `what`, the last
    /// report (or its error) and carries every process's log.
    pub fn wait_for(
        &self,
        what: &str,
        timeout: Duration,
        mut ok: impl FnMut(&Report) -> bool,
    ) -> Result<Duration, RigError> {
        let start = Instant::now();
        loop {
            let last = match self.report() {
                Ok(r) if ok(&r) => return Ok(start.elapsed()),
                Ok(r) => r.summary(),
                Err(e) => e.to_string(),
            };
            if start.elapsed() > timeout {
                return Err(RigError::Timeout {
                    what: format!("{what} within {timeout:?}; last report: {last}"),
                    logs: self.rig.logs(),
                });
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Stops every process and removes the rig, reporting the first error.
    pub fn shutdown(self) -> Result<(), RigError> {
        self.rig.shutdown()
    }

    fn with_logs(&self, e: RigError) -> RigError {
        match e {
            RigError::Command { cmd, detail } => {
                RigError::Command { cmd, detail: format!("{detail}\n{}", self.rig.logs()) }
            }
            other => other,
        }
    }
}

/// A master's process name: "master" alone, "master-1".. in a group.
fn master_name(i: usize, n: usize) -> String {
    if n > 1 { format!("master-{}", i + 1) } else { "master".into() }
}

fn cvctl_cmd(cvctl: &Path, args: &[&str], config: &Path) -> Command {
    let mut c = Command::new(cvctl);
    c.args(args).arg(config).env("CV_LOG", "info");
    c
}

fn run(cmd: &mut Command) -> Result<Output, RigError> {
    cmd.output().map_err(|e| RigError::Command {
        cmd: cmd.get_program().to_string_lossy().into_owned(),
        detail: format!("cannot start: {e}"),
    })
}

fn check(out: &Output, what: &str) -> Result<(), RigError> {
    if out.status.success() {
        return Ok(());
    }
    Err(RigError::Command {
        cmd: what.to_string(),
        detail: format!("{}: {}", out.status, String::from_utf8_lossy(&out.stderr).trim()),
    })
}

fn write(path: &Path, text: &str) -> Result<PathBuf, RigError> {
    std::fs::write(path, text).map_err(|e| RigError::io(format!("write {}", path.display()), e))?;
    Ok(path.to_path_buf())
}
