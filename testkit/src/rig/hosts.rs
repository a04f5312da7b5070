//! [`Rig`]: a bridge and N hosts, the processes started in them, their small disks, and a teardown
//! that removes all of it (in `Drop` too, so a panicking test leaves nothing behind).

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Output};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use super::error::RigError;
use super::process::{ProcId, Procs, in_netns};
use super::{disk, names, net, sweep, sys};

/// How long processes get to exit on SIGTERM at teardown before SIGKILL.
const TERM_GRACE: Duration = Duration::from_millis(500);

/// Rigs created by this process so far: with the pid, where the subnet search starts.
static CREATED: AtomicU32 = AtomicU32::new(0);

/// One host of a rig.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Host {
    /// 1-based.
    pub index: usize,
    /// Its network namespace.
    pub netns: String,
    /// Its address, `10.210.S.(10 + index)`.
    pub addr: Ipv4Addr,
}

/// Several hosts on one machine: each a network namespace on one Linux bridge. Needs root.
#[derive(Debug)]
pub struct Rig {
    subnet: u8,
    hosts: Vec<Host>,
    dir: Option<tempfile::TempDir>,
    procs: Mutex<Procs>,
    torn_down: bool,
}

impl Rig {
    /// Why a rig cannot run in this process (not root, no iproute2), or `None` if it can.
    pub fn unavailable() -> Option<String> {
        sys::unavailable()
    }

    /// Sweeps stale rigs, then creates a bridge on a free subnet and `hosts` hosts on it.
    pub fn new(hosts: usize) -> Result<Rig, RigError> {
        if let Some(why) = sys::unavailable() {
            return Err(RigError::Unavailable(why));
        }
        if hosts == 0 || hosts > names::MAX_HOSTS {
            return Err(RigError::Unknown(format!("host count {hosts} (1 to {})", names::MAX_HOSTS)));
        }
        sweep::sweep();
        let subnet_dir = |s: u8| {
            tempfile::Builder::new()
                .prefix(&format!("cv-rig-{s}-"))
                .tempdir()
                .map_err(|e| RigError::io("create the rig's temp dir", e))
        };
        // Start somewhere different per process and per rig, then take the first free subnet.
        let start = (std::process::id().wrapping_mul(31)).wrapping_add(CREATED.fetch_add(1, Ordering::Relaxed) * 7);
        for i in 0..254u32 {
            let s = u8::try_from((start + i) % 254 + 1).expect("1..=254");
            let dir = subnet_dir(s)?;
            if !net::claim_bridge(s, dir.path())? {
                continue;
            }
            let mut rig =
                Rig { subnet: s, hosts: Vec::new(), dir: Some(dir), procs: Mutex::default(), torn_down: false };
            std::fs::create_dir_all(rig.logs_dir()).map_err(|e| RigError::io("create the logs dir", e))?;
            for h in 1..=hosts {
                // On an error, drop tears down what exists.
                net::add_host(s, h)?;
                rig.hosts.push(Host { index: h, netns: names::netns(s, h), addr: names::host_addr(s, h) });
            }
            return Ok(rig);
        }
        Err(RigError::NoSubnet)
    }

    /// The rig's subnet number `S` (addresses `10.210.S.0/24`).
    pub fn subnet(&self) -> u8 {
        self.subnet
    }

    /// The bridge's address, through which the root namespace reaches every host.
    pub fn bridge_addr(&self) -> Ipv4Addr {
        names::bridge_addr(self.subnet)
    }

    /// The bridge's name.
    pub fn bridge(&self) -> String {
        names::bridge(self.subnet)
    }

    /// Host `index` (1-based).
    pub fn host(&self, index: usize) -> Result<&Host, RigError> {
        index.checked_sub(1).and_then(|i| self.hosts.get(i)).ok_or_else(|| RigError::Unknown(format!("host {index}")))
    }

    /// Every host, in order.
    pub fn hosts(&self) -> &[Host] {
        &self.hosts
    }

    /// The rig's temp dir (logs, and whatever a test keeps there); removed at teardown.
    pub fn dir(&self) -> &Path {
        self.dir.as_ref().map_or(Path::new("/nonexistent"), |d| d.path())
    }

    fn logs_dir(&self) -> PathBuf {
        self.dir().join("logs")
    }

    /// A directory for host `index`'s files, created.
    pub fn host_dir(&self, index: usize) -> Result<PathBuf, RigError> {
        self.host(index)?;
        let d = self.dir().join(format!("h{index}"));
        std::fs::create_dir_all(&d).map_err(|e| RigError::io(format!("create {}", d.display()), e))?;
        Ok(d)
    }

    fn procs(&self) -> MutexGuard<'_, Procs> {
        self.procs.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Starts `cmd` inside host `index`'s namespace; `name` names its log files.
    pub fn spawn(&self, index: usize, name: &str, cmd: &Command) -> Result<ProcId, RigError> {
        let ns = self.host(index)?.netns.clone();
        let logs = self.logs_dir();
        self.procs().spawn(&ns, index, name, cmd, &logs)
    }

    /// Runs `cmd` inside host `index`'s namespace to completion (not tracked as a process).
    pub fn exec(&self, index: usize, cmd: &Command) -> Result<Output, RigError> {
        let ns = &self.host(index)?.netns;
        in_netns(ns, cmd).output().map_err(|e| RigError::Command {
            cmd: format!("ip netns exec {ns} {}", cmd.get_program().to_string_lossy()),
            detail: format!("cannot start: {e}"),
        })
    }

    /// The PID of a process the rig started.
    pub fn pid(&self, p: ProcId) -> Result<u32, RigError> {
        self.procs().pid(p)
    }

