//! `cvctl bench failover`: kill -9 one of three workers while readers loop over cache-mode and
//! cv-only files, on the multi-host rig (each process in its own network namespace, the object
//! store on the rig's bridge). Reports failed reads, wrong bytes, read latency before the kill,
//! in the failover window and after it, and how long after the kill every read is served
//! again; the cv-only files (two copies of each block) are read whole after the kill, and the
//! report must list nothing lost. The baseline is the same cluster before the kill.
//! `cvctl bench master-crash` kills the master during a put storm; `cvctl bench join` adds a
//! fourth worker and counts the cached blocks that move to it against the ideal quarter.
//!
//! Needs root (network namespaces) and the embedded object store (feature `embedded-s3`).
//! `tools/tests/cluster_failover.rs` runs it shortened in CI and asserts on its report.

use crate::open_latency::BenchError;
use crate::report::{Latency, print_latency_table};
use serde::Serialize;
use std::path::PathBuf;
use std::time::Duration;

// The scenario needs cv-testkit (the rig, the S3 server): with feature `embedded-s3` only.
#[cfg(feature = "embedded-s3")]
mod rig;
#[cfg(not(feature = "embedded-s3"))]
mod rig {
    use super::{BenchError, FailoverOptions, FailoverReport, MasterCrashOptions, MasterCrashReport};

    pub(super) fn run(_: &FailoverOptions) -> Result<FailoverReport, BenchError> {
        Err(crate::embedded_s3::MISSING.into())
    }

    pub(super) fn run_master_crash(_: &MasterCrashOptions) -> Result<MasterCrashReport, BenchError> {
        Err(crate::embedded_s3::MISSING.into())
    }

    pub(super) fn run_join(_: &super::JoinOptions) -> Result<super::JoinReport, BenchError> {
        Err(crate::embedded_s3::MISSING.into())
    }

    pub(super) fn run_fill(_: &super::FillOptions) -> Result<super::FillReport, BenchError> {
        Err(crate::embedded_s3::MISSING.into())
    }
}

/// Three workers filled past their capacity with cv-only files (two copies of each block).
#[derive(Clone, Debug)]
pub struct FillOptions {
    /// The `cvctl` binary that runs the master and the workers.
    pub cvctl: PathBuf,
    /// Each worker's capacity.
    pub capacity: u64,
    /// Bytes per file.
    pub file_len: usize,
    /// Stop after this many refusals in a row.
    pub refusals: usize,
}

impl FillOptions {
    /// The run: 64 MiB workers, 5 MiB files.
    pub fn new(cvctl: impl Into<PathBuf>) -> Self {
        FillOptions { cvctl: cvctl.into(), capacity: 64 << 20, file_len: 5 << 20, refusals: 3 }
    }
}

/// What filling did.
#[derive(Clone, Debug, Serialize)]
pub struct FillReport {
    /// Puts that returned success.
    pub acknowledged: usize,
    /// Of those, files that did not read back whole and right at the end (goal: none).
    pub lost: usize,
    /// Puts refused with `NoSpace`.
    pub no_space: usize,
    /// Puts that failed otherwise.
    pub other_failures: usize,
    /// The first refusal's message.
    pub first_refusal: Option<String>,
    /// The first other failure's message.
    pub first_other: Option<String>,
    /// Files left half-written (listed but not complete) after the refusals.
    pub leftovers: usize,
    /// Bytes acknowledged, and the workers' capacity in all.
    pub bytes_acknowledged: u64,
    pub capacity_total: u64,
}

/// Runs the fill scenario on a rig it creates and removes.
pub fn run_fill(opts: &FillOptions) -> Result<FillReport, BenchError> {
    crate::embedded_s3::require()?;
    rig::run_fill(opts)
}

/// Prints the fill report.
pub fn print_fill(r: &FillReport, json: bool) {
    if json {
        println!("{}", serde_json::to_string_pretty(r).unwrap_or_default());
        return;
    }
    println!("3 workers filled past capacity with cv-only files, 2 copies each (same run)");
    println!(
        "acknowledged             {} files, {} bytes; their 2 copies fill {:.0}% of the {} bytes of disk",
        r.acknowledged,
        r.bytes_acknowledged,
        200.0 * r.bytes_acknowledged as f64 / r.capacity_total.max(1) as f64,
        r.capacity_total
    );
    println!("acknowledged lost        {}", r.lost);
    println!(
        "refused with NoSpace     {}{}",
        r.no_space,
        r.first_refusal.as_deref().map(|e| format!(" (first: {e})")).unwrap_or_default()
    );
    println!(
        "other failures           {}{}",
        r.other_failures,
        r.first_other.as_deref().map(|e| format!(" (first: {e})")).unwrap_or_default()
    );
    println!("half-written leftovers   {}", r.leftovers);
}

