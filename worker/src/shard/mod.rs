//! Shards: one pinned thread per shard running one runtime (`cv_rt`) that owns the shard's
//! block store and QUIC endpoint. Nothing mutable is shared with other threads: the
//! control plane talks to a shard only through [`ShardCmd`] messages.

mod codes;
mod conn;
mod counters;
mod fill;
mod frame_io;
mod handler;
mod peers;
mod pieces;
mod reply;
mod run;

use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;

use crate::error::{Result, WorkerError, WorkerErrorKind};
use crate::store::{StoreStats, Usage};

pub(crate) use run::ShardSpec;

/// A message to a shard from the control plane or the server handle.
#[derive(Debug)]
pub(crate) enum ShardCmd {
    /// Drain the block-report deltas (and list every block when `full`) and send them back.
    Report { full: bool, reply: flume::Sender<ShardReport> },
    /// Delete these blocks (the master's command); their removal shows in the next report.
    Delete(Vec<u64>),
    /// Let eviction take these blocks (their files were exported).
    Unpin(Vec<u64>),
    /// The master's revocation list changed: refuse these certificates, close their
    /// connections (`peers.rs`).
    Revoked(std::sync::Arc<cv_net::revoked::Revoked>),
    /// Send back what `/metrics` shows of this shard (nothing is drained).
    Metrics { reply: flume::Sender<ShardMetrics> },
    /// Close the endpoint, finish in-flight requests, close the store, end the thread.
    Shutdown,
}

/// A shard's counters for `/metrics`, all cumulative but the gauges noted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ShardMetrics {
    pub(crate) shard: u16,
    pub(crate) stats: StoreStats,
    pub(crate) usage: Usage,
    pub(crate) quic: cv_net::quic_stats::QuicTotals,
    /// Requests being served now (a gauge: the shard's queue depth).
    pub(crate) in_flight: u64,
    /// Control-plane commands waiting (a gauge).
    pub(crate) commands_queued: u64,
    /// Fills started from object storage.
    pub(crate) fills: u64,
    /// Readers (and loads) that joined a fill already under way.
    pub(crate) fill_joins: u64,
    /// Fills under way now (a gauge).
    pub(crate) fills_in_flight: u64,
}

/// What a shard reports for a heartbeat.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ShardReport {
    /// Shard index.
    pub(crate) shard: u16,
    /// Blocks committed since the last report (every block if `full`), with their length.
    pub(crate) added: Vec<(u64, u64)>,
    /// Blocks gone since the last report.
    pub(crate) removed: Vec<u64>,
    /// Disk space now.
    pub(crate) usage: Usage,
    /// Tier counters now (cumulative).
    pub(crate) stats: StoreStats,
}

/// A shard thread that is opening its store and binding its port.
#[derive(Debug)]
pub(crate) struct Starting {
    name: String,
    ready: flume::Receiver<Result<SocketAddr>>,
    cmds: flume::Sender<ShardCmd>,
    routes: flume::Sender<Arc<[String]>>,
    thread: JoinHandle<Result<()>>,
}

/// A shard that listens, waiting for the routing table before it serves.
#[derive(Debug)]
pub(crate) struct Started {
    pub(crate) addr: SocketAddr,
    pub(crate) cmds: flume::Sender<ShardCmd>,
    pub(crate) routes: flume::Sender<Arc<[String]>>,
    pub(crate) thread: JoinHandle<Result<()>>,
}

/// Spawns shard `spec.index`; it opens its store and binds its endpoint in the background.
pub(crate) fn spawn(spec: ShardSpec) -> Result<Starting> {
    let (ready_tx, ready_rx) = flume::bounded::<Result<SocketAddr>>(1);
    let (routes_tx, routes_rx) = flume::bounded::<Arc<[String]>>(1);
    let (cmd_tx, cmd_rx) = flume::unbounded::<ShardCmd>();
    let name = format!("cv-shard-{}", spec.index);
    let thread = std::thread::Builder::new()
        .name(name.clone())
        .spawn(move || run::thread_main(spec, ready_tx, routes_rx, cmd_rx))
        .map_err(|e| WorkerError::new(WorkerErrorKind::Executor, format!("spawn {name}")).with_source(e))?;
    Ok(Starting { name, ready: ready_rx, cmds: cmd_tx, routes: routes_tx, thread })
}

impl Starting {
    /// What the shard answered, as a started shard or the reason it could not start (its
    /// thread then joined). `None`: it ended without answering.
    fn finish(self, answer: Option<Result<SocketAddr>>) -> Result<Started> {
        match answer {
            Some(Ok(addr)) => Ok(Started { addr, cmds: self.cmds, routes: self.routes, thread: self.thread }),
            Some(Err(e)) => {
                let _ = self.thread.join();
                Err(e)
            }
            None => {
                let why = match self.thread.join() {
                    Ok(Err(e)) => e.to_string(),
                    Ok(Ok(())) => "exited".to_string(),
                    Err(_) => "panicked".to_string(),
                };
                Err(WorkerError::new(WorkerErrorKind::ShardGone, format!("{} ended while starting: {why}", self.name)))
            }
        }
    }
}

/// Waits until every shard listens or says why it could not start, in the order given.
pub(crate) fn wait_all(starting: Vec<Starting>) -> Vec<Result<Started>> {
    starting
        .into_iter()
        .map(|s| {
            let answer = s.ready.recv().ok();
            s.finish(answer)
        })
        .collect()
}

/// `host:port`, with brackets around an IPv6 literal.
pub(crate) fn host_port(host: &str, port: u16) -> String {
    if host.contains(':') && !host.starts_with('[') { format!("[{host}]:{port}") } else { format!("{host}:{port}") }
}
