//! Typed settings of a worker process (the `[worker]` section of the cv config file).
//!
//! ```toml
//! [worker]
//! master = "10.0.0.1:7000"        # omit to serve without registering (tests, benches)
//! host = "10.0.0.2"               # what clients and the master are told to dial
//! bind = "0.0.0.0"
//! base_port = 7100                # shard i listens on base_port + i; 0 = ephemeral
//! shards = 0                      # 0 = one per CPU this process may use
//! memory_tier = "1GiB"            # whole worker, split evenly between shards
//! block_size = "4MiB"
//! heartbeat_interval = "3s"
//! ufs_threads = 2                 # tokio threads fetching missing blocks from object storage
//! mount_refresh = "30s"           # a mount's configuration is asked of the master again after this
//! master_call_timeout = "5s"      # the fetch pool's deadline for connecting to the master and each call
//! [[worker.data_dirs]]
//! path = "/nvme0/cv"
//! capacity = "800GiB"             # whole worker in this directory, split between shards
//! ```

use std::net::IpAddr;
use std::path::PathBuf;

use cv_net::config::{ByteSize, ConfigError, Dur, MetricsAddr};
use cv_wire::Limits;
use serde::{Deserialize, Serialize};

use crate::store::{DataDir, StoreConfig, Watermarks};

/// Longest path a Unix socket may be bound to (`sun_path` less its NUL).
const MAX_SOCKET_PATH: usize = 107;

/// One data directory and the bytes the whole worker may use in it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DataDirSettings {
    /// Directory; shard `i` keeps its files in `<path>/shard-<i>`.
    pub path: PathBuf,
    /// Bytes preallocated here, for all shards together.
    pub capacity: ByteSize,
}

/// Disk-use watermarks in percent of capacity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WatermarkSettings {
    /// Start evicting above this percentage.
    pub high_pct: u8,
    /// Evict down to this percentage.
    pub low_pct: u8,
}

impl Default for WatermarkSettings {
    fn default() -> Self {
        let w = Watermarks::default();
        Self { high_pct: w.high_pct, low_pct: w.low_pct }
    }
}

/// Everything a worker process needs besides TLS and transport settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WorkerSettings {
    /// The master's `host:port`; `None` serves blocks without registering.
    pub master: Option<String>,
    /// Under Raft: the group's other masters (`host:port`); the worker registers with and
    /// heartbeats to whichever leads.
    pub masters: Vec<String>,
    /// Host name or IP advertised to the master and named in `WrongShard` redirects.
    pub host: String,
    /// Local address the shard sockets bind to.
    pub bind: IpAddr,
    /// Shard `i` listens on UDP `base_port + i`; 0 gives every shard an ephemeral port.
    pub base_port: u16,
    /// Where `cvctl worker` serves Prometheus `/metrics` over HTTP (loopback by default), or
    /// `"off"`.
    pub metrics: MetricsAddr,
    /// Number of shards; 0 = one per CPU this process may use.
    pub shards: u16,
    /// Pin each shard's thread to its own CPU.
    pub pin_cores: bool,
    /// Where blocks are stored.
    pub data_dirs: Vec<DataDirSettings>,
    /// Bytes of hot chunks kept in memory, for all shards together (0 disables the tier).
    pub memory_tier: ByteSize,
    /// Largest block.
    pub block_size: ByteSize,
    /// Checksum and memory-tier unit.
    pub chunk_size: ByteSize,
    /// When to evict.
    pub watermarks: WatermarkSettings,
    /// Heartbeat period when the master does not dictate one.
    pub heartbeat_interval: Dur,
    /// fdatasync block data before acknowledging a write (off only for tests and benchmarks).
    pub sync_data: bool,
    /// io_uring submission queue depth per shard.
    pub ring_depth: u32,
    /// How long an idle shard polls its rings before it sleeps (0: sleep at once). Each sleep
    /// and wake-up costs a shard several syscalls and an IPI; spinning trades CPU for that.
    pub spin_before_park: Dur,
    /// Node name announced in hellos, for logs.
    pub node: String,
    /// Failure-domain label (rack, room) announced to the master: copies of a block go to
    /// different zones when workers carry them. Empty: none.
    pub zone: String,
    /// Threads of the tokio pool that fetches missing blocks from object storage (beside the
    /// shards, never on them). Only started when a master is configured.
    pub ufs_threads: u16,
    /// The fetch pool asks the master for a mount's configuration again after this long
    /// (rotated credentials, changed options).
    pub mount_refresh: Dur,
    /// Deadline of the fetch pool's connect to the master and of each of its calls there.
    pub master_call_timeout: Dur,
    /// Serve short-circuit reads: clients on this host read committed blocks from the data
    /// files themselves, through descriptors passed on a Unix socket (`wire/FORMAT.md`).
    pub local_reads: bool,
    /// That socket's path; empty: `local.sock` in the first data directory.
    pub local_socket: PathBuf,
    /// How long a short-circuit reader's lease on a block's extent lasts: an evicted or
    /// deleted block's space is reused that much later at most.
    pub local_lease: Dur,
    /// QUIC connections (handshaking or established) each shard holds at once; more are
    /// refused at their first packet. Every client process holds one per shard it reads
    /// from, so a crowd of short-lived ones (a thousand `cvctl` calls at once) must fit.
    pub max_connections: u32,
    /// Handshakes in flight at a shard from which a new peer must first prove its address
    /// (QUIC Retry: one round trip more, no state kept for it meanwhile).
    pub retry_above: u32,
    /// Connections one client or admin certificate may hold at a shard at once (more are
    /// refused `LimitExceeded` at the hello), so one identity cannot take every slot of
    /// `max_connections`. Worker and master certificates are not counted.
    pub max_connections_per_identity: u32,
    /// Record every block request of every shard (block, range, hit or miss, time) to this
    /// file, for `cvctl trace sim` (worker/TRACE-FORMAT.md). Off by default.
    pub trace: Option<PathBuf>,
    /// Records a trace holds at most (32 bytes each); recording stops there.
    pub trace_max_records: u64,
}

