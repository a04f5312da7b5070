//! `cvctl bench read`: cached sequential and random reads through cv, over QUIC and
//! short-circuit (the client reading the worker's data files itself), next to the device
//! limit (fio or an in-tree io_uring O_DIRECT reader on the worker's file system) and the
//! bare QUIC limit (quinn on tokio), in one run, with ratios and the issues' goals.

use crate::cluster::{ClusterOptions, LocalCluster};
use crate::cmd::CmdResult;
use crate::connect::runtime;
use clap::Args;
use cv_benches::read_bench::timeline::Timeline;
use cv_benches::read_bench::{self, ReadBenchOptions, ReadReport, Series, Source, Verdict, Workload, series};
use cv_client::ClientSettings;
use cv_net::config::{ByteSize, Dur};
use std::path::PathBuf;
use std::sync::OnceLock;

/// The collector `--timeline` installs with the global subscriber, before the command runs.
static TIMELINE: OnceLock<Timeline> = OnceLock::new();

/// The layer that feeds [`TIMELINE`].
pub(super) fn timeline_layer() -> crate::logging::ExtraLayer {
    Box::new(TIMELINE.get_or_init(Timeline::new).layer())
}

/// Arguments of `cvctl bench read`.
#[derive(Args, Debug)]
pub struct ReadArgs {
    /// Bytes in the data set, written through cv (4 MiB blocks spread over the shards).
    #[arg(long, default_value = "2GiB")]
    size: ByteSize,
    /// Bytes per file of the data set (a multiple of 1MiB).
    #[arg(long, default_value = "256MiB")]
    file_size: ByteSize,
    /// Pin each shard of the embedded worker to its own CPU. Off by default: the bare QUIC
    /// servers are not pinned either, and on a shared machine a pinned shard waits for its
    /// CPU while another one idles.
    #[arg(long)]
    pin_cores: bool,
    /// How long an idle shard of the embedded worker polls before it sleeps (0: at once).
    #[arg(long, default_value = "0ms")]
    spin_before_park: Dur,
    #[command(flatten)]
    reads: super::ReadSeries,
    #[command(flatten)]
    target: super::Target,
    /// Times every series is measured, device, QUIC and cv back to back each round; every
    /// goal is judged on its median round (3 or more for claims on a shared machine).
    #[arg(long, default_value_t = 1)]
    rounds: u32,
    /// Also show where cv's requests spend their time: to the shard, at the shard (the disk
    /// read), back to the first byte, the rest of the transfer (medians and means, from
    /// marks the client and the shards record; embedded cluster only).
    #[arg(long)]
    pub(crate) timeline: bool,
    /// Leave out the short-circuit series (cv is then measured over QUIC only).
    #[arg(long)]
    no_short_circuit: bool,
    /// Work directory (default: a temporary one, removed at the end).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

impl ReadArgs {
    /// Runs the benchmark.
    pub fn run(self) -> CmdResult {
        let tmp = tempfile::Builder::new().prefix("cv-bench-read-").tempdir()?;
        let dir = self.dir.clone().unwrap_or_else(|| tmp.path().to_path_buf());
        std::fs::create_dir_all(&dir)?;
        let mut opts = ReadBenchOptions {
            cv_dir: "/bench/read".into(),
            total: self.size.bytes(),
            file_size: self.file_size.bytes(),
            rand_block: self.reads.rand_block.bytes(),
            rand_depths: self.reads.rand_depths.clone(),
            duration: self.reads.duration.get(),
            verify_all: self.reads.verify_all,
            device_dir: PathBuf::new(),
            device: self.reads.device,
            quic_endpoints: usize::from(self.reads.shards.max(1)),
            rounds: self.rounds,
            timeline: None,
        };
        if self.timeline {
            if self.target.master.is_some() {
                return Err(
                    "--timeline needs the embedded cluster: a worker in another process records its marks there".into(),
                );
            }
            opts.timeline = Some(TIMELINE.get().cloned().ok_or("the timeline collector was not installed")?);
        }
        // Fail on bad sizes before a cluster is started and data written.
        opts.validate(self.reads.seq_block.bytes())?;
        self.reads.tune(ClientSettings::default()).validate("bench")?;
        runtime()?.block_on(async move {
            // The cv series goes over QUIC; the short-circuit one has a client of its own.
            let tuned = |s| ClientSettings { short_circuit: false, ..self.reads.tune(s) };
            let local_settings = |s| ClientSettings { short_circuit: true, ..self.reads.tune(s) };
            let (cluster, client, local) = match self.target.master {
                Some(m) => {
                    let client = self.target.connect_tuned(m, tuned).await?;
                    let local = match self.no_short_circuit {
                        true => None,
                        false => Some(self.target.connect_tuned(m, local_settings).await?),
                    };
                    opts.device_dir = self.reads.device_dir.clone().unwrap_or_else(|| dir.clone());
                    (None, client, local)
                }
                None => {
                    let total = self.size.bytes();
                    let cluster_opts = ClusterOptions {
                        shards: self.reads.shards,
                        // Room for the data set with a margin: this measures reads, not eviction.
                        capacity: ByteSize((total + total / 2).max(ByteSize::gib(1).bytes())),
                        memory_tier: self.reads.memory_tier,
                        pin_cores: self.pin_cores,
                        spin_before_park: self.spin_before_park,
                        ..ClusterOptions::ephemeral(&dir.join("cluster"))
                    };
                    eprintln!(
                        "starting an embedded cluster ({} shards) under {}",
                        self.reads.shards,
                        cluster_opts.dir.display()
                    );
                    let c = LocalCluster::start(&cluster_opts).await?;
                    let settings = tuned(c.client_settings());
                    settings.validate("client")?;
                    let client = c.client_with(settings).await?;
                    let local = match self.no_short_circuit {
                        true => None,
                        false => Some(c.client_with(local_settings(c.client_settings())).await?),
                    };
                    opts.device_dir = self.reads.device_dir.clone().unwrap_or_else(|| cluster_opts.dir.join("worker"));
                    (Some(c), client, local)
                }
            };
            let report = read_bench::run(&client, local.as_ref(), &opts, &|m| eprintln!("{m}")).await;
            client.close();
            if let Some(l) = local {
                l.close();
            }
            if let Some(c) = cluster {
                c.shutdown().await?;
            }
            let mut report = report?;
            if self.target.master.is_none() {
                report.memory_tier_bytes = Some(self.reads.memory_tier.bytes());
            }
            if self.json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                print_table(&report, &self);
            }
            Ok(())
        })
    }
}

