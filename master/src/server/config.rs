//! The `[master]` section of the cv configuration file, typed and validated, and its
//! conversion into [`MasterConfig`].

use super::mount_policy::MountPolicy;
use cv_master_core::config::MasterConfig;
use cv_net::config::{ByteSize, ConfigError, Dur, MetricsAddr};
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// How the master serves: where it listens, where its journal lives, and its tunables.
///
/// ```toml
/// [master]
/// listen = "0.0.0.0:7700"
/// metrics = "127.0.0.1:9464"   # Prometheus /metrics over HTTP; "off" serves none
/// journal_dir = "/var/lib/cv/master"
/// heartbeat_timeout = "30s"
/// tail_budget = "1GiB"
/// default_tail = "64KiB"
/// block_size = "4MiB"
/// snapshot_every = 100000
/// read_waits_for_durability = true
/// write_lease = "5m"
/// replicas = 2
/// replica_grace = "1m"
/// check_tails = true
/// # Under Raft (master/HA.md): this master's id, every master of the group (this one too),
/// # and, on one master for the group's very first start only, `bootstrap = true`.
/// node_id = 1
/// peers = [{ id = 1, addr = "10.0.0.1:7700" }, { id = 2, addr = "10.0.0.2:7700" }, { id = 3, addr = "10.0.0.3:7700" }]
/// bootstrap = false
/// raft_reads = "lease"
/// election_timeout = "250ms"
/// capability_lifetime = "10h"
/// capability_key = "/etc/cv/certs/capability.key"   # the same file on every master of a group
/// max_connections_per_identity = 4096
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    /// UDP address of the QUIC endpoint.
    pub listen: SocketAddr,
    /// Where `cvctl master` serves Prometheus `/metrics` over HTTP (loopback by default), or
    /// off.
    pub metrics: MetricsAddr,
    /// Holds the `journal` and `snapshot` files.
    pub journal_dir: PathBuf,
    /// Name announced in hello replies, for peers' logs.
    pub node: String,
    /// A worker silent for longer is marked lost.
    pub heartbeat_timeout: Dur,
    /// How often lost workers are looked for; 0 takes a quarter of `heartbeat_timeout`.
    pub tick_interval: Dur,
    /// Byte budget of the tail cache.
    pub tail_budget: ByteSize,
    /// Tail kept for files whose format is not recognised.
    pub default_tail: ByteSize,
    /// Largest block a client may write.
    pub block_size: ByteSize,
    /// Snapshot (and restart the journal) after this many records; 0 = never.
    pub snapshot_every: u64,
    /// Reads wait until everything they could observe is durable.
    pub read_waits_for_durability: bool,
    /// A file being written whose writer has been silent this long (no add-block, no
    /// complete) is removed: a writer that died leaves no half-written entry behind.
    pub write_lease: Dur,
    /// Copies of every block whose only copy is in cv (files outside mounts, fs-mode files
    /// not yet exported), on different workers; fewer while fewer workers are live. 1..=8.
    pub replicas: u32,
    /// A lost worker's copies still count for this long; then its blocks are copied again.
    pub replica_grace: Dur,
    /// Keep the tail a writer sends with `complete` only once it was read back from the
    /// file's blocks and found the same (one read of a shard per completion, after it). Off
    /// only for a master measured alone, whose workers are stand-ins.
    pub check_tails: bool,
    /// Under Raft: this master's id in the group (1..). 0 with no `peers`: one master.
    pub node_id: u64,
    /// Under Raft: every master of the group, this one included; empty: one master, with
    /// the local journal.
    pub peers: Vec<PeerConfig>,
    /// Under Raft: make a new group of `peers` if this master's Raft files are pristine (the
    /// group's first start, on one master only).
    pub bootstrap: bool,
    /// Under Raft: how the leader proves to a read that it still leads.
    pub raft_reads: RaftReads,
    /// Under Raft: a follower that hears nothing from the leader for this long (to twice
    /// as long, at random) stands for election. Heartbeats go out at a quarter of it.
    pub election_timeout: Dur,
    /// What may be mounted (`[master.mounts]`; `mount_policy.rs`).
    pub mounts: MountPolicy,
    /// How long a block capability in an open or `AddBlock` reply is good for (a reader
    /// holding a file open longer opens it again, transparently); the signing key changes every
    /// tenth of it (docs/security.md, "Block capabilities").
    pub capability_lifetime: Dur,
    /// A file of 64 hex digits (`cvctl cert init` writes `capability.key`) from which the
    /// capability keys are derived: the same on every master of a group, a failover changes no
    /// key. Without it each master makes random keys, and after a failover a worker serves the
    /// new leader's capabilities only once it registered there.
    pub capability_key: Option<PathBuf>,
    /// Connections one client or admin certificate may hold at this master at once (more are
    /// refused `LimitExceeded` at the hello), so one identity cannot take every slot. Worker
    /// and master certificates are not counted.
    pub max_connections_per_identity: usize,
}

