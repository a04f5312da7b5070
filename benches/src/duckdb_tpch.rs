//! DuckDB TPC-H (DuckDB from PyPI, the 22 queries over Parquet) on local disk and through cv's
//! FUSE mount of a cache-mode S3 mount behind an added round trip, warm and with the kernel's
//! page cache dropped before every query: issue 23's measure. The engine side is
//! `benches/tpch/duckdb_tpch.py`; `tpch.rs` lays the lake out.
//!
//! The mount is a real `cvctl fuse` process beside this one (which runs the cluster, the store
//! and the proxy), so cv's CPU is read from both processes' /proc stat around each phase.
//! Phases: one untimed pass over the mount fills cv's cache from the store; then warm (one
//! DuckDB process takes turns, pass by pass, between local disk and the mount after an untimed
//! pass of each) and page-cache-cold (the same, every query after `drop_caches`). Every answer
//! must be equal on both locations and in both phases.

use crate::open_latency::BenchError;
use crate::tpch::{Lake, medians, query_order, read_report, run};
use cv_client::Client;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// Goal with the page cache dropped: within this much of local disk.
pub const COLD_GOAL: f64 = 1.25;
/// Goal: cv's CPU (cluster + FUSE process) per page-cache-cold pass, seconds.
pub const CPU_GOAL: f64 = 1.0;

/// Where the engine and cv's pieces are.
#[derive(Clone, Debug)]
pub struct Tools {
    /// Python with duckdb and duckdb-extension-tpch.
    pub python: PathBuf,
    /// `benches/tpch`.
    pub runner_dir: PathBuf,
    /// cvctl, for the `cvctl fuse` process.
    pub cvctl: PathBuf,
}

/// How to run it.
#[derive(Clone, Debug)]
pub struct DuckdbTpchConfig {
    /// TPC-H scale factor.
    pub sf: f64,
    /// Timed warm passes (each location).
    pub passes: u32,
    /// Timed page-cache-cold passes (each location); 0 skips them.
    pub cold_passes: u32,
    /// Round trip added in front of the store.
    pub rtt: Duration,
    /// Queries, e.g. "1,6" (empty: all 22).
    pub queries: String,
    /// DuckDB's threads.
    pub threads: u32,
    /// Work directory: `source/` (the tables), `s3/`, `mnt/`, the runner's JSON.
    pub dir: PathBuf,
    /// The cv path of the mount.
    pub mount: String,
    /// Threads of the `cvctl fuse` process's runtime.
    pub fuse_threads: usize,
    /// Mount read-only (`cvctl fuse --read-only`).
    pub fuse_read_only: bool,
    /// The read-only mount's `--open-ttl` (zero: off).
    pub fuse_open_ttl: Duration,
    /// Also run over the floor (`fuse_floor.rs`: a bare FUSE file system over the local tables).
    pub fuse_floor: bool,
}

/// One query's medians, seconds.
#[derive(Clone, Debug, Serialize)]
pub struct QueryRow {
    /// "q1" … "q22".
    pub query: String,
    /// Local disk, warm.
    pub local_warm: f64,
    /// cv over FUSE, warm.
    pub cv_warm: f64,
    /// Local disk, page cache dropped.
    pub local_cold: Option<f64>,
    /// cv over FUSE, page cache dropped.
    pub cv_cold: Option<f64>,
    /// The floor, page cache dropped (`--fuse-floor`).
    pub floor_cold: Option<f64>,
}

/// cv's CPU per pass over the mount, seconds.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct CpuPerPass {
    /// This process: master, worker, the store and the proxy (idle once the cache is full).
    pub cluster: f64,
    /// The `cvctl fuse` process.
    pub fuse: f64,
    /// The floor's process (`--fuse-floor`), beside cv's.
    pub floor: Option<f64>,
}