/// A fourth worker joins three that hold a cache-mode mount's blocks.
#[derive(Clone, Debug)]
pub struct JoinOptions {
    /// The `cvctl` binary that runs the master and the workers.
    pub cvctl: PathBuf,
    /// Objects in the cache-mode mount.
    pub files: usize,
    /// Bytes per object.
    pub file_len: usize,
    /// The master's block size (small, so that the files have many blocks).
    pub block_size: u64,
}

impl JoinOptions {
    /// The run: 1024 blocks of 64 KiB over 8 objects.
    pub fn new(cvctl: impl Into<PathBuf>) -> Self {
        JoinOptions { cvctl: cvctl.into(), files: 8, file_len: 8 << 20, block_size: 64 << 10 }
    }
}

/// What joining moved.
#[derive(Clone, Debug, Serialize)]
pub struct JoinReport {
    /// Blocks of the cache-mode files, all read (cached) before the join.
    pub blocks: usize,
    /// Blocks whose owner in the open reply changed with the join.
    pub moved: usize,
    /// Of those, moved to the new worker (consistent hashing moves none elsewhere).
    pub moved_to_new: usize,
    /// The ideal: a quarter of the blocks.
    pub ideal: f64,
    /// Whole-file reads after the join that returned the objects' bytes.
    pub read_right: usize,
    /// Blocks the new worker reports holding after those reads.
    pub new_worker_blocks: u64,
    /// Store GETs the reads after the join made (the moved blocks filled on the new worker).
    pub store_gets_after_join: usize,
}

/// Runs the join scenario on a rig it creates and removes.
pub fn run_join(opts: &JoinOptions) -> Result<JoinReport, BenchError> {
    crate::embedded_s3::require()?;
    rig::run_join(opts)
}

/// Prints the join report.
pub fn print_join(r: &JoinReport, json: bool) {
    if json {
        println!("{}", serde_json::to_string_pretty(r).unwrap_or_default());
        return;
    }
    println!("a 4th worker joins 3 (same run)");
    println!("cached blocks            {}", r.blocks);
    println!(
        "moved                    {} ({} to the new worker); ideal quarter {:.0}; ratio {:.2}",
        r.moved,
        r.moved_to_new,
        r.ideal,
        r.moved as f64 / r.ideal.max(1.0)
    );
    println!(
        "reads after the join     {} whole files right; {} store GETs (fills on the new worker)",
        r.read_right, r.store_gets_after_join
    );
    println!("new worker holds         {} blocks", r.new_worker_blocks);
}

/// Runs the scenario on a rig it creates and removes.
pub fn run(opts: &FailoverOptions) -> Result<FailoverReport, BenchError> {
    crate::embedded_s3::require()?;
    rig::run(opts)
}

/// Runs the master-crash scenario on a rig it creates and removes.
pub fn run_master_crash(opts: &MasterCrashOptions) -> Result<MasterCrashReport, BenchError> {
    crate::embedded_s3::require()?;
    rig::run_master_crash(opts)
}

/// kill -9 of the master during a put storm.
#[derive(Clone, Debug)]
pub struct MasterCrashOptions {
    /// The `cvctl` binary that runs the master and the workers.
    pub cvctl: PathBuf,
    /// Concurrent writers, each putting files one after another.
    pub writers: usize,
    /// Bytes per file.
    pub file_len: usize,
    /// Pause between one writer's puts (the storm should not just fill the workers' disks).
    pub pause: Duration,
    /// Writing before the kill.
    pub before: Duration,
    /// How long the master is down.
    pub down: Duration,
    /// Writing after the master is back.
    pub after: Duration,
    /// The master's write lease (half-written files of writers that gave up are removed after it).
    pub write_lease: Duration,
    /// Masters: 1, or a Raft group of 3 or 5 (master/HA.md), whose leader is the one killed.
    pub masters: usize,
}

