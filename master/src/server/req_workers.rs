//! Worker registration and heartbeats (worker role only), and the cluster report.

use super::errors::Fail;
use super::request::Req;
use super::service::MasterService;
use cv_master_core::error::ErrorKind;
use cv_net::rpc::{Peer, Reply};
use cv_wire::ErrorCode;
use cv_wire::msg::{
    CopyOrder, Done, DrainWorker, Heartbeat, HeartbeatOk, RegisterOk, RegisterWorker, ReportOk, WorkerCommand,
    WorkerInfo,
};

pub(super) async fn register(s: &MasterService, peer: &Peer, q: Req<'_, RegisterWorker>) -> Result<Reply, Fail> {
    let req = q.owned()?;
    if req.shard_ports.is_empty() || req.shard_ports.len() > usize::from(u16::MAX) {
        return Err(Fail::new(ErrorCode::InvalidArgument, "a worker needs 1 to 65535 shard ports"));
    }
    let host = resolve_host(&req.host).await?.to_string();
    let worker_id = s
        .core
        .begin_register_worker(req.worker_id, &host, req.shard_ports, req.capacity, &req.zone)?
        .wait_async()
        .await?;
    s.worker_conns.lock().unwrap_or_else(|p| p.into_inner()).insert(worker_id, peer.conn);
    let heartbeat_ms = u64::try_from(s.heartbeat_every.as_millis()).unwrap_or(u64::MAX);
    let keys = s.cap_keys(None).unwrap_or_default();
    Ok(q.reply(&RegisterOk { worker_id, heartbeat_ms, keys }))
}

/// The IP address a worker's advertised host names, found once here so that every block
/// location after it is a typed address that readers dial without resolving anything.
async fn resolve_host(host: &str) -> Result<std::net::IpAddr, Fail> {
    if let Ok(ip) = host.parse() {
        return Ok(ip);
    }
    let refused = |why: String| Fail::new(ErrorCode::InvalidArgument, format!("worker host `{host}`: {why}"));
    let mut addrs = tokio::net::lookup_host((host, 0)).await.map_err(|e| refused(format!("does not resolve: {e}")))?;
    addrs.next().map(|a| a.ip()).ok_or_else(|| refused("resolves to no address".into()))
}

pub(super) async fn heartbeat(s: &MasterService, peer: &Peer, q: Req<'_, Heartbeat>) -> Result<Reply, Fail> {
    let req = q.owned()?;
    // The connection a worker heartbeats on is the one whose close loses it (it may be a
    // new one after a reconnect that found its registration still known).
    s.worker_conns.lock().unwrap_or_else(|p| p.into_inner()).insert(req.worker_id, peer.conn);
    s.tiers.lock().unwrap_or_else(|p| p.into_inner()).insert(req.worker_id, (req.memory, req.disk));
    let added = req.added.iter().map(|b| b.block_id).collect();
    let pending = s.core.begin_heartbeat_full(req.worker_id, req.capacity, req.used, added, req.removed, req.full);
    let commands = match pending {
        Ok(pending) => {
            let reply = pending.wait_async().await?;
            let mut commands = Vec::new();
            if !reply.delete_blocks.is_empty() {
                commands.push(WorkerCommand::DeleteBlocks(reply.delete_blocks));
            }
            if !reply.unpin_blocks.is_empty() {
                commands.push(WorkerCommand::Unpin(reply.unpin_blocks));
            }
            if !reply.copy.is_empty() {
                let orders = reply.copy.into_iter().map(|o| CopyOrder {
                    block_id: o.block_id,
                    len: o.len,
                    from_worker: o.from_worker,
                    from: cv_wire::msg::ShardAddr::new(o.from),
                });
                commands.push(WorkerCommand::Copy(orders.collect()));
            }
            commands
        }
        // E.g. after a restart on an empty journal: the worker must introduce itself again.
        Err(e) if e.kind() == ErrorKind::UnknownWorker => vec![WorkerCommand::Reregister],
        Err(e) => return Err(e.into()),
    };
    // The worker lacks this master's capability keys (another master led when it was handed
    // keys last, or they rotated). One asked to register again gets them with its registration.
    let mut commands = commands;
    if !commands.contains(&WorkerCommand::Reregister)
        && let Some(keys) = s.cap_keys(Some(req.cap_keys))
    {
        commands.push(WorkerCommand::CapabilityKeys(keys));
    }
    Ok(q.reply(&HeartbeatOk { commands }))
}