/// Bytes moved per page-cache-cold pass: what DuckDB asked for and what came off the device.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct IoPerPass {
    /// Bytes DuckDB's reads returned on local disk (its rchar).
    pub local_requested: u64,
    /// Bytes the device gave DuckDB's process in the pass (its read_bytes: the Parquet with the
    /// kernel's read-ahead, and DuckDB's own library, read again after every drop).
    pub local_device: u64,
    /// Bytes DuckDB's reads returned through the mount.
    pub cv_requested: u64,
    /// Bytes the device gave the cluster's process in the pass (its read_bytes: the worker's
    /// O_DIRECT chunk reads, and the process's own code, read again after every drop).
    pub cv_device: u64,
}

/// The report.
#[derive(Clone, Debug, Serialize)]
pub struct DuckdbTpchReport {
    /// Scale factor.
    pub sf: f64,
    /// Added round trip, ms.
    pub rtt_ms: f64,
    /// Timed warm passes.
    pub passes: u32,
    /// Timed cold passes.
    pub cold_passes: u32,
    /// DuckDB's threads.
    pub threads: u32,
    /// Bytes of Parquet.
    pub bytes: u64,
    /// Per query.
    pub queries: Vec<QueryRow>,
    /// Sums of medians: local warm, cv warm, local cold, cv cold.
    pub local_warm_sum: f64,
    /// cv warm.
    pub cv_warm_sum: f64,
    /// Local cold.
    pub local_cold_sum: Option<f64>,
    /// cv cold.
    pub cv_cold_sum: Option<f64>,
    /// The floor cold (`--fuse-floor`).
    pub floor_cold_sum: Option<f64>,
    /// cv's CPU per warm pass over the mount.
    pub cpu_warm: CpuPerPass,
    /// cv's CPU per page-cache-cold pass over the mount.
    pub cpu_cold: Option<CpuPerPass>,
    /// Bytes per page-cache-cold pass.
    pub io_cold: Option<IoPerPass>,
}

/// CPU time of process `pid` ("self" for this one) so far, from /proc/<pid>/stat: utime and
/// stime, in clock ticks of 1/100 s (USER_HZ, fixed at 100 by the kernel's ABI).
fn cpu_of(pid: &str) -> Result<Duration, BenchError> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // The command name may hold spaces; the fields after it are plain.
    let rest = stat.rsplit_once(')').ok_or("an unreadable /proc stat")?.1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let tick = |i: usize| -> Result<u64, BenchError> { Ok(f.get(i).ok_or("a short /proc stat")?.parse()?) };
    // Fields 14 and 15 of stat(5); `rest` starts at field 3.
    Ok(Duration::from_millis((tick(11)? + tick(12)?) * 10))
}

/// Bytes process `pid` made the block layer fetch so far (`read_bytes` of /proc/<pid>/io).
fn device_reads_of(pid: &str) -> Result<u64, BenchError> {
    let io = std::fs::read_to_string(format!("/proc/{pid}/io"))?;
    let line = io.lines().find_map(|l| l.strip_prefix("read_bytes:")).ok_or("/proc io without read_bytes")?;
    Ok(line.trim().parse()?)
}

/// The `cvctl fuse` process; unmounted and stopped when dropped.
pub(crate) struct FuseProcess {
    child: Child,
    mnt: PathBuf,
}

impl FuseProcess {
    /// Mounts cv at `mnt` and waits until `expect` (a path under it) is there.
    pub(crate) fn start(
        cvctl: &Path,
        client_config: &Path,
        mnt: &Path,
        expect: &Path,
        threads: usize,
        read_only: bool,
        open_ttl: Duration,
    ) -> Result<FuseProcess, BenchError> {
        let mut cmd = Command::new(cvctl);
        cmd.arg("fuse").arg(mnt).arg("--config").arg(client_config).arg("--threads").arg(threads.to_string());
        if read_only {
            cmd.arg("--read-only");
        }
        if !open_ttl.is_zero() {
            cmd.arg("--open-ttl").arg(format!("{}ms", open_ttl.as_millis()));
        }
        Self::spawn(cmd, mnt, expect)
    }