impl Default for WorkerSettings {
    fn default() -> Self {
        Self {
            master: None,
            masters: Vec::new(),
            host: "127.0.0.1".into(),
            bind: IpAddr::from([0, 0, 0, 0]),
            base_port: 7100,
            metrics: MetricsAddr::loopback(9465),
            shards: 0,
            pin_cores: true,
            data_dirs: Vec::new(),
            memory_tier: ByteSize::mib(256),
            block_size: ByteSize::mib(4),
            chunk_size: ByteSize::kib(64),
            watermarks: WatermarkSettings::default(),
            heartbeat_interval: Dur::secs(3),
            sync_data: true,
            ring_depth: 128,
            spin_before_park: Dur::millis(0),
            node: "cv-worker".into(),
            zone: String::new(),
            ufs_threads: 2,
            mount_refresh: Dur::secs(30),
            master_call_timeout: Dur::secs(5),
            local_reads: true,
            local_socket: PathBuf::new(),
            local_lease: Dur::secs(5),
            max_connections: 4096,
            retry_above: cv_net::quic::RETRY_ABOVE as u32,
            max_connections_per_identity: 2048,
            trace: None,
            trace_max_records: 10_000_000,
        }
    }
}

impl WorkerSettings {
    /// Checks every value; errors name the field as `<section>.<field>`.
    pub fn validate(&self, section: &str) -> Result<(), ConfigError> {
        let f = |name: &str| format!("{section}.{name}");
        let host_port = |field: &str, m: &str| {
            let port = m.rsplit_once(':').and_then(|(h, p)| (!h.is_empty()).then_some(p));
            match port.and_then(|p| p.parse::<u16>().ok()).filter(|&p| p > 0) {
                Some(_) => Ok(()),
                None => Err(ConfigError::new(f(field), format!("`{m}` is not host:port"))),
            }
        };
        if let Some(m) = &self.master {
            host_port("master", m)?;
        }
        for m in &self.masters {
            host_port("masters", m)?;
        }
        if !self.masters.is_empty() && self.master.is_none() {
            return Err(ConfigError::new(f("masters"), "needs `master`, the one tried first"));
        }
        if self.host.is_empty() || self.host.len() > 253 || self.host.contains(char::is_whitespace) {
            return Err(ConfigError::new(f("host"), "must be a host name or IP address"));
        }
        let shards = u32::from(self.shards.max(1));
        if self.base_port != 0 && u32::from(self.base_port) + shards - 1 > u32::from(u16::MAX) {
            return Err(ConfigError::new(f("base_port"), "base_port + shards exceeds 65535"));
        }
        if self.data_dirs.is_empty() {
            return Err(ConfigError::new(f("data_dirs"), "at least one data directory is needed"));
        }
        let chunk = self.chunk_size.bytes();
        if chunk == 0 || !chunk.is_multiple_of(4096) || chunk > u64::from(u32::MAX) {
            return Err(ConfigError::new(f("chunk_size"), "must be a positive multiple of 4KiB"));
        }
        let block = self.block_size.bytes();
        if block == 0 || !block.is_multiple_of(chunk) || block > u64::from(Limits::DEFAULT.max_payload) {
            return Err(ConfigError::new(
                f("block_size"),
                format!(
                    "must be a multiple of chunk_size and at most {}",
                    ByteSize(Limits::DEFAULT.max_payload.into())
                ),
            ));
        }
        for (i, d) in self.data_dirs.iter().enumerate() {
            if d.path.as_os_str().is_empty() {
                return Err(ConfigError::new(f(&format!("data_dirs[{i}].path")), "must not be empty"));
            }
            if self.data_dirs[..i].iter().any(|o| o.path == d.path) {
                return Err(ConfigError::new(f(&format!("data_dirs[{i}].path")), "listed twice"));
            }
            // Every shard must hold at least one block in each directory.
            if d.capacity.bytes() / u64::from(shards) < block {
                return Err(ConfigError::new(
                    f(&format!("data_dirs[{i}].capacity")),
                    format!("must give each of {shards} shard(s) at least block_size ({})", self.block_size),
                ));
            }
        }
        let w = self.watermarks;
        if w.high_pct == 0 || w.high_pct > 100 || w.low_pct > w.high_pct {
            return Err(ConfigError::new(f("watermarks"), "need 0 <= low_pct <= high_pct <= 100, high_pct > 0"));
        }
        if self.heartbeat_interval.get().is_zero() {
            return Err(ConfigError::new(f("heartbeat_interval"), "must be > 0"));
        }
        if self.ring_depth == 0 || self.ring_depth > 32_768 {
            return Err(ConfigError::new(f("ring_depth"), "must be between 1 and 32768"));
        }
        if self.node.is_empty() || self.node.len() > 256 {
            return Err(ConfigError::new(f("node"), "must be 1 to 256 bytes"));
        }
        if self.zone.len() > 255 || self.zone.contains(char::is_whitespace) {
            return Err(ConfigError::new(f("zone"), "must be at most 255 bytes, without spaces"));
        }
        if self.ufs_threads == 0 || self.ufs_threads > 64 {
            return Err(ConfigError::new(f("ufs_threads"), "must be between 1 and 64"));
        }
        if self.mount_refresh.get().is_zero() {
            return Err(ConfigError::new(f("mount_refresh"), "must be > 0"));
        }
        if self.master_call_timeout.get().is_zero() {
            return Err(ConfigError::new(f("master_call_timeout"), "must be > 0"));
        }
        let lease = self.local_lease.get();
        if lease < std::time::Duration::from_millis(100) || lease > std::time::Duration::from_secs(60) {
            return Err(ConfigError::new(f("local_lease"), "must be between 100ms and 60s"));
        }
        if self.max_connections == 0 || self.max_connections > 1 << 16 {
            return Err(ConfigError::new(f("max_connections"), "must be between 1 and 65536"));
        }
        if self.retry_above == 0 || self.retry_above > self.max_connections {
            return Err(ConfigError::new(f("retry_above"), "must be between 1 and max_connections"));
        }
        if self.max_connections_per_identity == 0 {
            return Err(ConfigError::new(f("max_connections_per_identity"), "must be at least 1"));
        }
        if self.local_socket.as_os_str().len() > MAX_SOCKET_PATH {
            return Err(ConfigError::new(f("local_socket"), format!("must be at most {MAX_SOCKET_PATH} bytes")));
        }
        Ok(())
    }