/// One master of a Raft group.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PeerConfig {
    pub id: u64,
    /// Its QUIC address, the one clients and the other masters dial.
    pub addr: SocketAddr,
}

/// How the Raft leader proves leadership to reads (master/HA.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RaftReads {
    /// A lease renewed by a quorum round every heartbeat; reads inside it answer at once.
    Lease,
    /// Every read waits for a quorum round that started after it.
    ReadIndex,
}

impl Default for ServerConfig {
    fn default() -> Self {
        let core = MasterConfig::default();
        ServerConfig {
            listen: SocketAddr::from(([0, 0, 0, 0], 7700)),
            metrics: MetricsAddr::loopback(9464),
            journal_dir: core.journal_dir,
            node: "cv-master".into(),
            heartbeat_timeout: Dur(core.heartbeat_timeout),
            tick_interval: Dur::millis(0),
            tail_budget: ByteSize(core.tail_budget_bytes),
            default_tail: ByteSize(core.default_tail_bytes),
            block_size: ByteSize(core.block_size),
            snapshot_every: core.snapshot_every,
            read_waits_for_durability: core.read_waits_for_durability,
            write_lease: Dur(core.write_lease),
            replicas: core.replicas as u32,
            replica_grace: Dur(core.replica_grace),
            check_tails: true,
            node_id: 0,
            peers: Vec::new(),
            bootstrap: false,
            raft_reads: RaftReads::Lease,
            election_timeout: Dur::millis(250),
            mounts: MountPolicy::default(),
            capability_lifetime: Dur::secs(10 * 3600),
            capability_key: None,
            max_connections_per_identity: cv_net::peers::PER_IDENTITY,
        }
    }
}

/// The wire's payload limit: a block or tail must fit in one frame.
const MAX_PAYLOAD: u64 = cv_wire::Limits::DEFAULT.max_payload as u64;

impl ServerConfig {
    /// Checks every value, naming the field (`<section>.<field>`) that is wrong.
    pub fn validate(&self, section: &str) -> Result<(), ConfigError> {
        let f = |name: &str| format!("{section}.{name}");
        if self.journal_dir.as_os_str().is_empty() {
            return Err(ConfigError::new(f("journal_dir"), "must not be empty"));
        }
        if self.node.is_empty() || self.node.len() > 255 {
            return Err(ConfigError::new(f("node"), "must be 1 to 255 bytes"));
        }
        if self.heartbeat_timeout.get() < Duration::from_millis(100) {
            return Err(ConfigError::new(f("heartbeat_timeout"), "must be at least 100ms"));
        }
        if self.tick_interval >= self.heartbeat_timeout {
            return Err(ConfigError::new(f("tick_interval"), "must be shorter than heartbeat_timeout"));
        }
        if self.block_size.bytes() < 64 << 10 || self.block_size.bytes() > MAX_PAYLOAD {
            return Err(ConfigError::new(
                f("block_size"),
                format!("must be between 64KiB and {}", ByteSize(MAX_PAYLOAD)),
            ));
        }
        if self.default_tail.bytes() == 0 || self.default_tail.bytes() > MAX_PAYLOAD {
            return Err(ConfigError::new(
                f("default_tail"),
                format!("must be between 1B and {}", ByteSize(MAX_PAYLOAD)),
            ));
        }
        if self.write_lease.get() < Duration::from_secs(1) {
            return Err(ConfigError::new(f("write_lease"), "must be at least 1s"));
        }
        if !(1..=8).contains(&self.replicas) {
            return Err(ConfigError::new(f("replicas"), "must be 1 to 8"));
        }
        if self.tail_budget < self.default_tail {
            return Err(ConfigError::new(f("tail_budget"), "must be at least default_tail"));
        }
        let life = self.capability_lifetime.get();
        if life < Duration::from_secs(10) || life > Duration::from_secs(7 * 24 * 3600) {
            return Err(ConfigError::new(f("capability_lifetime"), "must be 10s to 7 days"));
        }
        if self.max_connections_per_identity == 0 {
            return Err(ConfigError::new(f("max_connections_per_identity"), "must be at least 1"));
        }
        self.mounts.validate(&f("mounts"))?;
        self.validate_raft(section)
    }

    fn validate_raft(&self, section: &str) -> Result<(), ConfigError> {
        let f = |name: &str| format!("{section}.{name}");
        if self.peers.is_empty() {
            if self.node_id != 0 || self.bootstrap {
                return Err(ConfigError::new(f("peers"), "node_id and bootstrap need the group's peers"));
            }
            return Ok(());
        }
        let mut ids: Vec<u64> = self.peers.iter().map(|p| p.id).collect();
        ids.sort_unstable();
        ids.dedup();
        if ids.len() != self.peers.len() || ids.contains(&0) {
            return Err(ConfigError::new(f("peers"), "ids must be distinct and at least 1"));
        }
        if !ids.contains(&self.node_id) {
            return Err(ConfigError::new(
                f("node_id"),
                format!("{} is not among the peers' ids {ids:?}", self.node_id),
            ));
        }
        let e = self.election_timeout.get();
        if e < Duration::from_millis(100) || e > Duration::from_secs(60) {
            return Err(ConfigError::new(f("election_timeout"), "must be 100ms to 60s"));
        }
        Ok(())
    }