/// "seq 1MiB" or "rand 64KiB", with the round when there are several.
fn row_name(s: &Series, rounds: u32) -> String {
    let kind = match s.workload {
        Workload::Sequential => format!("seq {}", ByteSize(s.block)),
        Workload::Random => format!("rand {}", ByteSize(s.block)),
    };
    if rounds > 1 { format!("{kind} #{}", s.round + 1) } else { kind }
}

fn print_table(r: &ReadReport, args: &ReadArgs) {
    println!(
        "cvctl bench read: {} in {} files of {}, same run (sequential: GiB/s; random: IOPS p50/p99)",
        ByteSize(r.dataset_bytes),
        r.files,
        args.file_size
    );
    println!("cached: {}", r.cached);
    match r.memory_tier_bytes {
        Some(0) => println!("memory tier: off, so every cv read below reads the disk"),
        Some(b) => println!("memory tier: {} (hot chunks may be served from RAM)", ByteSize(b)),
        None => println!("memory tier: as the cluster's worker is configured"),
    }
    println!("device: {}", r.device_tool);
    println!("QUIC:   bare quinn on tokio in this process, cv's TLS and transport settings, no disk");
    let with_sc = r.series.iter().any(|s| s.source == Source::ShortCircuit);
    if with_sc {
        println!(
            "short-circuit: the client reads the worker's data files itself (lease per block over QUIC, O_DIRECT on its io_uring, every chunk's crc checked)"
        );
        if let Some(s) = r.short_circuit {
            let why = if s.reads == 0 { " (a worker on another host? its series went over QUIC)" } else { "" };
            println!(
                "               it read {} requests ({}) from the files; {} fell back to QUIC{why}",
                s.reads,
                ByteSize(s.bytes),
                s.fallbacks
            );
        }
    }
    let with_threads = r.series.iter().any(|s| s.source == Source::ShortCircuitBlocking);
    if with_threads {
        println!(
            "sc threads:    random reads on threads of the caller's own, each read blocking on its thread where the client can read at once from the files (a read-only FUSE mount's path)"
        );
    }
    println!(
        "{:<18} {:>5}  {:<30} {:<30} {:<30} {:<30} {:<30} {:>9} {:>9} {:>9} {:>10}",
        "workload",
        "depth",
        "device",
        "bare QUIC",
        "cv (QUIC)",
        "cv short-circuit",
        "cv sc threads",
        "cv/device",
        "cv/QUIC",
        "sc/device",
        "sct/device"
    );
    let rounds = r.series.iter().map(|s| s.round + 1).max().unwrap_or(1);
    // One row per cv series, with the others of its workload, depth and round.
    let rows: Vec<_> = r
        .series
        .iter()
        .filter(|s| s.source == Source::Cv)
        .filter_map(|cv| {
            let of = |source| series::find(&r.series, source, cv);
            Some((
                of(Source::Device)?,
                of(Source::Quic)?,
                cv,
                of(Source::ShortCircuit),
                of(Source::ShortCircuitBlocking),
            ))
        })
        .collect();
    let dash = || "-".to_string();
    for &(dev, quic, cv, sc, sct) in &rows {
        println!(
            "{:<18} {:>5}  {:<30} {:<30} {:<30} {:<30} {:<30} {:>9} {:>9} {:>9} {:>10}",
            row_name(cv, rounds),
            cv.depth,
            dev.summary(),
            quic.summary(),
            cv.summary(),
            sc.map_or_else(dash, Series::summary),
            sct.map_or_else(dash, Series::summary),
            cv.percent_of(dev),
            cv.percent_of(quic),
            sc.map_or_else(dash, |s| s.percent_of(dev)),
            sct.map_or_else(dash, |s| s.percent_of(dev))
        );
    }
    println!("CPU per request, µs of this process's threads (server + client; on shared cores less noisy than rates):");
    for &(_, quic, cv, sc, sct) in &rows {
        let kind = row_name(cv, rounds);
        let sc = sc.map_or_else(String::new, |s| format!("  short-circuit {:<14}", s.cpu_summary()));
        let sct = sct.map_or_else(String::new, |s| format!("  sc threads {}", s.cpu_summary()));
        println!(
            "  {kind:<16} {:>5}  bare QUIC {:<14} cv {:<14}{sc}{sct}",
            cv.depth,
            quic.cpu_summary(),
            cv.cpu_summary()
        );
    }
    // Bare QUIC serves from memory; cv reads the disk too. fio's CPU per read says what that
    // read costs by itself.
    for &(dev, quic, cv, _, _) in &rows {
        let total = |s: &Series| s.cpu.map(|c| c.server_us.unwrap_or(0.0) + c.client_us);
        let (Some(d), Some(q), Some(c)) = (total(dev), total(quic), total(cv)) else { continue };
        println!(
            "  {:<16} {:>5}  the device's own read (fio: its user + system CPU) {d:.0} µs; cv {:.2}× bare QUIC, {:.2}× bare QUIC plus that read",
            row_name(cv, rounds),
            cv.depth,
            c / q.max(1e-9),
            c / (q + d).max(1e-9)
        );
    }
    if r.series.iter().any(|s| s.stages.is_some()) {
        print_stages(r, rounds);
    }
    if rounds > 1 {
        println!("goals (issue 4), each judged on its median round (the rounds in brackets):");
    } else {
        println!("goals (issue 4):");
    }
    let show = |v: &Verdict, x: f64| if v.ceiling { format!("{x:+.0} µs") } else { format!("{:.0} %", x * 100.0) };
    for v in r.verdicts.iter().chain(&r.short_circuit_verdicts) {
        let mut shown = show(v, v.value);
        if v.rounds.len() > 1 {
            let each: Vec<String> = v.rounds.iter().map(|&x| show(v, x)).collect();
            shown = format!("{shown} ({})", each.join(", "));
        }
        println!("  {:<6} {:<66} {shown}", if v.met { "met" } else { "MISSED" }, v.goal);
    }
    for b in &r.serial_bounds {
        let each: Vec<String> = b.rounds.iter().map(|x| format!("{:.0} %", x * 100.0)).collect();
        println!(
            "not a goal: a depth-1 {} read that reads the disk after the request arrives takes at least the \
             device's p50 plus bare QUIC's, {:.0} µs ({:.0} IOPS); cv reached {:.0} % of that ({})",
            ByteSize(b.block),
            b.bound_us,
            b.bound_iops,
            b.value * 100.0,
            each.join(", ")
        );
    }
    println!(
        "{} bytes checked against what was written. The machine's cores are shared: ratios from one run, not absolutes.",
        r.verified_bytes
    );
}

/// The timeline of each cv series: median and mean µs per stage.
fn print_stages(r: &ReadReport, rounds: u32) {
    println!("where cv's block requests spent their time, µs median / mean (--timeline):");
    println!(
        "  {:<16} {:>5}  {:>8}  {:>13}  {:>17}  {:>13}  {:>13}  {:>13}",
        "", "depth", "requests", "to shard", "at shard (disk)", "to 1st byte", "transfer", "total"
    );
    let cell = |s: &cv_benches::read_bench::timeline::Spread| format!("{:.0} / {:.0}", s.p50_us, s.mean_us);
    for cv in r.series.iter().filter(|s| s.source == Source::Cv) {
        let Some(st) = &cv.stages else { continue };
        println!(
            "  {:<16} {:>5}  {:>8}  {:>13}  {:>17}  {:>13}  {:>13}  {:>13}",
            row_name(cv, rounds),
            cv.depth,
            st.requests,
            cell(&st.to_shard),
            cell(&st.at_shard),
            cell(&st.to_first_byte),
            cell(&st.transfer),
            cell(&st.total)
        );
    }
}