    /// Mounts the floor (`cvctl bench fuse-floor`) over `source` at `mnt`.
    fn floor(cvctl: &Path, source: &Path, mnt: &Path) -> Result<FuseProcess, BenchError> {
        let mut cmd = Command::new(cvctl);
        cmd.args(["bench", "fuse-floor", "--source"]).arg(source).arg("--mountpoint").arg(mnt);
        Self::spawn(cmd, mnt, &mnt.join("lineitem"))
    }

    /// Runs `cmd`, which mounts at `mnt`, and waits until `expect` is there.
    fn spawn(mut cmd: Command, mnt: &Path, expect: &Path) -> Result<FuseProcess, BenchError> {
        std::fs::create_dir_all(mnt)?;
        let child = cmd.spawn()?;
        let mut fuse = FuseProcess { child, mnt: mnt.to_path_buf() };
        let deadline = Instant::now() + Duration::from_secs(30);
        while !expect.exists() {
            if let Some(status) = fuse.child.try_wait()? {
                return Err(format!(
                    "the mount at {} exited ({status}) before {} appeared",
                    mnt.display(),
                    expect.display()
                )
                .into());
            }
            if Instant::now() > deadline {
                return Err(format!("the mount at {}: {} not there after 30 s", mnt.display(), expect.display()).into());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(fuse)
    }

    fn cpu(&self) -> Result<Duration, BenchError> {
        cpu_of(&self.child.id().to_string())
    }
}

impl Drop for FuseProcess {
    fn drop(&mut self) {
        // An unmount ends the session and `cvctl fuse` exits; kill it if it does not.
        let _ = Command::new("umount").arg(&self.mnt).status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = Command::new("umount").arg("-l").arg(&self.mnt).status();
    }
}

/// CPU used during a phase: this process, cv's mount, the floor's.
type PhaseCpu = (Duration, Duration, Option<Duration>);

/// Runs `cmd` and returns the CPU of cv's processes (and of the floor's) during it.
fn with_cpu(fuse: &FuseProcess, floor: Option<&FuseProcess>, cmd: &mut Command) -> Result<PhaseCpu, BenchError> {
    let floor_cpu = || floor.map(FuseProcess::cpu).transpose();
    let (c0, f0, l0) = (cpu_of("self")?, fuse.cpu()?, floor_cpu()?);
    run(cmd)?;
    let floor = floor_cpu()?.zip(l0).map(|(l1, l0)| l1.saturating_sub(l0));
    Ok((cpu_of("self")?.saturating_sub(c0), fuse.cpu()?.saturating_sub(f0), floor))
}

fn per_pass((cluster, fuse, floor): PhaseCpu, passes: u32) -> CpuPerPass {
    let n = f64::from(passes.max(1));
    CpuPerPass {
        cluster: cluster.as_secs_f64() / n,
        fuse: fuse.as_secs_f64() / n,
        floor: floor.map(|f| f.as_secs_f64() / n),
    }
}

/// The runner's command line over `locations`.
fn runner(tools: &Tools, cfg: &DuckdbTpchConfig, locations: &[&Path]) -> Command {
    let mut c = Command::new(&tools.python);
    c.arg(tools.runner_dir.join("duckdb_tpch.py"));
    for l in locations {
        c.arg("--location").arg(l);
    }
    c.args(["--threads", &cfg.threads.to_string()]);
    if !cfg.queries.is_empty() {
        c.args(["--queries", &cfg.queries]);
    }
    c
}

/// Runs it against the cluster `client` is connected to (`client_config` is its config file,
/// for the `cvctl fuse` process).
pub async fn run_bench(
    tools: &Tools,
    cfg: &DuckdbTpchConfig,
    client: &Client,
    client_config: &Path,
) -> Result<DuckdbTpchReport, BenchError> {
    let lake = Lake::start(&tools.python, &tools.runner_dir, cfg.sf, &cfg.dir, cfg.rtt, client, &cfg.mount).await?;
    let mnt = cfg.dir.join("mnt");
    let cv_dir = mnt.join(cfg.mount.trim_start_matches('/'));
    let fuse = FuseProcess::start(
        &tools.cvctl,
        client_config,
        &mnt,
        &cv_dir.join("lineitem"),
        cfg.fuse_threads,
        cfg.fuse_read_only,
        cfg.fuse_open_ttl,
    )?;
    let local = lake.source.clone();
    // Locations: local disk, cv's mount, and the floor over the same local files.
    let floor_dir = cfg.dir.join("floor");
    let floor = match cfg.fuse_floor {
        true => Some(FuseProcess::floor(&tools.cvctl, &local, &floor_dir)?),
        false => None,
    };
    let mut locations: Vec<&Path> = vec![&local, &cv_dir];
    if floor.is_some() {
        locations.push(&floor_dir);
    }

    // Fill cv's cache from the store: not timed, not counted.
    run(runner(tools, cfg, &[&cv_dir]).args(["--warmup", "1", "--passes", "0"]))?;

    let warm_json = cfg.dir.join("warm.json");
    let cpu = with_cpu(
        &fuse,
        floor.as_ref(),
        runner(tools, cfg, &locations)
            .args(["--warmup", "1", "--passes", &cfg.passes.to_string(), "--out"])
            .arg(&warm_json),
    )?;
    let cpu_warm = per_pass(cpu, cfg.passes + 1);
    let warm = read_report(&warm_json)?;

    let (cold, cpu_cold, io_cold) = if cfg.cold_passes > 0 {
        let cold_json = cfg.dir.join("cold.json");
        let dev0 = device_reads_of("self")?;
        let cpu = with_cpu(
            &fuse,
            floor.as_ref(),
            runner(tools, cfg, &locations)
                .args(["--drop-caches", "--warmup", "0", "--passes", &cfg.cold_passes.to_string(), "--out"])
                .arg(&cold_json),
        )?;
        let cv_device = (device_reads_of("self")? - dev0) / u64::from(cfg.cold_passes);
        let cold = read_report(&cold_json)?;
        if cold["fingerprints"] != warm["fingerprints"] {
            return Err("the page-cache-cold passes answered differently from the warm ones".into());
        }
        let loc = |i: usize, k: &str| cold["locations"][i][k].as_u64().unwrap_or(0);
        let io = IoPerPass {
            local_requested: loc(0, "read_per_pass"),
            local_device: loc(0, "device_read_per_pass"),
            cv_requested: loc(1, "read_per_pass"),
            cv_device,
        };
        let floor_cold = if floor.is_some() { Some(medians(&cold, 2)?) } else { None };
        (Some((medians(&cold, 0)?, medians(&cold, 1)?, floor_cold)), Some(per_pass(cpu, cfg.cold_passes)), Some(io))
    } else {
        (None, None, None)
    };
    drop(fuse);
    drop(floor);
    let bytes = lake.bytes;
    lake.shutdown();

    let (local_warm, cv_warm) = (medians(&warm, 0)?, medians(&warm, 1)?);
    let mut queries: Vec<QueryRow> = local_warm
        .iter()
        .map(|(q, l)| QueryRow {
            query: q.clone(),
            local_warm: *l,
            cv_warm: cv_warm.get(q).copied().unwrap_or(f64::NAN),
            local_cold: cold.as_ref().and_then(|(l, _, _)| l.get(q).copied()),
            cv_cold: cold.as_ref().and_then(|(_, c, _)| c.get(q).copied()),
            floor_cold: cold.as_ref().and_then(|(_, _, f)| f.as_ref()?.get(q).copied()),
        })
        .collect();
    queries.sort_by_key(|r| query_order(&r.query));
    let sum = |f: &dyn Fn(&QueryRow) -> Option<f64>| cold.as_ref().map(|_| queries.iter().filter_map(f).sum());
    Ok(DuckdbTpchReport {
        sf: cfg.sf,
        rtt_ms: cfg.rtt.as_secs_f64() * 1e3,
        passes: cfg.passes,
        cold_passes: cfg.cold_passes,
        threads: cfg.threads,
        bytes,
        local_warm_sum: queries.iter().map(|r| r.local_warm).sum(),
        cv_warm_sum: queries.iter().map(|r| r.cv_warm).sum(),
        local_cold_sum: sum(&|r| r.local_cold),
        cv_cold_sum: sum(&|r| r.cv_cold),
        floor_cold_sum: if cfg.fuse_floor { sum(&|r| r.floor_cold) } else { None },
        cpu_warm,
        cpu_cold,
        io_cold,
        queries,
    })
}

/// The table: per query and summed, with ratios to local disk, and cv's CPU per pass.
pub fn print(r: &DuckdbTpchReport) {
    println!(
        "DuckDB TPC-H SF {} ({} threads; medians of {} warm / {} page-cache-cold passes; store at +{} ms RTT)",
        r.sf, r.threads, r.passes, r.cold_passes, r.rtt_ms
    );
    println!(
        "{:<6} {:>9} {:>9} {:>7} {:>9} {:>9} {:>7}",
        "query", "local s", "cv s", "ratio", "local ⟂ s", "cv ⟂ s", "ratio"
    );
    let pair = |l: Option<f64>, c: Option<f64>| match (l, c) {
        (Some(l), Some(c)) => (format!("{l:.3}"), format!("{c:.3}"), format!("{:.2}×", c / l)),
        _ => Default::default(),
    };
    for q in &r.queries {
        let (l, c, x) = pair(q.local_cold, q.cv_cold);
        println!(
            "{:<6} {:>9.3} {:>9.3} {:>6.2}× {:>9} {:>9} {:>7}",
            q.query,
            q.local_warm,
            q.cv_warm,
            q.cv_warm / q.local_warm,
            l,
            c,
            x
        );
    }
    let (l, c, x) = pair(r.local_cold_sum, r.cv_cold_sum);
    println!(
        "{:<6} {:>9.3} {:>9.3} {:>6.2}× {:>9} {:>9} {:>7}",
        "sum",
        r.local_warm_sum,
        r.cv_warm_sum,
        r.cv_warm_sum / r.local_warm_sum,
        l,
        c,
        x
    );
    println!("(⟂: the page cache dropped before every query, on both)");
    let cpu =
        |c: &CpuPerPass| format!("{:.2} s (cluster {:.2} s + fuse {:.2} s)", c.cluster + c.fuse, c.cluster, c.fuse);
    println!("cv CPU per pass: warm {}", cpu(&r.cpu_warm));
    if let Some(io) = &r.io_cold {
        let mib = |b: u64| b as f64 / f64::from(1 << 20);
        println!(
            "MiB per page-cache-cold pass: DuckDB read {:.0} (local) / {:.0} (cv); from the device, DuckDB's process {:.0} (local), the cluster's process {:.0} (cv; both count code re-read after each drop)",
            mib(io.local_requested),
            mib(io.cv_requested),
            mib(io.local_device),
            mib(io.cv_device),
        );
    }
    if let (Some(c), Some(l), Some(v)) = (&r.cpu_cold, r.local_cold_sum, r.cv_cold_sum) {
        println!("cv CPU per pass: page cache dropped {}", cpu(c));
        if let (Some(f), Some(fc)) = (r.floor_cold_sum, c.floor) {
            println!(
                "the floor (a bare read-only FUSE file system over the local files, one O_DIRECT read per request), page cache dropped: {f:.3} s ({:.2}× local; cv {:.2}× the floor), its CPU per pass {fc:.2} s (cv {:.2}× the floor)",
                f / l,
                v / f,
                (c.cluster + c.fuse) / fc.max(1e-9)
            );
        }
        let ratio = v / l;
        let met = |ok: bool| if ok { "met" } else { "missed" };
        println!(
            "goals: page cache dropped ≤ {COLD_GOAL}× local: {} ({ratio:.2}×); cv CPU per such pass ≤ {CPU_GOAL} s: {} ({:.2} s)",
            met(ratio <= COLD_GOAL),
            met(c.cluster + c.fuse <= CPU_GOAL),
            c.cluster + c.fuse
        );
    }
    println!("answers equal on both locations and in both phases: true");
}