impl MasterCrashOptions {
    /// The run: 4 writers, the master down for 3 s.
    pub fn new(cvctl: impl Into<PathBuf>) -> Self {
        MasterCrashOptions {
            cvctl: cvctl.into(),
            writers: 4,
            file_len: (1 << 20) + 777,
            pause: Duration::from_millis(20),
            before: Duration::from_secs(5),
            down: Duration::from_secs(3),
            after: Duration::from_secs(10),
            write_lease: Duration::from_secs(5),
            masters: 1,
        }
    }
}

/// What a put storm across a master crash left.
#[derive(Clone, Debug, Serialize)]
pub struct MasterCrashReport {
    /// Puts that returned success.
    pub acknowledged: u64,
    /// Acknowledged puts whose file did not read back byte for byte (the goal is none).
    pub acknowledged_lost: u64,
    /// Puts that returned an error.
    pub failed: u64,
    /// Of those, puts that failed more than 1 s after the master was serving again.
    pub failed_after_back: u64,
    /// The first failed put's error.
    pub first_error: Option<String>,
    /// From the restart until the master answered.
    pub master_back_ms: f64,
    /// From the master answering until every worker was live in its report.
    pub workers_back_ms: Option<f64>,
    /// Unfinished entries right after the storm (writers that gave up while the master was
    /// unreachable cannot remove theirs).
    pub unfinished_after_storm: u64,
    /// Unfinished entries once the write lease has passed (the goal is none).
    pub unfinished_after_lease: u64,
    /// Put latency before the kill and across it.
    pub latency: Vec<Latency>,
    /// Masters in the run (a Raft group's leader was the one killed).
    pub masters: usize,
    /// From the kill to the end of the first acknowledged put that started after it.
    pub first_ack_after_kill_ms: Option<f64>,
}

/// Prints the master-crash report (or JSON).
pub fn print_master_crash(r: &MasterCrashReport, json: bool) {
    if json {
        println!("{}", serde_json::to_string_pretty(r).unwrap_or_default());
        return;
    }
    let who = if r.masters > 1 { format!("the leader of {} masters", r.masters) } else { "the master".into() };
    print_latency_table(&format!("put latency, kill -9 of {who} during a put storm (same run)"), &r.latency);
    match r.first_ack_after_kill_ms {
        Some(ms) => println!("first put acknowledged after {ms:.0} ms from the kill (started after it)"),
        None => println!("first put acknowledged after (none started after the kill succeeded)"),
    }
    println!("acknowledged puts            {}", r.acknowledged);
    println!("acknowledged and lost        {}", r.acknowledged_lost);
    println!("failed puts                  {}", r.failed);
    println!("failed >1 s after master back {}", r.failed_after_back);
    println!("master answering after       {:.0} ms", r.master_back_ms);
    match r.workers_back_ms {
        Some(ms) => println!("every worker live after      {ms:.0} ms more"),
        None => println!("every worker live after      (not within the run)"),
    }
    println!(
        "unfinished entries after the storm {} , after the write lease {}",
        r.unfinished_after_storm, r.unfinished_after_lease
    );
    if let Some(e) = &r.first_error {
        println!("first failed put             {e}");
    }
}

/// What to run.
#[derive(Clone, Debug)]
pub struct FailoverOptions {
    /// The `cvctl` binary that runs the master and the workers.
    pub cvctl: PathBuf,
    /// Concurrent readers; half keep their files open across the kill, half open per read.
    pub readers: usize,
    /// Objects in the cache-mode mount.
    pub files: usize,
    /// Bytes per object (a few 4 MiB blocks each).
    pub file_len: usize,
    /// Bytes per read.
    pub read_len: usize,
    /// Reading before the kill (the baseline).
    pub before: Duration,
    /// Reading after the kill.
    pub after: Duration,
    /// The master's heartbeat timeout: failover must not wait for it.
    pub heartbeat_timeout: Duration,
}

impl FailoverOptions {
    /// The run: 4 readers, 60 s in all.
    pub fn new(cvctl: impl Into<PathBuf>) -> Self {
        FailoverOptions {
            cvctl: cvctl.into(),
            readers: 4,
            files: 8,
            file_len: (12 << 20) + 4321,
            read_len: 256 << 10,
            before: Duration::from_secs(20),
            after: Duration::from_secs(40),
            heartbeat_timeout: Duration::from_secs(10),
        }
    }
}

