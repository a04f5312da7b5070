//! The TOML files of a cv cluster on a rig, as `cvctl master|worker|fs|report --config` read them
//! (tools/src/config.rs: `[tls]`, `[master]`, `[worker]`, `[client]`). Written as text: this crate
//! does not link cv's config types, it drives the binaries.

use std::net::SocketAddrV4;
use std::path::Path;
use std::time::Duration;

/// The port the master listens on, in its host's namespace.
pub(crate) const MASTER_PORT: u16 = 7700;
/// Shard 0's port on every worker host.
pub(crate) const WORKER_PORT: u16 = 7100;

/// `[tls]` with the identity `who` (`node` or `client`) from a `cvctl cert init` directory.
fn tls(certs: &Path, who: &str) -> String {
    let p = |f: &str| toml_str(&certs.join(f).to_string_lossy());
    format!("[tls]\nca = {}\ncert = {}\nkey = {}\n", p("ca.pem"), p(&format!("{who}.pem")), p(&format!("{who}.key")))
}

/// A TOML basic string.
fn toml_str(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

fn ms(d: Duration) -> String {
    format!("\"{}ms\"", d.as_millis())
}

/// The master's file: listening on `listen`, journal in `journal`, declaring a worker lost after
/// `heartbeat_timeout` (workers are told to heartbeat three times within it).
pub(crate) fn master(
    certs: &Path,
    listen: SocketAddrV4,
    journal: &Path,
    heartbeat_timeout: Duration,
    write_lease: Duration,
) -> String {
    format!(
        "{}\n[master]\nlisten = \"{listen}\"\njournal_dir = {}\nnode = \"rig-master\"\nheartbeat_timeout = {}\n\
         write_lease = {}\n",
        tls(certs, "node"),
        toml_str(&journal.to_string_lossy()),
        ms(heartbeat_timeout),
        ms(write_lease),
    )
}

/// What varies between worker files.
#[derive(Clone, Debug)]
pub(crate) struct WorkerFile<'a> {
    pub(crate) master: SocketAddrV4,
    /// Bound and advertised.
    pub(crate) addr: std::net::Ipv4Addr,
    pub(crate) node: String,
    pub(crate) data_dir: &'a Path,
    pub(crate) capacity: u64,
    pub(crate) memory_tier: u64,
    /// Deadline of the worker's connect to the master and of each call: short, so a worker whose
    /// link came back reconnects soon.
    pub(crate) master_call_timeout: Duration,
}

/// A worker's file: one shard, unpinned (the rig shares few cores), no fdatasync (test data).
pub(crate) fn worker(certs: &Path, w: &WorkerFile<'_>) -> String {
    format!(
        "{}\n[worker]\nmaster = \"{}\"\nhost = \"{}\"\nbind = \"{}\"\nbase_port = {WORKER_PORT}\nshards = 1\n\
         pin_cores = false\nsync_data = false\nmemory_tier = {}\nnode = {}\nmaster_call_timeout = {}\n\
         [[worker.data_dirs]]\npath = {}\ncapacity = {}\n",
        tls(certs, "node"),
        w.master,
        w.addr,
        w.addr,
        w.memory_tier,
        toml_str(&w.node),
        ms(w.master_call_timeout),
        toml_str(&w.data_dir.to_string_lossy()),
        w.capacity,
    )
}

/// The client's file (for `cvctl fs` and `cvctl report` in the root namespace).
pub(crate) fn client(certs: &Path, master: SocketAddrV4, deadline: Duration) -> String {
    format!(
        "{}\n[client]\nmaster = \"{master}\"\ndeadline = {}\nnode = \"rig-client\"\n",
        tls(certs, "client"),
        ms(deadline)
    )
}
