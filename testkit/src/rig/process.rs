//! Processes a rig started inside its hosts, each with its stdout and stderr in files of the rig's
//! temp dir, so that a failing test can show what every one of them said.

use std::fmt::Write as _;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use super::error::RigError;
use super::sys;

/// A process started by [`Rig::spawn`](super::Rig::spawn), by its index in the rig.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ProcId(pub(crate) usize);

/// Bytes of each log shown in [`Procs::logs`] (the end of it).
const LOG_TAIL: u64 = 16 << 10;

#[derive(Debug)]
struct Running {
    name: String,
    host: usize,
    child: Child,
    /// Once reaped.
    status: Option<ExitStatus>,
    out: PathBuf,
    err: PathBuf,
}

impl Running {
    /// Reaps the child if it has exited; whether it is still running.
    fn alive(&mut self) -> bool {
        if self.status.is_none()
            && let Ok(Some(s)) = self.child.try_wait()
        {
            self.status = Some(s);
        }
        self.status.is_none()
    }
}

/// Every process of one rig.
#[derive(Debug, Default)]
pub(crate) struct Procs {
    all: Vec<Running>,
}

impl Procs {
    /// Starts `cmd` in namespace `ns` (see [`in_netns`]), logging to `<logs>/<name>.out|.err`.
    pub(crate) fn spawn(
        &mut self,
        ns: &str,
        host: usize,
        name: &str,
        cmd: &Command,
        logs: &std::path::Path,
    ) -> Result<ProcId, RigError> {
        let id = self.all.len();
        let base = format!("{id:02}-{name}");
        let (out, err) = (logs.join(format!("{base}.out")), logs.join(format!("{base}.err")));
        let file = |p: &PathBuf| File::create(p).map_err(|e| RigError::io(format!("create {}", p.display()), e));
        let mut wrapped = in_netns(ns, cmd);
        wrapped.stdin(Stdio::null()).stdout(file(&out)?).stderr(file(&err)?);
        let child = wrapped.spawn().map_err(|e| RigError::Command {
            cmd: format!("ip netns exec {ns} {}", cmd.get_program().to_string_lossy()),
            detail: format!("cannot start: {e}"),
        })?;
        self.all.push(Running { name: name.to_string(), host, child, status: None, out, err });
        Ok(ProcId(id))
    }

    fn get(&mut self, p: ProcId) -> Result<&mut Running, RigError> {
        self.all.get_mut(p.0).ok_or_else(|| RigError::Unknown(format!("process {}", p.0)))
    }

    /// The PID of a process (it may have exited).
    pub(crate) fn pid(&mut self, p: ProcId) -> Result<u32, RigError> {
        Ok(self.get(p)?.child.id())
    }

    /// Whether the process is still running.
    pub(crate) fn alive(&mut self, p: ProcId) -> Result<bool, RigError> {
        Ok(self.get(p)?.alive())
    }

    /// How the process exited, once it has (reaped); `None` while it runs.
    pub(crate) fn exit_status(&mut self, p: ProcId) -> Result<Option<ExitStatus>, RigError> {
        let r = self.get(p)?;
        r.alive();
        Ok(r.status)
    }

    /// Sends `signal` to a running process; an exited one is not signalled (its PID may be reused).
    pub(crate) fn signal(&mut self, p: ProcId, signal: &str) -> Result<(), RigError> {
        let r = self.get(p)?;
        if !r.alive() {
            return Err(RigError::Unknown(format!("running process {} ({} exited: {:?})", p.0, r.name, r.status)));
        }
        sys::signal(r.child.id(), signal)
    }

    /// SIGSTOP (`stop = true`) or SIGCONT, returning once every thread of the process is stopped
    /// (or none is): the signal itself takes effect asynchronously.
    pub(crate) fn set_stopped(&mut self, p: ProcId, stop: bool) -> Result<(), RigError> {
        self.signal(p, if stop { "STOP" } else { "CONT" })?;
        let pid = self.get(p)?.child.id();
        let deadline = Instant::now() + Duration::from_secs(2);
        while sys::all_threads_stopped(pid) != Some(stop) {
            if Instant::now() > deadline {
                return Err(RigError::Timeout { what: format!("pid {pid} stopped={stop}"), logs: String::new() });
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        Ok(())
    }

    /// SIGKILL, and reap it.
    pub(crate) fn kill9(&mut self, p: ProcId) -> Result<ExitStatus, RigError> {
        self.signal(p, "KILL")?;
        let r = self.get(p)?;
        let status = r.child.wait().map_err(|e| RigError::io(format!("wait for {}", r.name), e))?;
        r.status = Some(status);
        Ok(status)
    }

    /// Stops every process: SIGCONT (a paused one cannot act on SIGTERM) and SIGTERM, up to `grace`
    /// for them to exit, then SIGKILL; all reaped.
    pub(crate) fn stop_all(&mut self, grace: Duration) {
        for r in &mut self.all {
            if r.alive() {
                let _ = sys::signal(r.child.id(), "CONT");
                let _ = sys::signal(r.child.id(), "TERM");
            }
        }
        let deadline = Instant::now() + grace;
        while self.all.iter_mut().any(Running::alive) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        for r in &mut self.all {
            if r.alive() {
                let _ = r.child.kill();
                r.status = r.child.wait().ok();
            }
        }
    }

    /// The end of every process's stdout and stderr, headed by its name, host, PID and status.
    pub(crate) fn logs(&mut self) -> String {
        let mut s = String::new();
        for (i, r) in self.all.iter_mut().enumerate() {
            let state = if r.alive() { "running".to_string() } else { format!("{:?}", r.status) };
            let _ =
                writeln!(s, "===== process {i} `{}` on host {} (pid {}, {state}) =====", r.name, r.host, r.child.id());
            for (what, path) in [("stdout", &r.out), ("stderr", &r.err)] {
                let text = tail(path);
                if !text.is_empty() {
                    let _ = writeln!(s, "--- {what} ({}) ---\n{}", path.display(), text.trim_end());
                }
            }
        }
        s
    }
}

/// `cmd` as run inside namespace `ns`: `ip netns exec ns program args…`, with its environment and
/// working directory. `ip netns exec` execs the program, so the child's PID is the program's.
pub(crate) fn in_netns(ns: &str, cmd: &Command) -> Command {
    let mut wrapped = Command::new("ip");
    wrapped.args(["netns", "exec", ns]).arg(cmd.get_program()).args(cmd.get_args());
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => wrapped.env(k, v),
            None => wrapped.env_remove(k),
        };
    }
    if let Some(d) = cmd.get_current_dir() {
        wrapped.current_dir(d);
    }
    wrapped
}

/// The last [`LOG_TAIL`] bytes of a file, lossily as text.
fn tail(path: &std::path::Path) -> String {
    let Ok(mut f) = File::open(path) else { return String::new() };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let skip = len.saturating_sub(LOG_TAIL);
    if f.seek(SeekFrom::Start(skip)).is_err() {
        return String::new();
    }
    let mut buf = Vec::new();
    let _ = f.read_to_end(&mut buf);
    let text = String::from_utf8_lossy(&buf).into_owned();
    if skip > 0 { format!("[… {skip} bytes before]\n{text}") } else { text }
}
