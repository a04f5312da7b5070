//! Client settings: where the master is, deadlines, retries, read-ahead.

use cv_net::config::{ConfigError, Dur};
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;

/// The `[client]` section of the cv config file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ClientSettings {
    /// The master's QUIC address (under Raft, the one tried first).
    pub master: SocketAddr,
    /// Under Raft: the group's other masters. A call follows the leader a master names, or
    /// tries the next master when one does not answer as leader.
    pub masters: Vec<SocketAddr>,
    /// Deadline of one call, retries included.
    pub deadline: Dur,
    /// Attempts after the first for errors marked retryable.
    pub retries: u32,
    /// Pause before the first retry; doubles each time.
    pub backoff: Dur,
    /// Chunks (`read_chunk` each) the sequential reader keeps in flight ahead of the caller.
    /// A chunk's time is a disk read at the worker plus its transfer, one after the other, so
    /// the window must cover both: at 8 × 1 MiB, sequential reads measured 20 % faster than at
    /// 4 (worker/MEASUREMENTS.md, "Where a read's time goes").
    pub prefetch_depth: u32,
    /// Bytes per request of the sequential reader.
    pub read_chunk: cv_net::config::ByteSize,
    /// Name shown in server logs.
    pub node: String,
    /// Read blocks of workers on this host straight from their data files (short-circuit
    /// reads, `wire/FORMAT.md`) instead of over QUIC. Off: every read goes over QUIC.
    pub short_circuit: bool,
}

impl Default for ClientSettings {
    fn default() -> Self {
        ClientSettings {
            master: "127.0.0.1:7700".parse().expect("literal address"),
            masters: Vec::new(),
            deadline: Dur::secs(15),
            retries: 3,
            backoff: Dur::millis(20),
            prefetch_depth: 8,
            read_chunk: cv_net::config::ByteSize::mib(1),
            node: "cv-client".into(),
            short_circuit: true,
        }
    }
}

impl ClientSettings {
    /// Checks the values, naming the field that is wrong.
    pub fn validate(&self, section: &str) -> Result<(), ConfigError> {
        let f = |n: &str| format!("{section}.{n}");
        if self.deadline.get().is_zero() {
            return Err(ConfigError::new(f("deadline"), "must be > 0"));
        }
        if self.retries > 20 {
            return Err(ConfigError::new(f("retries"), "must be <= 20"));
        }
        if self.prefetch_depth == 0 || self.prefetch_depth > 64 {
            return Err(ConfigError::new(f("prefetch_depth"), "must be between 1 and 64"));
        }
        if self.read_chunk.bytes() < 4096 || self.read_chunk.bytes() > 64 << 20 {
            return Err(ConfigError::new(f("read_chunk"), "must be between 4KiB and 64MiB"));
        }
        Ok(())
    }
}
