//! Running the system tools the rig is built from (`ip`, `mount`, `kill`) and reading their output.

use std::ffi::OsStr;
use std::process::Command;

use super::error::RigError;

/// Runs `program args…` to completion; its stdout, or an error with its stderr.
pub(crate) fn run<S: AsRef<OsStr>>(program: &str, args: &[S]) -> Result<String, RigError> {
    let cmd = || {
        let mut line = program.to_string();
        for a in args {
            line.push(' ');
            line.push_str(&a.as_ref().to_string_lossy());
        }
        line
    };
    let out = Command::new(program)
        .args(args)
        .output()
        .map_err(|e| RigError::Command { cmd: cmd(), detail: format!("cannot start: {e}") })?;
    if !out.status.success() {
        let detail = format!("{}: {}", out.status, String::from_utf8_lossy(&out.stderr).trim());
        return Err(RigError::Command { cmd: cmd(), detail });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `ip args…`.
pub(crate) fn ip<S: AsRef<OsStr>>(args: &[S]) -> Result<String, RigError> {
    run("ip", args)
}

/// Sends `signal` (e.g. `KILL`, `STOP`) to `pid`.
pub(crate) fn signal(pid: u32, signal: &str) -> Result<(), RigError> {
    run("kill", &["-s", signal, &pid.to_string()]).map(drop)
}

/// Why the rig cannot run in this process, if it cannot: it needs root and iproute2.
pub(crate) fn unavailable() -> Option<String> {
    // Without libc: the effective uid is in /proc/self/status ("Uid: real effective saved fs").
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let euid = status.lines().find_map(|l| l.strip_prefix("Uid:")).and_then(|l| l.split_whitespace().nth(1));
    if euid != Some("0") {
        return Some(format!("it needs root (network namespaces, a bridge, tmpfs mounts); euid is {euid:?}"));
    }
    if let Err(e) = ip(&["-V"]) {
        return Some(format!("iproute2 is missing: {e}"));
    }
    None
}

/// The names of the network namespaces (`ip netns list` prints `name (id: N)` per line).
pub(crate) fn netns_list() -> Result<Vec<String>, RigError> {
    Ok(ip(&["netns", "list"])?.lines().filter_map(|l| l.split_whitespace().next()).map(str::to_string).collect())
}

/// The names of the network interfaces of the root namespace.
pub(crate) fn links() -> Vec<String> {
    let Ok(dir) = std::fs::read_dir("/sys/class/net") else { return Vec::new() };
    dir.filter_map(|e| e.ok()?.file_name().into_string().ok()).collect()
}

/// The alias of a root-namespace link (empty if none).
pub(crate) fn link_alias(link: &str) -> String {
    std::fs::read_to_string(format!("/sys/class/net/{link}/ifalias")).unwrap_or_default().trim().to_string()
}

/// The PIDs of the processes in a namespace.
pub(crate) fn netns_pids(ns: &str) -> Vec<u32> {
    ip(&["netns", "pids", ns]).unwrap_or_default().split_whitespace().filter_map(|p| p.parse().ok()).collect()
}

/// Whether a process with this PID exists.
pub(crate) fn pid_alive(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// Whether every thread of `pid` is stopped (state `T`), `Some(false)` if none is, `None` if some
/// are (a group stop or continue under way) or the process is gone.
pub(crate) fn all_threads_stopped(pid: u32) -> Option<bool> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let mut states = tasks.filter_map(|t| {
        let stat = std::fs::read_to_string(t.ok()?.path().join("stat")).ok()?;
        // `pid (comm) S …`: the state follows the last `)` (comm may hold anything).
        Some(stat.rsplit_once(')')?.1.trim_start().starts_with('T'))
    });
    let first = states.next()?;
    states.all(|s| s == first).then_some(first)
}

/// Mount points (as listed in /proc/self/mounts) under `dir`, deepest first.
pub(crate) fn mounts_under(dir: &std::path::Path) -> Vec<String> {
    let text = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    let prefix = dir.to_string_lossy().into_owned();
    let mut found: Vec<String> = text
        .lines()
        .filter_map(|l| l.split_whitespace().nth(1))
        .filter(|m| *m == prefix || m.starts_with(&format!("{prefix}/")))
        .map(str::to_string)
        .collect();
    found.sort_by_key(|m| std::cmp::Reverse(m.len()));
    found
}