    /// The short-circuit socket's path: `local_socket`, else `local.sock` in the first data
    /// directory; `None` if that default is longer than a Unix socket path may be.
    pub fn local_socket_path(&self) -> Option<PathBuf> {
        let path = match self.local_socket.as_os_str().is_empty() {
            false => self.local_socket.clone(),
            true => self.data_dirs.first()?.path.join("local.sock"),
        };
        (path.as_os_str().len() <= MAX_SOCKET_PATH).then_some(path)
    }

    /// The store configuration of shard `index` out of `shards`: its directory under each
    /// data dir and an even share of capacity and memory.
    pub fn store_config(&self, index: u16, shards: u16) -> StoreConfig {
        let n = u64::from(shards.max(1));
        let dirs = self
            .data_dirs
            .iter()
            .map(|d| DataDir { path: d.path.join(format!("shard-{index}")), capacity_bytes: d.capacity.bytes() / n })
            .collect();
        let mut c = StoreConfig::new("blocks", dirs);
        c.block_size = self.block_size.bytes();
        c.chunk_size = u32::try_from(self.chunk_size.bytes()).unwrap_or(u32::MAX);
        c.memory_tier_bytes = self.memory_tier.bytes() / n;
        c.watermarks = Watermarks { high_pct: self.watermarks.high_pct, low_pct: self.watermarks.low_pct };
        c.sync_data = self.sync_data;
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn valid() -> WorkerSettings {
        WorkerSettings {
            data_dirs: vec![DataDirSettings { path: "/tmp/cv".into(), capacity: ByteSize::gib(1) }],
            ..Default::default()
        }
    }

    #[test]
    fn defaults_with_a_dir_validate() {
        valid().validate("worker").unwrap();
    }

    #[test]
    fn bad_values_name_their_field() {
        let field = |s: WorkerSettings| s.validate("worker").unwrap_err().field;
        assert_eq!(field(WorkerSettings::default()), "worker.data_dirs");
        assert_eq!(field(WorkerSettings { master: Some("nohost".into()), ..valid() }), "worker.master");
        assert_eq!(field(WorkerSettings { master: Some(":7000".into()), ..valid() }), "worker.master");
        assert_eq!(field(WorkerSettings { block_size: ByteSize::kib(100), ..valid() }), "worker.block_size");
        assert_eq!(field(WorkerSettings { block_size: ByteSize::mib(128), ..valid() }), "worker.block_size");
        assert_eq!(field(WorkerSettings { chunk_size: ByteSize(1000), ..valid() }), "worker.chunk_size");
        assert_eq!(field(WorkerSettings { base_port: 65_535, shards: 2, ..valid() }), "worker.base_port");
        assert_eq!(
            field(WorkerSettings { heartbeat_interval: Dur::millis(0), ..valid() }),
            "worker.heartbeat_interval"
        );
        let w = WatermarkSettings { high_pct: 50, low_pct: 60 };
        assert_eq!(field(WorkerSettings { watermarks: w, ..valid() }), "worker.watermarks");
        assert_eq!(field(WorkerSettings { ufs_threads: 0, ..valid() }), "worker.ufs_threads");
        assert_eq!(field(WorkerSettings { ufs_threads: 65, ..valid() }), "worker.ufs_threads");
        assert_eq!(field(WorkerSettings { mount_refresh: Dur::millis(0), ..valid() }), "worker.mount_refresh");
        assert_eq!(
            field(WorkerSettings { master_call_timeout: Dur::millis(0), ..valid() }),
            "worker.master_call_timeout"
        );
        assert_eq!(field(WorkerSettings { max_connections: 0, ..valid() }), "worker.max_connections");
        assert_eq!(field(WorkerSettings { retry_above: 0, ..valid() }), "worker.retry_above");
        let mut s = valid();
        s.data_dirs.push(s.data_dirs[0].clone());
        assert_eq!(field(s), "worker.data_dirs[1].path");
        let mut s = valid();
        s.shards = 512;
        assert_eq!(field(s), "worker.data_dirs[0].capacity");
    }

    #[test]
    fn store_configs_split_capacity_and_memory() {
        let s = WorkerSettings { memory_tier: ByteSize::mib(64), ..valid() };
        let c = s.store_config(1, 2);
        assert_eq!(c.data_dirs[0].path, PathBuf::from("/tmp/cv/shard-1"));
        assert_eq!(c.data_dirs[0].capacity_bytes, 512 << 20);
        assert_eq!(c.memory_tier_bytes, 32 << 20);
        assert_eq!(c.block_size, 4 << 20);
        c.validate().unwrap();
    }

    #[test]
    fn parses_from_toml_with_units() {
        let s: WorkerSettings = toml::from_str(
            "master = \"m:7000\"\nshards = 2\nheartbeat_interval = \"250ms\"\nufs_threads = 3\n\
             mount_refresh = \"2m\"\nmaster_call_timeout = \"1500ms\"\n\
             [[data_dirs]]\npath = \"/d\"\ncapacity = \"2GiB\"\n",
        )
        .unwrap();
        assert_eq!(s.master.as_deref(), Some("m:7000"));
        assert_eq!(s.heartbeat_interval, Dur::millis(250));
        assert_eq!(s.ufs_threads, 3);
        assert_eq!((s.mount_refresh, s.master_call_timeout), (Dur::secs(120), Dur::millis(1500)));
        assert_eq!(s.data_dirs[0].capacity, ByteSize::gib(2));
        s.validate("worker").unwrap();
        assert!(toml::from_str::<WorkerSettings>("bogus = 1").is_err());
    }
}