/// What happened.
#[derive(Clone, Debug, Serialize)]
pub struct FailoverReport {
    /// Reads that returned an error (cache-mode and cv-only files: the goal is none).
    pub failed: u64,
    /// Reads that returned bytes other than the object's.
    pub wrong: u64,
    /// The first failed read's error.
    pub first_error: Option<String>,
    /// Blocks of the cache-mode files the killed worker owned.
    pub victim_blocks: usize,
    /// From the kill until no read fails or waits on the dead worker any more: the end of the
    /// last read after the kill that failed or took longer than 10x the baseline p99 and 0.5 s
    /// (a read waiting out the dead worker takes the 1.5 s idle timeout; a cache miss on the
    /// block's new owner, a fill from the store, takes tens of ms and is counted apart).
    pub recovered_after_ms: f64,
    /// Reads after the kill slower than 10x the baseline p99 (at least 50 ms) that did not
    /// wait on the dead worker: cache misses on the blocks' new owners.
    pub cold_after_kill: u64,
    /// The slowest read that started after the kill.
    pub slowest_after_kill_ms: f64,
    /// From the kill until the master reported the worker not live.
    pub master_noticed_ms: Option<f64>,
    /// Blocks of the cv-only files (2 copies each) with a copy on the killed worker.
    pub cv_only_victim_blocks: usize,
    /// Whole-file reads of the cv-only files after the kill that returned their bytes.
    pub cv_only_read_right: u64,
    /// The first whole-file read of a cv-only file after the kill that failed.
    pub cv_only_error: Option<String>,
    /// Files the report lists as lost after the kill (goal: none).
    pub lost_files: u64,
    /// Files the report counts short of copies after the kill (until the grace period ends).
    pub under_replicated_files: u64,
    /// Blocks whose only copy was on the killed worker, as the report counts them (goal: none).
    pub victim_only_copies: u64,
    /// With the master killed too: whole-file reads of the cache-mode files through block maps
    /// from before both kills, that returned the right bytes.
    pub without_master_ok: u64,
    /// ... and that failed.
    pub without_master_failed: u64,
    /// The first of those failures.
    pub without_master_error: Option<String>,
    /// Latency before the kill, in the failover window, after it.
    pub latency: Vec<Latency>,
}

/// Prints the report as a table (or JSON).
pub fn print(r: &FailoverReport, json: bool) {
    if json {
        println!("{}", serde_json::to_string_pretty(r).unwrap_or_default());
        return;
    }
    print_latency_table("read latency, kill -9 of one worker of three (same run)", &r.latency);
    println!("failed reads             {}", r.failed);
    println!("wrong bytes (reads)      {}", r.wrong);
    println!("killed worker's blocks   {}", r.victim_blocks);
    println!("served again after       {:.0} ms (no read failing or waiting on the dead worker)", r.recovered_after_ms);
    println!(
        "cache misses after kill  {} reads slower than 10x the baseline p99 (fills on new owners)",
        r.cold_after_kill
    );
    println!("slowest read after kill  {:.0} ms", r.slowest_after_kill_ms);
    match r.master_noticed_ms {
        Some(ms) => println!("master noticed after     {ms:.0} ms"),
        None => println!("master noticed after     (not within the run)"),
    }
    if let Some(e) = &r.first_error {
        println!("first failed read        {e}");
    }
    println!(
        "cv-only files            {} blocks had a copy on it; {} whole-file reads right after the kill{}",
        r.cv_only_victim_blocks,
        r.cv_only_read_right,
        r.cv_only_error.as_deref().map(|e| format!(" (failed: {e})")).unwrap_or_default()
    );
    println!(
        "report after the kill    {} files lost, {} under-replicated, {} only copies on the dead worker",
        r.lost_files, r.under_replicated_files, r.victim_only_copies
    );
    println!(
        "master killed too        {} whole-file reads right, {} failed{}",
        r.without_master_ok,
        r.without_master_failed,
        r.without_master_error.as_deref().map(|e| format!(" (first: {e})")).unwrap_or_default()
    );
}