    /// Whether it still runs.
    pub fn alive(&self, p: ProcId) -> Result<bool, RigError> {
        self.procs().alive(p)
    }

    /// `kill -9`, and reap it.
    pub fn kill9(&self, p: ProcId) -> Result<ExitStatus, RigError> {
        self.procs().kill9(p)
    }

    /// Stops a process the way `systemctl stop` (and the stop half of `systemctl restart`) does:
    /// SIGTERM, then up to `timeout` for it to exit (reaped). Past `timeout` it is killed with
    /// SIGKILL, as systemd does after `TimeoutStopSec`, and that is an error. Returns how it
    /// exited and how long the stop took.
    pub fn terminate(&self, p: ProcId, timeout: Duration) -> Result<(ExitStatus, Duration), RigError> {
        self.procs().signal(p, "TERM")?;
        let start = std::time::Instant::now();
        loop {
            // The lock is taken per poll, so other threads may use the rig meanwhile.
            if let Some(status) = self.procs().exit_status(p)? {
                return Ok((status, start.elapsed()));
            }
            if start.elapsed() > timeout {
                let _ = self.procs().kill9(p);
                return Err(RigError::Timeout {
                    what: format!("process {} to exit on SIGTERM within {timeout:?} (killed)", p.0),
                    logs: self.logs(),
                });
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// SIGSTOP: it stays, silent, holding its sockets. Returns once all its threads are stopped.
    pub fn pause(&self, p: ProcId) -> Result<(), RigError> {
        self.procs().set_stopped(p, true)
    }

    /// SIGCONT after [`pause`](Self::pause).
    pub fn resume(&self, p: ProcId) -> Result<(), RigError> {
        self.procs().set_stopped(p, false)
    }

    /// Takes host `index`'s link down: nothing reaches it or leaves it until
    /// [`restore_link`](Self::restore_link).
    pub fn cut_link(&self, index: usize) -> Result<(), RigError> {
        self.host(index)?;
        net::set_link(self.subnet, index, false)
    }

    /// Brings host `index`'s link back.
    pub fn restore_link(&self, index: usize) -> Result<(), RigError> {
        self.host(index)?;
        net::set_link(self.subnet, index, true)
    }

    /// Why [`drop_inbound_udp`](Self::drop_inbound_udp) cannot run here (no `iptables`), or
    /// `None` if it can.
    pub fn firewall_unavailable() -> Option<String> {
        sys::run("iptables", &["-V"]).err().map(|e| format!("iptables is missing: {e}"))
    }

    /// A one-way cut on host `index`: every UDP datagram arriving for `port` is dropped (an
    /// `iptables` rule in its namespace), while what the host sends from other ports, and the
    /// replies to that, go through. Until [`allow_inbound_udp`](Self::allow_inbound_udp); the
    /// rule goes with the namespace at teardown.
    pub fn drop_inbound_udp(&self, index: usize, port: u16) -> Result<(), RigError> {
        net::inbound_udp(&self.host(index)?.netns, port, true)
    }

    /// Removes the rule of [`drop_inbound_udp`](Self::drop_inbound_udp).
    pub fn allow_inbound_udp(&self, index: usize, port: u16) -> Result<(), RigError> {
        net::inbound_udp(&self.host(index)?.netns, port, false)
    }

    /// A tmpfs of `bytes` for host `index`, mounted at `<host dir>/disk` (returned); unmounted at
    /// teardown. Mount it before starting the processes that use it.
    pub fn small_disk(&self, index: usize, bytes: u64) -> Result<PathBuf, RigError> {
        let d = self.host_dir(index)?.join("disk");
        disk::mount_tmpfs(&d, bytes)?;
        Ok(d)
    }

    /// The end of every process's stdout and stderr, for a failing test to print.
    pub fn logs(&self) -> String {
        self.procs().logs()
    }

    /// Tears the rig down now, reporting the first error (drop does the same, silently).
    pub fn shutdown(mut self) -> Result<(), RigError> {
        self.teardown()
    }

    /// Processes (SIGTERM, then SIGKILL after a grace), mounts, namespaces, the bridge, the temp dir.
    fn teardown(&mut self) -> Result<(), RigError> {
        if std::mem::replace(&mut self.torn_down, true) {
            return Ok(());
        }
        self.procs().stop_all(TERM_GRACE);
        let mut first: Option<RigError> = None;
        let mut keep = |r: Result<(), RigError>| {
            if let Err(e) = r {
                first.get_or_insert(e);
            }
        };
        keep(disk::unmount_under(self.dir()));
        // Every possible host, not only those created: a setup may have failed halfway.
        for h in 1..=self.hosts.len() + 1 {
            keep(net::remove_host(self.subnet, h));
        }
        keep(net::remove_bridge(self.subnet));
        if let Some(d) = self.dir.take() {
            if std::thread::panicking() && std::env::var_os("CV_RIG_KEEP_FAILED").is_some() {
                // To read a failed run's whole logs (the report has only their tails).
                eprintln!("rig dir kept: {}", d.keep().display());
            } else {
                keep(d.close().map_err(|e| RigError::io("remove the rig's temp dir", e)));
            }
        }
        first.map_or(Ok(()), Err)
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        if self.torn_down {
            return;
        }
        if std::thread::panicking() {
            eprintln!("rig 10.210.{}.0/24 torn down after a panic; its processes said:\n{}", self.subnet, self.logs());
        }
        if let Err(e) = self.teardown() {
            eprintln!("rig 10.210.{}.0/24: teardown: {e}", self.subnet);
        }
    }
}
