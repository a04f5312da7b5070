//! The life of one shard thread: executor, store, endpoint, command loop, orderly shutdown.

use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use cv_wire::Limits;

use super::conn::{ShardCtx, accept_loop};
use super::fill::Fills;
use super::{ShardCmd, ShardMetrics, ShardReport};
use crate::error::{Result, WorkerError, WorkerErrorKind};
use crate::fetch::Fetcher;
use crate::local::LocalServe;
use crate::store::BlockStore;
use crate::store::StoreConfig;
use cv_net::quic_stats::QuicTotals;
use cv_rt::quic::{Endpoint, EndpointOptions, ServerConfig, VarInt};
use cv_rt::{Gate, Runtime, RuntimeConfig};

/// In-flight requests get this long to finish once shutdown starts.
const DRAIN: Duration = Duration::from_secs(10);

/// Everything a shard thread needs, built by the server before spawning it.
#[derive(Debug)]
pub(crate) struct ShardSpec {
    pub(crate) index: u16,
    /// CPU to pin to; `None` leaves the thread unbound.
    pub(crate) cpu: Option<usize>,
    pub(crate) store: StoreConfig,
    pub(crate) bind: SocketAddr,
    pub(crate) server_config: Arc<ServerConfig>,
    pub(crate) endpoint: EndpointOptions,
    pub(crate) ring_depth: u32,
    /// Zero: park as soon as there is nothing to run.
    pub(crate) spin_before_park: Duration,
    pub(crate) node: String,
    pub(crate) limits: Limits,
    /// The object-store fetch pool (none without a master to resolve mounts).
    pub(crate) ufs: Option<Fetcher>,
    /// Short-circuit reads, when served.
    pub(crate) local: Option<Arc<LocalServe>>,
    /// Asks the control thread for a heartbeat now (space freed or lacking).
    pub(crate) report_soon: flume::Sender<()>,
    /// The master's capability keys.
    pub(crate) keys: crate::Keys,
    /// Connections one client or admin certificate may hold at this shard.
    pub(crate) per_identity: usize,
    /// Where block requests are recorded, when `[worker] trace` is on.
    pub(crate) trace: Option<crate::trace::TraceSink>,
}

pub(crate) fn thread_main(
    spec: ShardSpec,
    ready: flume::Sender<Result<SocketAddr>>,
    routes: flume::Receiver<Arc<[String]>>,
    cmds: flume::Receiver<ShardCmd>,
) -> Result<()> {
    let cfg = RuntimeConfig { cpu: spec.cpu, ring_entries: spec.ring_depth, spin_before_park: spec.spin_before_park };
    match Runtime::new(cfg) {
        Ok(rt) => rt.block_on(shard_main(spec, ready, routes, cmds)),
        Err(e) => {
            let msg = format!("shard {}: runtime (io_uring) on cpu {:?}: {e}", spec.index, spec.cpu);
            let _ = ready.send(Err(WorkerError::new(WorkerErrorKind::Executor, msg)));
            Ok(())
        }
    }
}