/// The cluster's report. An admin's certificate gets all of it; any other gets the workers and
/// the counts (what the FUSE mount's `df` and Hadoop's `getStatus` read), without the per-block
/// summary, which walks every block and names lost and under-replicated paths.
pub(super) async fn report(s: &MasterService, peer: &Peer, q: Req<'_, cv_wire::msg::Report>) -> Result<Reply, Fail> {
    let admin = peer.cert.role.is_admin();
    // No copy of the namespace: the workers, two counts and, for an admin, the block summary
    // (off the reactor: it walks every block).
    let core = s.core.clone();
    let replicas = s.core.replica_target();
    let (workers_now, inodes, block_count, blocks) = tokio::task::spawn_blocking(move || {
        core.inspect(|st| {
            let d = st.data();
            let workers: Vec<_> = d.workers.values().cloned().collect();
            let summary = if admin { st.block_summary(replicas, 100) } else { Default::default() };
            (workers, d.inodes.len() as u64, d.blocks.len() as u64, summary)
        })
    })
    .await
    .map_err(|e| Fail::new(ErrorCode::Internal, format!("report task: {e}")))?;
    let now = s.clock.now_ms();
    let tails = s.core.tail_stats();
    let backlog = s.core.export_backlog();
    let tiers = s.tiers.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let workers = workers_now
        .iter()
        .map(|w| WorkerInfo {
            worker_id: w.id,
            host: w.host.clone(),
            shard_ports: w.shard_ports.clone(),
            capacity: w.capacity,
            used: w.used,
            live: w.live,
            last_heartbeat_age_ms: now.saturating_sub(w.last_heartbeat),
            memory: tiers.get(&w.id).map(|t| t.0).unwrap_or_default(),
            disk: tiers.get(&w.id).map(|t| t.1).unwrap_or_default(),
            blocks: blocks.per_worker.get(&w.id).map_or(0, |b| b.blocks),
            only_copies: blocks.per_worker.get(&w.id).map_or(0, |b| b.only_copies),
            only_copy_bytes: blocks.per_worker.get(&w.id).map_or(0, |b| b.only_copy_bytes),
            zone: w.zone.clone(),
            draining: w.draining,
            replicas_owed: blocks.per_worker.get(&w.id).map_or(0, |b| b.replicas_owed),
            bytes_to_move: blocks.per_worker.get(&w.id).map_or(0, |b| b.bytes_to_move),
        })
        .collect();
    let ok = ReportOk {
        workers,
        inodes,
        blocks: block_count,
        tail_bytes: tails.bytes,
        tail_budget: s.core.config().tail_budget_bytes,
        tail_hits: tails.hits,
        tail_misses: tails.misses,
        export_backlog: backlog.len() as u64,
        export_backlog_bytes: backlog.iter().map(|e| e.3).sum(),
        export_lag_ms: backlog.first().map_or(0, |e| now.saturating_sub(e.4)),
        exported: s.exporter.exported.load(std::sync::atomic::Ordering::Relaxed),
        export_failures: s.exporter.failures.load(std::sync::atomic::Ordering::Relaxed),
        lost_files: blocks.lost_files,
        lost_blocks: blocks.lost_blocks,
        lost_paths: blocks.lost_paths,
        replicas: u32::try_from(replicas).unwrap_or(u32::MAX),
        under_replicated_files: blocks.under_replicated_files,
        under_replicated_blocks: blocks.under_replicated_blocks,
        under_replicated_paths: blocks.under_replicated_paths,
    };
    Ok(q.reply(&ok))
}

/// Starts or ends draining a worker (operators: `cvctl worker drain`).
pub(super) async fn drain(s: &MasterService, q: Req<'_, DrainWorker>) -> Result<Reply, Fail> {
    let req = q.owned()?;
    s.core.begin_drain(req.worker_id, req.drain)?.wait_async().await?;
    tracing::info!(worker = req.worker_id, drain = req.drain, "drain");
    Ok(q.reply(&Done {}))
}
