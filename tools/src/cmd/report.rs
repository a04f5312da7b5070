//! `cvctl report`: workers, shards, capacity, use, tail-cache hit ratio,
//! and the export backlog of fs-mode mounts.

use super::CmdResult;
use crate::connect::{ClientArgs, runtime};
use clap::Args;
use cv_wire::msg::TierCounters;

/// Arguments of `cvctl report`.
#[derive(Args, Debug)]
pub struct ReportArgs {
    #[command(flatten)]
    conn: ClientArgs,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

impl ReportArgs {
    /// Runs it.
    pub fn run(self) -> CmdResult {
        runtime()?.block_on(async move {
            let r = self.conn.with_client(async |client| client.report().await).await??;
            let lookups = r.tail_hits + r.tail_misses;
            let hit_ratio = if lookups == 0 { 0.0 } else { r.tail_hits as f64 / lookups as f64 };
            if self.json {
                let workers: Vec<_> = r
                    .workers
                    .iter()
                    .map(|w| {
                        serde_json::json!({
                            "worker_id": w.worker_id, "host": w.host, "shard_ports": w.shard_ports,
                            "capacity": w.capacity, "used": w.used, "live": w.live,
                            "last_heartbeat_age_ms": w.last_heartbeat_age_ms,
                            "memory_tier": tier_json(&w.memory),
                            "disk_tier": tier_json(&w.disk),
                            "blocks": w.blocks, "only_copies": w.only_copies,
                            "only_copy_bytes": w.only_copy_bytes, "zone": w.zone, "draining": w.draining,
                            "replicas_owed": w.replicas_owed, "bytes_to_move": w.bytes_to_move,
                        })
                    })
                    .collect();
                let out = serde_json::json!({
                    "workers": workers, "inodes": r.inodes, "blocks": r.blocks,
                    "tail_cache": { "bytes": r.tail_bytes, "budget": r.tail_budget, "hits": r.tail_hits,
                                    "misses": r.tail_misses, "hit_ratio": hit_ratio },
                    "export": { "backlog_files": r.export_backlog, "backlog_bytes": r.export_backlog_bytes,
                                "lag_ms": r.export_lag_ms, "exported": r.exported,
                                "failures": r.export_failures },
                    "lost": { "files": r.lost_files, "blocks": r.lost_blocks, "paths": r.lost_paths },
                    "replicas": r.replicas,
                    "under_replicated": { "files": r.under_replicated_files, "blocks": r.under_replicated_blocks,
                                          "paths": r.under_replicated_paths },
                });
                println!("{out}");
                return Ok(());
            }
            println!("inodes {}  blocks {}", r.inodes, r.blocks);
            println!(
                "tail cache {} / {} bytes, hits {} misses {} (hit ratio {:.1}%)",
                r.tail_bytes,
                r.tail_budget,
                r.tail_hits,
                r.tail_misses,
                hit_ratio * 100.0
            );
            println!(
                "export backlog {} files, {} bytes, oldest waiting {} ms; exported {}, failed {}",
                r.export_backlog, r.export_backlog_bytes, r.export_lag_ms, r.exported, r.export_failures
            );
            if r.lost_files > 0 {
                println!(
                    "LOST: {} files ({} blocks) had their only copy on a lost worker; reading them fails with DataLoss:",
                    r.lost_files, r.lost_blocks
                );
                for p in &r.lost_paths {
                    println!("  {p}");
                }
                if r.lost_files > r.lost_paths.len() as u64 {
                    println!("  ... and {} more", r.lost_files - r.lost_paths.len() as u64);
                }
            }
            if r.under_replicated_files > 0 {
                println!(
                    "UNDER-REPLICATED: {} files ({} blocks) have fewer than {} copies of a cv-only block:",
                    r.under_replicated_files, r.under_replicated_blocks, r.replicas
                );
                for p in &r.under_replicated_paths {
                    println!("  {p}");
                }
                if r.under_replicated_files > r.under_replicated_paths.len() as u64 {
                    println!("  ... and {} more", r.under_replicated_files - r.under_replicated_paths.len() as u64);
                }
            } else {
                println!("replicas {}: every cv-only block has them", r.replicas);
            }
            println!(
                "{:>6} {:<22} {:<8} {:>6} {:>16} {:>16} {:>8} {:>10} {:>9} {:>9} {:>9} {:>9} {:>7} {:>14}",
                "id", "host", "zone", "shards", "capacity", "used", "live", "hb age ms", "mem hit", "disk hit",
                "blocks", "only copy", "owed", "to move bytes"
            );
            for w in &r.workers {
                let live = match (w.live, w.draining) {
                    (true, false) => "yes",
                    (true, true) => "draining",
                    (false, _) => "no",
                };
                println!(
                    "{:>6} {:<22} {:<8} {:>6} {:>16} {:>16} {:>8} {:>10} {:>8.1}% {:>8.1}% {:>9} {:>9} {:>7} {:>14}",
                    w.worker_id,
                    w.host,
                    if w.zone.is_empty() { "-" } else { &w.zone },
                    w.shard_ports.len(),
                    w.capacity,
                    w.used,
                    live,
                    w.last_heartbeat_age_ms,
                    ratio(&w.memory) * 100.0,
                    ratio(&w.disk) * 100.0,
                    w.blocks,
                    w.only_copies,
                    w.replicas_owed,
                    w.bytes_to_move
                );
            }
            Ok(())
        })
    }
}

/// Hits over lookups (0 when there were none).
fn ratio(t: &TierCounters) -> f64 {
    let lookups = t.hits + t.misses;
    if lookups == 0 { 0.0 } else { t.hits as f64 / lookups as f64 }
}

fn tier_json(t: &TierCounters) -> serde_json::Value {
    serde_json::json!({
        "hits": t.hits, "misses": t.misses, "hit_ratio": ratio(t), "evictions": t.evictions,
        "bytes_used": t.bytes_used, "capacity": t.capacity,
    })
}