    /// The group secret of `capability_key`, read and checked (none without it).
    pub fn capability_secret(&self, section: &str) -> Result<Option<[u8; 32]>, ConfigError> {
        let Some(path) = &self.capability_key else { return Ok(None) };
        let field = format!("{section}.capability_key");
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError::new(&field, format!("cannot read {}: {e}", path.display())))?;
        cv_net::capability::parse_group_secret(&text)
            .map(Some)
            .map_err(|e| ConfigError::new(&field, format!("{}: {e}", path.display())))
    }

    /// This master's Raft address (its entry in `peers`).
    pub fn raft_addr(&self) -> Option<SocketAddr> {
        self.peers.iter().find(|p| p.id == self.node_id).map(|p| p.addr)
    }

    /// How often the lost-worker tick runs.
    pub fn tick_every(&self) -> Duration {
        if self.tick_interval.get().is_zero() { self.heartbeat_timeout.get() / 4 } else { self.tick_interval.get() }
    }

    /// How often workers should heartbeat: three chances before the timeout.
    pub fn heartbeat_every(&self) -> Duration {
        (self.heartbeat_timeout.get() / 3).max(Duration::from_millis(1))
    }

    /// The core's configuration (other core tunables keep their defaults).
    pub fn master_config(&self) -> MasterConfig {
        MasterConfig {
            journal_dir: self.journal_dir.clone(),
            heartbeat_timeout: self.heartbeat_timeout.get(),
            tail_budget_bytes: self.tail_budget.bytes(),
            default_tail_bytes: self.default_tail.bytes(),
            block_size: self.block_size.bytes(),
            snapshot_every: self.snapshot_every,
            read_waits_for_durability: self.read_waits_for_durability,
            write_lease: self.write_lease.get(),
            replicas: self.replicas as usize,
            replica_grace: self.replica_grace.get(),
            ..MasterConfig::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_capability_key_file_is_read_and_a_bad_one_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("capability.key");
        let c = ServerConfig { capability_key: Some(path.clone()), ..ServerConfig::default() };
        let e = c.capability_secret("master").unwrap_err();
        assert!(e.to_string().contains("master.capability_key") && e.to_string().contains("cannot read"), "{e}");
        std::fs::write(&path, "not hex\n").unwrap();
        let e = c.capability_secret("master").unwrap_err();
        assert!(e.to_string().contains("64 hex digits"), "{e}");
        std::fs::write(&path, cv_net::capability::new_group_secret()).unwrap();
        assert!(c.capability_secret("master").unwrap().is_some());
        assert_eq!(ServerConfig::default().capability_secret("master").unwrap(), None);
        let life = ServerConfig { capability_lifetime: Dur::secs(1), ..ServerConfig::default() };
        assert!(life.validate("master").unwrap_err().to_string().contains("capability_lifetime"));
    }

    #[test]
    fn parses_typed_values_and_validates() {
        let c: ServerConfig = toml::from_str(
            "listen = \"127.0.0.1:9000\"\njournal_dir = \"/tmp/j\"\nheartbeat_timeout = \"3s\"\ntail_budget = \"8MiB\"\n",
        )
        .unwrap();
        c.validate("master").unwrap();
        assert_eq!(c.listen, SocketAddr::from(([127, 0, 0, 1], 9000)));
        assert_eq!(c.tick_every(), Duration::from_millis(750));
        let m = c.master_config();
        assert_eq!(m.tail_budget_bytes, 8 << 20);
        assert_eq!(m.heartbeat_timeout, Duration::from_secs(3));
        assert_eq!(m.default_tail_bytes, 64 << 10);
    }

    #[test]
    fn errors_name_the_field() {
        let field = |c: ServerConfig| c.validate("master").unwrap_err().field;
        let d = ServerConfig::default;
        assert_eq!(field(ServerConfig { journal_dir: PathBuf::new(), ..d() }), "master.journal_dir");
        assert_eq!(field(ServerConfig { heartbeat_timeout: Dur::millis(5), ..d() }), "master.heartbeat_timeout");
        assert_eq!(field(ServerConfig { tick_interval: Dur::secs(60), ..d() }), "master.tick_interval");
        assert_eq!(field(ServerConfig { block_size: ByteSize(100), ..d() }), "master.block_size");
        assert_eq!(field(ServerConfig { default_tail: ByteSize(0), ..d() }), "master.default_tail");
        assert_eq!(field(ServerConfig { tail_budget: ByteSize::kib(1), ..d() }), "master.tail_budget");
        assert!(toml::from_str::<ServerConfig>("journal_dirr = \"x\"").is_err());
    }
}
