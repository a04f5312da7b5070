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

/// `[tls]` with the identity `who` (`node`, `admin` or `client`) from a `cvctl cert init` directory.
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

/// What varies between master files.
#[derive(Clone, Debug)]
pub(crate) struct MasterFile<'a> {
    pub(crate) listen: SocketAddrV4,
    pub(crate) journal: &'a Path,
    /// Declaring a worker lost after this (workers are told to heartbeat three times within it).
    pub(crate) heartbeat_timeout: Duration,
    pub(crate) write_lease: Duration,
    pub(crate) replicas: u32,
    pub(crate) replica_grace: Duration,
    pub(crate) block_size: Option<u64>,
    /// In a Raft group: this master's place in it.
    pub(crate) raft: Option<RaftMember>,
    /// Where the rig's object store may listen (the bridge): mounts may name it as endpoint.
    pub(crate) store_host: std::net::Ipv4Addr,
}

/// A Raft group's member: its id, every master `(id, address)`, and whether it makes the
/// group on its first start.
#[derive(Clone, Debug)]
pub(crate) struct RaftMember {
    pub(crate) id: u64,
    pub(crate) peers: Vec<(u64, SocketAddrV4)>,
    pub(crate) bootstrap: bool,
}

/// The `[master]` lines of a Raft group's member.
fn raft_lines(raft: &Option<RaftMember>) -> String {
    let Some(m) = raft else { return String::new() };
    let peers: Vec<String> = m.peers.iter().map(|(i, a)| format!("{{ id = {i}, addr = \"{a}\" }}")).collect();
    format!("node_id = {}\npeers = [{}]\nbootstrap = {}\n", m.id, peers.join(", "), m.bootstrap)
}

/// The master's file.
pub(crate) fn master(certs: &Path, m: &MasterFile<'_>) -> String {
    format!(
        "{}\n[master]\nlisten = \"{}\"\njournal_dir = {}\nnode = \"rig-master\"\nheartbeat_timeout = {}\n\
         write_lease = {}\nreplicas = {}\nreplica_grace = {}\n{}{}",
        tls(certs, "node"),
        m.listen,
        toml_str(&m.journal.to_string_lossy()),
        ms(m.heartbeat_timeout),
        ms(m.write_lease),
        m.replicas,
        ms(m.replica_grace),
        m.block_size.map(|b| format!("block_size = {b}\n")).unwrap_or_default(),
        raft_lines(&m.raft),
    ) + &capability_key(certs)
        + &format!("\n[master.mounts]\nallow = [\"s3://\"]\nendpoints = [\"http://{}:*\"]\n", m.store_host)
}

/// The masters' shared capability secret, when the certificates' directory holds one (`cvctl
/// cert init` writes it).
fn capability_key(certs: &Path) -> String {
    let path = certs.join("capability.key");
    if path.exists() { format!("capability_key = {}\n", toml_str(&path.to_string_lossy())) } else { String::new() }
}

/// What varies between worker files.
#[derive(Clone, Debug)]
pub(crate) struct WorkerFile<'a> {
    pub(crate) master: SocketAddrV4,
    /// The group's other masters (empty: one master).
    pub(crate) others: Vec<SocketAddrV4>,
    /// Bound and advertised.
    pub(crate) addr: std::net::Ipv4Addr,
    pub(crate) node: String,
    pub(crate) data_dir: &'a Path,
    pub(crate) capacity: u64,
    pub(crate) memory_tier: u64,
    /// Deadline of the worker's connect to the master and of each call: short, so a worker whose
    /// link came back reconnects soon.
    pub(crate) master_call_timeout: Duration,
    /// Failure-domain label (empty: none).
    pub(crate) zone: String,
}

/// A worker's file: one shard, unpinned (the rig shares few cores), no fdatasync (test data).
pub(crate) fn worker(certs: &Path, w: &WorkerFile<'_>) -> String {
    format!(
        "{}\n[worker]\nmaster = \"{}\"\nmasters = [{}]\nhost = \"{}\"\nbind = \"{}\"\nbase_port = {WORKER_PORT}\nshards = 1\n\
         pin_cores = false\nsync_data = false\nmemory_tier = {}\nnode = {}\nmaster_call_timeout = {}\nzone = {}\n\
         [[worker.data_dirs]]\npath = {}\ncapacity = {}\n",
        tls(certs, "node"),
        w.master,
        quoted(&w.others),
        w.addr,
        w.addr,
        w.memory_tier,
        toml_str(&w.node),
        ms(w.master_call_timeout),
        toml_str(&w.zone),
        toml_str(&w.data_dir.to_string_lossy()),
        w.capacity,
    )
}

fn quoted(addrs: &[SocketAddrV4]) -> String {
    addrs.iter().map(|a| format!("\"{a}\"")).collect::<Vec<_>>().join(", ")
}

/// The client's file (for `cvctl fs` and `cvctl report` in the root namespace): the first
/// master, then the others.
pub(crate) fn client(certs: &Path, masters: &[SocketAddrV4], deadline: Duration) -> String {
    client_as(certs, "client", masters, deadline)
}

/// A client file with the identity `who` (`client`, or `admin` for the operator's commands).
pub(crate) fn client_as(certs: &Path, who: &str, masters: &[SocketAddrV4], deadline: Duration) -> String {
    format!(
        "{}\n[client]\nmaster = \"{}\"\nmasters = [{}]\ndeadline = {}\nnode = \"rig-client\"\n",
        tls(certs, who),
        masters[0],
        quoted(&masters[1..]),
        ms(deadline)
    )
}