async fn shard_main(
    spec: ShardSpec,
    ready: flume::Sender<Result<SocketAddr>>,
    routes: flume::Receiver<Arc<[String]>>,
    cmds: flume::Receiver<ShardCmd>,
) -> Result<()> {
    let index = spec.index;
    let store = match BlockStore::open(spec.store.clone()).await {
        Ok(s) => s,
        Err(e) => {
            let err = WorkerError::new(WorkerErrorKind::Store, format!("shard {index}: open store")).with_source(e);
            let _ = ready.send(Err(err));
            return Ok(());
        }
    };
    let ep = match Endpoint::bind(spec.bind, spec.server_config.clone(), spec.endpoint.clone()) {
        Ok(ep) => ep,
        Err(e) => {
            let err =
                WorkerError::new(WorkerErrorKind::Bind, format!("shard {index}: bind {}", spec.bind)).with_source(e);
            let _ = ready.send(Err(err));
            return close_store(index, store).await;
        }
    };
    let gate = Gate::new();
    let mut ctx = None;
    if ready.send(Ok(ep.local_addr())).is_ok()
        && let Ok(routes) = routes.recv_async().await
    {
        tracing::info!(shard = index, addr = %ep.local_addr(), "shard serving");
        if let Some(local) = spec.local.clone() {
            store.on_revoke(move |block_id| local.revoke(index, block_id));
        }
        let c = Rc::new(ShardCtx {
            index,
            port: ep.local_addr().port(),
            store: store.clone(),
            routes,
            node: spec.node,
            limits: spec.limits,
            gate: gate.clone(),
            fills: Rc::new(Fills::new(store.clone(), spec.ufs)),
            local: spec.local,
            counters: Default::default(),
            report_soon: spec.report_soon,
            keys: spec.keys,
            peers: super::peers::ShardPeers::new(Default::default(), spec.per_identity),
            trace: spec.trace,
        });
        if let Ok(task) = gate.spawn(accept_loop(ep.clone(), c.clone())) {
            task.detach();
        }
        command_loop(&c, &cmds, &ep).await;
        ctx = Some(c);
    }
    ep.close(VarInt::from_u32(0), b"worker shutting down");
    if cv_rt::timeout(DRAIN, gate.close()).await.is_err() {
        tracing::warn!(shard = index, "requests still running after {DRAIN:?}; closing anyway");
    }
    let _ = cv_rt::timeout(DRAIN, ep.wait_idle()).await;
    drop(ctx);
    close_store(index, store).await
}

/// Serves control-plane messages until `Shutdown` or until every sender is gone.
async fn command_loop(ctx: &ShardCtx, cmds: &flume::Receiver<ShardCmd>, ep: &Endpoint) {
    while let Ok(cmd) = cmds.recv_async().await {
        match cmd {
            ShardCmd::Report { full, reply } => {
                let _ = reply.send(report(ctx, full));
            }
            ShardCmd::Delete(ids) => {
                let mut freed = false;
                for id in ids {
                    match ctx.store.delete(id).await {
                        Ok(deleted) => freed |= deleted,
                        Err(e) => {
                            tracing::warn!(shard = ctx.index, block = id, error = %e, "delete from master failed")
                        }
                    }
                }
                if freed {
                    ctx.space_changed();
                }
            }
            ShardCmd::Revoked(list) => {
                let closed = ctx.peers.update(list);
                if closed > 0 {
                    tracing::warn!(shard = ctx.index, closed, "closed the connections of revoked certificates");
                }
            }
            ShardCmd::Unpin(ids) => {
                for id in ids {
                    // A block already gone (evicted, deleted) needs no unpinning.
                    if let Err(e) = ctx.store.set_pinned(id, false).await
                        && e.kind() != crate::store::ErrorKind::NotFound
                    {
                        tracing::warn!(shard = ctx.index, block = id, error = %e, "unpin failed");
                    }
                }
            }
            ShardCmd::Metrics { reply } => {
                let (fills, fill_joins, fills_in_flight) = ctx.fills.counts();
                let _ = reply.send(ShardMetrics {
                    shard: ctx.index,
                    stats: ctx.store.stats(),
                    usage: ctx.store.usage(),
                    quic: QuicTotals { retries_total: ep.retries_sent(), ..ctx.counters.quic() },
                    in_flight: ctx.counters.in_flight(),
                    commands_queued: cmds.len() as u64,
                    fills,
                    fill_joins,
                    fills_in_flight,
                });
            }
            ShardCmd::Shutdown => return,
        }
    }
}

fn report(ctx: &ShardCtx, full: bool) -> ShardReport {
    let store = &ctx.store;
    let deltas = store.drain_report();
    let ids = if full { store.block_ids() } else { deltas.added };
    // A block gone between the drain and the stat shows up as removed in the next drain.
    let added = ids.into_iter().filter_map(|id| store.lookup(id).ok().map(|b| (id, b.len()))).collect();
    ShardReport { shard: ctx.index, added, removed: deltas.removed, usage: store.usage(), stats: store.stats() }
}

async fn close_store(index: u16, store: BlockStore) -> Result<()> {
    store
        .close()
        .await
        .map_err(|e| WorkerError::new(WorkerErrorKind::Store, format!("shard {index}: close store")).with_source(e))
}
