//! The master's `/metrics`, gathered at scrape time from what the core and the service already
//! count (the same numbers `cvctl report` shows), plus the open and journal-commit latency
//! histograms (plain atomics, `cv_master_core::latency`). Served by whoever runs the master
//! (`cvctl master`, `cvctl up`) through `cv_net::metrics`.

use super::service::MasterService;
use cv_master_core::latency::{BOUNDS_US, LatencySnapshot};
use cv_net::metrics::{Buckets, Gather, Scrape};
use std::sync::Arc;
use std::sync::atomic::Ordering;

/// Prometheus histogram buckets of a core latency snapshot, in seconds.
pub(super) fn seconds(s: &LatencySnapshot) -> Buckets {
    Buckets {
        bounds: BOUNDS_US.iter().map(|&us| us as f64 / 1e6).collect(),
        counts: s.counts.clone(),
        sum: s.sum_us as f64 / 1e6,
    }
}

/// Object-store requests of a process, as `cv_ufs_requests_total{op}`,
/// `cv_ufs_errors_total{op}` and the histogram `cv_ufs_request_seconds{op}`.
pub(super) fn ufs(scrape: &mut Scrape, stats: &cv_ufs::UfsStats) {
    let series = stats.snapshot().into_iter().map(|s| (s.op, s.counts, s.errors, s.sum_us));
    scrape.requests_ms("ufs", "Object-store", "op", &cv_ufs::BOUNDS_MS, series);
}

/// The gatherer of `service`'s metrics.
pub(super) fn gatherer(service: Arc<MasterService>) -> Gather {
    Arc::new(move || {
        let s = service.clone();
        Box::pin(async move { gather(&s).await })
    })
}

async fn gather(s: &MasterService) -> Scrape {
    let mut out = Scrape::new();
    let core = &s.core;

    let tails = core.tail_stats();
    let lookups = tails.hits + tails.misses;
    out.counter("master_tail_hits", "Opens answered with a tail from the tail cache", tails.hits);
    out.counter("master_tail_misses", "Opens whose tail was not in the tail cache", tails.misses);
    out.gauge_f64(
        "master_tail_hit_ratio",
        "Tail-cache hits over lookups since start (0 before any)",
        if lookups == 0 { 0.0 } else { tails.hits as f64 / lookups as f64 },
    );
    out.gauge("master_tail_bytes", "Bytes held by the tail cache", tails.bytes as i64);
    out.counter("master_tail_evictions", "Tails evicted from the tail cache", tails.evictions);
    out.histogram("master_open_seconds", "Latency of open requests at the master", seconds(&s.open_latency.snapshot()));

    let j = core.journal_stats();
    out.counter(
        "master_journal_batches",
        "Journal group commits (one write + sync each)",
        j.batches.load(Ordering::Relaxed),
    );
    out.counter("master_journal_records", "Records journaled", j.records.load(Ordering::Relaxed));
    out.counter("master_journal_bytes", "Bytes journaled", j.bytes.load(Ordering::Relaxed));
    out.counter("master_journal_snapshots", "Snapshots written", j.snapshots.load(Ordering::Relaxed));
    out.counter(
        "master_journal_no_space",
        "Journal batches, snapshots and journal restarts that ran out of space",
        j.no_space.load(Ordering::Relaxed),
    );
    out.gauge(
        "master_journal_full",
        "1 while the journal's disk is full: writes are refused (NoSpace), reads go on",
        i64::from(core.journal_full().is_some()),
    );
    out.histogram(
        "master_journal_commit_seconds",
        "Latency of one journal group commit (write + sync)",
        seconds(&j.commit.snapshot()),
    );

    let now = s.clock.now_ms();
    let backlog = core.export_backlog();
    out.gauge("master_export_backlog_files", "Files under fs-mode mounts waiting to be exported", backlog.len() as i64);
    out.gauge(
        "master_export_backlog_bytes",
        "Bytes in the files waiting to be exported",
        backlog.iter().map(|e| e.3).sum::<u64>() as i64,
    );
    out.gauge_f64(
        "master_export_lag_seconds",
        "How long the oldest file waiting to be exported has waited",
        backlog.first().map_or(0, |e| now.saturating_sub(e.4)) as f64 / 1e3,
    );
    out.counter("master_exported_files", "Files exported since start", s.exporter.exported.load(Ordering::Relaxed));
    out.counter(
        "master_export_failures",
        "Exports that failed since start",
        s.exporter.failures.load(Ordering::Relaxed),
    );
    out.counter(
        "master_ufs_stale_served",
        "Opens and listings answered from what cv held because the store failed or was slow to revalidate it",
        s.ufs.stale_served.load(Ordering::Relaxed),
    );
    out.counter(
        "master_tails_refused",
        "Tails sent with a completion that differed from the file's blocks, never kept",
        s.tail_checks.refused.load(Ordering::Relaxed),
    );

    // A pass over the block map, as `cvctl report` makes: off the reactor.
    let c = core.clone();
    let replicas = core.replica_target();
    if let Ok(sum) = tokio::task::spawn_blocking(move || c.inspect(|st| st.block_summary(replicas, 0))).await {
        out.gauge("master_lost_files", "Files with a block no live worker holds", sum.lost_files as i64);
        out.gauge("master_lost_blocks", "Blocks no live worker holds", sum.lost_blocks as i64);
        out.gauge(
            "master_under_replicated_files",
            "Files with a cv-only block short of copies",
            sum.under_replicated_files as i64,
        );
        out.gauge(
            "master_under_replicated_blocks",
            "cv-only blocks short of copies",
            sum.under_replicated_blocks as i64,
        );
    }
    let (live, total) = core.inspect(|st| {
        let w = &st.data().workers;
        (w.values().filter(|w| w.live).count(), w.len())
    });
    out.gauge("master_workers_live", "Workers whose heartbeats arrive", live as i64);
    out.gauge("master_workers", "Workers registered", total as i64);
    out.gauge("master_leading", "1 while this master leads (always, without Raft)", i64::from(core.is_leading()));

    ufs(&mut out, &s.ufs.stats);
    out.quic(&s.quic.totals());
    out
}
