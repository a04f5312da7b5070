//! The worker's `/metrics`, gathered at scrape time: each shard answers a `Metrics` command
//! from its own thread (store tiers, QUIC connections, requests in flight, fills), and the
//! fetch pool's object-store counters are read directly. Runs on the tokio runtime that
//! serves the endpoint, like the rest of the control plane.

use std::sync::Arc;
use std::time::Duration;

use cv_net::metrics::{Gather, Labels, Scrape, labels};
use cv_net::quic_stats::QuicTotals;

use crate::shard::{ShardCmd, ShardMetrics};
use crate::store::TierStats;

/// A shard that does not answer this soon (busy with a long command) is left out of one
/// scrape rather than stalling it.
const SHARD_WAIT: Duration = Duration::from_secs(2);

/// The gatherer of a worker's metrics.
pub(crate) fn gatherer(shards: Vec<flume::Sender<ShardCmd>>, ufs: Option<Arc<cv_ufs::UfsStats>>) -> Gather {
    let shards = Arc::new(shards);
    Arc::new(move || {
        let (shards, ufs) = (shards.clone(), ufs.clone());
        Box::pin(async move { gather(&shards, ufs.as_deref()).await })
    })
}

async fn ask(shard: &flume::Sender<ShardCmd>) -> Option<ShardMetrics> {
    let (tx, rx) = flume::bounded(1);
    shard.send(ShardCmd::Metrics { reply: tx }).ok()?;
    tokio::time::timeout(SHARD_WAIT, rx.recv_async()).await.ok()?.ok()
}

async fn gather(shards: &[flume::Sender<ShardCmd>], ufs: Option<&cv_ufs::UfsStats>) -> Scrape {
    let mut all = Vec::with_capacity(shards.len());
    for s in shards {
        if let Some(m) = ask(s).await {
            all.push(m);
        }
    }
    let mut out = Scrape::new();
    tiers(&mut out, &all);
    let shard = |m: &ShardMetrics| labels(&[("shard", &m.shard.to_string())]);
    let per = |f: fn(&ShardMetrics) -> u64| all.iter().map(move |m| (shard(m), f(m))).collect::<Vec<_>>();
    out.gauges(
        "worker_shard_requests_in_flight",
        "Requests a shard is serving now (its queue depth)",
        per(|m| m.in_flight).into_iter().map(|(l, v)| (l, v as i64)),
    );
    out.gauges(
        "worker_shard_commands_queued",
        "Control-plane commands waiting for a shard",
        per(|m| m.commands_queued).into_iter().map(|(l, v)| (l, v as i64)),
    );
    out.counters("worker_fills", "Block fills started from object storage", per(|m| m.fills));
    out.counters(
        "worker_fill_joins",
        "Readers that joined a fill already under way (single flight)",
        per(|m| m.fill_joins),
    );
    out.gauges(
        "worker_fills_in_flight",
        "Block fills under way now",
        per(|m| m.fills_in_flight).into_iter().map(|(l, v)| (l, v as i64)),
    );
    out.gauges(
        "worker_disk_capacity_bytes",
        "Bytes of extent space in a shard's data files",
        all.iter().map(|m| (shard(m), m.usage.capacity_bytes as i64)),
    );
    out.gauges(
        "worker_disk_used_bytes",
        "Bytes of a shard's extents in use",
        all.iter().map(|m| (shard(m), m.usage.used_bytes as i64)),
    );
    out.gauges(
        "worker_pinned_bytes",
        "Bytes of pinned blocks (never evicted)",
        all.iter().map(|m| (shard(m), m.usage.pinned_bytes as i64)),
    );
    out.gauges("worker_blocks", "Committed blocks", all.iter().map(|m| (shard(m), m.usage.blocks as i64)));
    out.counters(
        "worker_corrupt_blocks",
        "Blocks dropped because a chunk failed its checksum",
        per(|m| m.stats.corrupt_blocks),
    );
    let mut quic = QuicTotals::default();
    for m in &all {
        quic.merge(&m.quic);
    }
    out.quic(&quic);
    if let Some(u) = ufs {
        let series = u.snapshot().into_iter().map(|s| (s.op, s.counts, s.errors, s.sum_us));
        out.requests_ms("ufs", "Object-store", "op", &cv_ufs::BOUNDS_MS, series);
    }
    out
}

/// `cv_worker_tier_*{tier, shard}`: the memory tier counts chunks, the disk tier block reads.
fn tiers(out: &mut Scrape, all: &[ShardMetrics]) {
    let series = |f: fn(&TierStats) -> u64| {
        let mut v: Vec<(Labels, u64)> = Vec::new();
        for m in all {
            let s = m.shard.to_string();
            v.push((labels(&[("tier", "memory"), ("shard", &s)]), f(&m.stats.memory)));
            v.push((labels(&[("tier", "disk"), ("shard", &s)]), f(&m.stats.disk)));
        }
        v
    };
    out.counters("worker_tier_hits", "Lookups a tier answered", series(|t| t.hits));
    out.counters("worker_tier_misses", "Lookups a tier could not answer", series(|t| t.misses));
    out.counters("worker_tier_evictions", "Entries a tier evicted to make room", series(|t| t.evictions));
    out.counters(
        "worker_tier_corrupt",
        "Entries a tier dropped because they failed their checksum",
        series(|t| t.corrupt),
    );
    let gauge = |f: fn(&TierStats) -> u64| series(f).into_iter().map(|(l, v)| (l, v as i64));
    out.gauges("worker_tier_bytes", "Bytes a tier holds now", gauge(|t| t.bytes_used));
    out.gauges("worker_tier_capacity_bytes", "Bytes a tier may hold", gauge(|t| t.capacity_bytes));
}
