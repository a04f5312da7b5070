//! The failover scenario on the multi-host rig (see `failover.rs`).

use super::{FailoverOptions, FailoverReport, MasterCrashOptions, MasterCrashReport};
use crate::open_latency::BenchError;
use crate::report::{Latency, histogram};
use cv_client::{Client, ClientConfig, File};
use cv_net::tls::Identity;
use cv_testkit::rig::{ClusterSpec, CvCluster, Rig};
use cv_testkit::{S3Server, random_bytes as bytes};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One read: when it started and ended (from the run's start), and whether it was right.
#[derive(Clone, Copy, Debug)]
struct Sample {
    start: Duration,
    end: Duration,
    ok: bool,
}

fn cmd_ok(out: std::process::Output, what: &str) -> Result<(), BenchError> {
    if out.status.success() {
        return Ok(());
    }
    Err(format!("{what}: {}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)).into())
}

/// Mounts bucket `data` of `s3` at `/s3` in cache mode.
fn mount_data(cluster: &CvCluster, s3: &S3Server) -> Result<(), BenchError> {
    let endpoint = format!("endpoint={}", s3.endpoint());
    let key = format!("access_key_id={}", S3Server::ACCESS_KEY);
    let secret = format!("secret_access_key={}", S3Server::SECRET_KEY);
    let region = format!("region={}", S3Server::REGION);
    let mount = ["mount", "add", "s3://data/", "/s3", "--mode", "cache", "-o", &endpoint, "-o", &key, "-o", &secret];
    let mut args = mount.to_vec();
    args.extend(["-o", &region]);
    cmd_ok(cluster.cvctl(&args)?, "cvctl mount add")
}

/// Starts a cluster of `spec` on a new rig, runs `f` on it and removes it whatever `f` did.
fn on_rig<T>(
    what: &str,
    spec: &ClusterSpec,
    f: impl FnOnce(&mut CvCluster) -> Result<T, BenchError>,
) -> Result<T, BenchError> {
    if let Some(why) = Rig::unavailable() {
        return Err(format!("{what} needs the multi-host rig: {why}").into());
    }
    let mut cluster = CvCluster::start(spec)?;
    let result = f(&mut cluster);
    let stopped = cluster.shutdown();
    let report = result?;
    stopped?;
    Ok(report)
}

/// Runs the scenario; the cluster is removed whatever happens.
pub(super) fn run(opts: &FailoverOptions) -> Result<FailoverReport, BenchError> {
    let spec = ClusterSpec {
        heartbeat_timeout: opts.heartbeat_timeout,
        worker_capacity: 256 << 20,
        client_deadline: Duration::from_secs(10),
        ..ClusterSpec::new(&opts.cvctl, 3)
    };
    on_rig("bench failover", &spec, |cluster| {
        let store_dir = cluster.rig().dir().join("s3");
        std::fs::create_dir_all(&store_dir)?;
        let s3 = S3Server::start_at(&store_dir, cluster.rig().bridge_addr().into())?;
        let result = scenario(opts, cluster, &s3);
        s3.shutdown();
        result
    })
}

fn scenario(opts: &FailoverOptions, cluster: &CvCluster, s3: &S3Server) -> Result<FailoverReport, BenchError> {
    s3.create_bucket("data")?;
    let contents: Vec<Vec<u8>> = (0..opts.files).map(|i| bytes(opts.file_len, i as u64 + 1)).collect();
    for (i, c) in contents.iter().enumerate() {
        s3.put_object("data", &format!("f{i}.bin"), c)?;
    }
    mount_data(cluster, s3)?;
    let mut paths: Vec<String> = (0..opts.files).map(|i| format!("/s3/f{i}.bin")).collect();
    let mut contents = contents;
    // cv-only files: outside mounts, so their only copies are in cv, two of them per block.
    let dir = cluster.rig().dir().join("cv-only");
    std::fs::create_dir_all(&dir)?;
    cluster.fs(&["mkdir", "-p", "/cv"])?;
    for i in 0..CV_ONLY_FILES {
        let local = dir.join(format!("c{i}.bin"));
        let data = bytes(9 << 20, 100 + i as u64);
        std::fs::write(&local, &data)?;
        let path = format!("/cv/c{i}.bin");
        cluster.fs(&["put", local.to_str().unwrap_or_default(), &path])?;
        paths.push(path);
        contents.push(data);
    }

    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    rt.block_on(measure(opts, cluster, Arc::new(paths), Arc::new(contents)))
}

/// cv-only files the readers read beside the cache-mode ones.
const CV_ONLY_FILES: usize = 3;

async fn measure(
    opts: &FailoverOptions,
    cluster: &CvCluster,
    paths: Arc<Vec<String>>,
    contents: Arc<Vec<Vec<u8>>>,
) -> Result<FailoverReport, BenchError> {
    let cfg = ClientConfig::load(cluster.client_config())?;
    let identity = Identity::load(&cfg.tls)?;
    let client = Client::connect(cfg.client.clone(), &identity, &cfg.transport).await?;
    // Warm: every block read once, so each owner holds its blocks.
    let mut owned: HashMap<u64, usize> = HashMap::new();
    let mut warm = Vec::new();
    for (path, want) in paths.iter().zip(contents.iter()).take(opts.files) {
        let f = client.open(path).await?;
        let got = f.sequential(0).read_to_end().await?;
        if got != *want {
            return Err(format!("{path} read back wrong before the kill").into());
        }
        for b in f.blocks() {
            *owned.entry(b.worker_id).or_default() += 1;
        }
        warm.push(f);
    }
    // The victim: the worker that owns the most blocks.
    let (&victim_id, &victim_blocks) = owned.iter().max_by_key(|(_, n)| **n).ok_or("no blocks")?;
    let report = cluster.report()?;
    let victim_host = report
        .workers
        .iter()
        .find(|w| w.worker_id == victim_id)
        .map(|w| w.host.clone())
        .ok_or_else(|| format!("worker {victim_id} not in the report"))?;
    let victim_index = cluster
        .worker_hosts()
        .into_iter()
        .find(|&h| cluster.host_name(h) == victim_host)
        .ok_or_else(|| format!("no rig host for {victim_host}"))?;
    // The cv-only files' blocks with a copy on the victim.
    let mut cv_only_victim_blocks = 0;
    for path in &paths[opts.files..] {
        let f = client.open(path).await?;
        let on_victim = |b: &&cv_wire::msg::BlockLoc| {
            b.worker_id == victim_id || b.replicas.iter().any(|r| r.worker_id == victim_id)
        };
        cv_only_victim_blocks += f.blocks().iter().filter(on_victim).count();
    }

    let t0 = Instant::now();
    let stop_at = opts.before + opts.after;
    let mut tasks = Vec::new();
    for r in 0..opts.readers {
        let (client, paths, contents, read_len) = (client.clone(), paths.clone(), contents.clone(), opts.read_len);
        let files = paths.len();
        tasks.push(tokio::spawn(async move {
            let keep_open = r % 2 == 0;
            let mut open: Vec<Option<File>> = vec![None; files];
            let mut samples = Vec::new();
            let mut errors = Vec::new();
            let mut x = 0x1234_5678u64 + r as u64;
            while t0.elapsed() < stop_at {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let i = (x % files as u64) as usize;
                let want = &contents[i];
                let off = ((x >> 8) % (want.len() - read_len) as u64) as usize;
                let start = t0.elapsed();
                let got = async {
                    let f = match (&open[i], keep_open) {
                        (Some(f), true) => f.clone(),
                        _ => client.open(&paths[i]).await?,
                    };
                    let mut buf = vec![0u8; read_len];
                    let n = f.read_at(off as u64, &mut buf).await?;
                    buf.truncate(n);
                    Ok::<(File, Vec<u8>), cv_client::Error>((f, buf))
                }
                .await;
                let end = t0.elapsed();
                match got {
                    Ok((f, buf)) => {
                        let ok = buf == want[off..off + read_len];
                        // Checked bytes: a mismatch counts as wrong.
                        samples.push((Sample { start, end, ok }, true));
                        open[i] = Some(f);
                    }
                    Err(e) => {
                        samples.push((Sample { start, end, ok: false }, false));
                        errors.push(format!("{} at {off}: {e}", paths[i]));
                    }
                }
            }
            (samples, errors)
        }));
    }
    tokio::time::sleep(opts.before).await;
    let killed_at = t0.elapsed();
    cluster.rig().kill9(cluster.worker(victim_index)?)?;
    // When the master says so (polled in the background of the readers).
    let mut master_noticed = None;
    while t0.elapsed() < stop_at {
        if master_noticed.is_none() {
            let r = cluster.report();
            if r.as_ref().is_ok_and(|r| !r.live(&victim_host)) {
                master_noticed = Some(t0.elapsed() - killed_at);
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut samples = Vec::new();
    let (mut failed, mut wrong, mut first_error) = (0u64, 0u64, None);
    for t in tasks {
        let (s, errors) = t.await?;
        for (sample, bytes_checked) in s {
            if !sample.ok && bytes_checked {
                wrong += 1;
            }
            samples.push(sample);
        }
        failed += errors.len() as u64;
        if first_error.is_none() {
            first_error = errors.into_iter().next();
        }
    }
    // The cv-only files, whole, opened anew: every block from a live copy.
    let (mut cv_only_read_right, mut cv_only_error) = (0u64, None);
    for (path, want) in paths.iter().zip(contents.iter()).skip(opts.files) {
        let read = async { client.open(path).await?.sequential(0).read_to_end().await };
        match read.await {
            Ok(got) if got == *want => cv_only_read_right += 1,
            Ok(_) => {
                wrong += 1;
                cv_only_error.get_or_insert_with(|| format!("{path}: wrong bytes"));
            }
            Err(e) => {
                cv_only_error.get_or_insert_with(|| format!("{path}: {e}"));
            }
        }
    }
    // The report: nothing lost, the dead worker's blocks short of a copy until the grace ends
    // (the per-block summary is the operator's: asked with the admin identity).
    let admin_cfg = ClientConfig::load(cluster.admin_config())?;
    let admin_id = Identity::load(&admin_cfg.tls)?;
    let admin = Client::connect(admin_cfg.client.clone(), &admin_id, &admin_cfg.transport).await?;
    let report = admin.report().await;
    admin.shutdown().await;
    let report = report?;
    let victim_only_copies = report.workers.iter().find(|w| w.worker_id == victim_id).map_or(0, |w| w.only_copies);

    // Now the master dies too. Files opened before the first kill still name the dead worker
    // for some blocks; with nobody to ask, those are read through another worker.
    cluster.rig().kill9(cluster.master())?;
    let (mut without_master_ok, mut without_master_failed, mut without_master_error) = (0u64, 0u64, None);
    for (i, f) in warm.iter().enumerate() {
        match f.sequential(0).read_to_end().await {
            Ok(got) if got == contents[i] => without_master_ok += 1,
            Ok(_) => {
                without_master_failed += 1;
                wrong += 1;
            }
            Err(e) => {
                without_master_failed += 1;
                without_master_error.get_or_insert_with(|| format!("{}: {e}", paths[i]));
            }
        }
    }
    client.shutdown().await;
    if std::env::var_os("CV_FAILOVER_DEBUG").is_some() {
        eprintln!("killed at {killed_at:?}\n{}", cluster.rig().logs());
    }

    // Latency by phase.
    let lat = |s: &Sample| (s.end - s.start).as_nanos() as u64;
    let mut before = histogram();
    for s in samples.iter().filter(|s| s.end <= killed_at) {
        before.record(lat(s).max(1))?;
    }
    // A read waiting out the dead worker takes the idle timeout (1.5 s); one that misses the
    // cache on its new owner takes a fill from the store (tens of ms). Served again means no
    // read fails or waits: none slower than 10x the baseline p99 and half a second.
    let cold = Duration::from_nanos(before.value_at_quantile(0.99) * 10).max(Duration::from_millis(50));
    let slow = cold.max(Duration::from_millis(500));
    let cold_after_kill = samples.iter().filter(|s| s.end > killed_at && s.ok && s.end - s.start > cold).count() as u64;
    let after_kill: Vec<&Sample> = samples.iter().filter(|s| s.end > killed_at).collect();
    let recovered = after_kill
        .iter()
        .filter(|s| !s.ok || s.end - s.start > slow)
        .map(|s| s.end)
        .max()
        .map_or(Duration::ZERO, |end| end - killed_at);
    let (mut window, mut after) = (histogram(), histogram());
    for s in &after_kill {
        let h = if s.start < killed_at + recovered { &mut window } else { &mut after };
        h.record(lat(s).max(1))?;
    }
    let slowest = after_kill.iter().map(|s| s.end - s.start).max().unwrap_or_default();
    if std::env::var_os("CV_FAILOVER_DEBUG").is_some() {
        let mut slow: Vec<&&Sample> = after_kill.iter().filter(|s| s.end - s.start > cold).collect();
        slow.sort_by_key(|s| s.start);
        for s in slow {
            eprintln!(
                "slow read: started {:?} after the kill, took {:?}",
                s.start.saturating_sub(killed_at),
                s.end - s.start
            );
        }
    }
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    Ok(FailoverReport {
        failed,
        wrong,
        first_error,
        victim_blocks,
        recovered_after_ms: ms(recovered),
        cold_after_kill,
        slowest_after_kill_ms: ms(slowest),
        master_noticed_ms: master_noticed.map(ms),
        cv_only_victim_blocks,
        cv_only_read_right,
        cv_only_error,
        lost_files: report.lost_files,
        under_replicated_files: report.under_replicated_files,
        victim_only_copies,
        without_master_ok,
        without_master_failed,
        without_master_error,
        latency: vec![
            Latency::from_hist("reads before the kill (baseline)", &before),
            Latency::from_hist("reads in the failover window", &window),
            Latency::from_hist("reads after it", &after),
        ],
    })
}

/// Runs the master-crash scenario; the cluster is removed whatever happens.
pub(super) fn run_master_crash(opts: &MasterCrashOptions) -> Result<MasterCrashReport, BenchError> {
    let spec = ClusterSpec {
        write_lease: opts.write_lease,
        worker_capacity: 4 << 30,
        // The restarted master's grace for its workers; the default is 30 s.
        heartbeat_timeout: Duration::from_secs(10),
        client_deadline: Duration::from_secs(15),
        masters: opts.masters,
        ..ClusterSpec::new(&opts.cvctl, 3)
    };
    on_rig("bench master-crash", &spec, |cluster| {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
        rt.block_on(storm(opts, cluster))
    })
}

/// One put: when it started and ended (from the run's start), and its outcome.
struct Put {
    start: Duration,
    end: Duration,
    path: String,
    seed: u64,
    result: Result<(), String>,
}

async fn put(client: &Client, path: &str, data: &[u8]) -> Result<(), cv_client::Error> {
    let mut w = client.create(path, false).await?;
    w.write(data).await?;
    w.close().await.map(|_| ())
}

async fn storm(opts: &MasterCrashOptions, cluster: &mut CvCluster) -> Result<MasterCrashReport, BenchError> {
    let cfg = ClientConfig::load(cluster.client_config())?;
    let identity = Identity::load(&cfg.tls)?;
    let client = Client::connect(cfg.client.clone(), &identity, &cfg.transport).await?;
    client.mkdir("/storm", true).await?;
    let t0 = Instant::now();
    let stop_at = opts.before + opts.down + opts.after;
    let mut tasks = Vec::new();
    for w in 0..opts.writers {
        let (client, len, pause) = (client.clone(), opts.file_len, opts.pause);
        tasks.push(tokio::spawn(async move {
            let mut puts = Vec::new();
            let mut n = 0u64;
            while t0.elapsed() < stop_at {
                let seed = (w as u64) << 32 | n;
                let path = format!("/storm/w{w}-{n}.bin");
                let data = bytes(len, seed);
                let start = t0.elapsed();
                let result = put(&client, &path, &data).await.map_err(|e| e.to_string());
                puts.push(Put { start, end: t0.elapsed(), path, seed, result });
                n += 1;
                tokio::time::sleep(pause).await;
            }
            puts
        }));
    }
    // A Raft group's leader is the one killed; the others elect a new one meanwhile.
    let victim = match cluster.master_count() {
        1 => 0,
        _ => cluster.wait_leader(None, Duration::from_secs(10))?.0,
    };
    tokio::time::sleep(opts.before).await;
    let killed_at = t0.elapsed();
    cluster.rig().kill9(cluster.master_at(victim))?;
    tokio::time::sleep(opts.down).await;
    let restarted_at = t0.elapsed();
    cluster.restart_master_at(victim)?;
    // Serving again: the first ping of a fresh client that gets an answer.
    let back_at = loop {
        if let Ok(c) = Client::connect(cfg.client.clone(), &identity, &cfg.transport).await {
            let ok = c.ping().await.is_ok();
            c.close();
            if ok {
                break t0.elapsed();
            }
        }
        if t0.elapsed() > stop_at + Duration::from_secs(30) {
            return Err("the restarted master never answered".into());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let hosts: Vec<String> = cluster.worker_hosts().iter().map(|&h| cluster.host_name(h)).collect();
    // Back means heard from since the restart: the journal keeps them live for a grace period,
    // so `live` alone would be true at once.
    let heard = |r: &cv_testkit::rig::Report, h: &String| {
        let since_restart = (t0.elapsed() - restarted_at).as_millis() as u64;
        r.worker(h).is_some_and(|w| w.live && w.last_heartbeat_age_ms < since_restart)
    };
    let workers_back = cluster
        .wait_for("every worker registered again", Duration::from_secs(20), |r| hosts.iter().all(|h| heard(r, h)))
        .ok();
    let mut puts = Vec::new();
    for t in tasks {
        puts.extend(t.await?);
    }
    let unfinished = |list: &[cv_client::FileStatus]| list.iter().filter(|s| !s.complete).count() as u64;
    let unfinished_after_storm = unfinished(&client.list("/storm").await?);
    // Past the lease and a tick of the master (a quarter of its 2 s heartbeat timeout).
    tokio::time::sleep(opts.write_lease + Duration::from_secs(2)).await;
    let unfinished_after_lease = unfinished(&client.list("/storm").await?);

    let first_ack = puts.iter().filter(|p| p.result.is_ok() && p.start > killed_at).map(|p| p.end).min();
    let (mut acknowledged, mut lost, mut failed, mut failed_after_back, mut first_error) = (0, 0, 0, 0, None);
    let (mut before, mut across) = (histogram(), histogram());
    for p in &puts {
        let took = (p.end - p.start).as_nanos() as u64;
        match &p.result {
            Ok(()) => {
                acknowledged += 1;
                let want = bytes(opts.file_len, p.seed);
                let right = match client.open(&p.path).await {
                    Ok(f) => f.sequential(0).read_to_end().await.is_ok_and(|got| got == want),
                    Err(_) => false,
                };
                if !right {
                    lost += 1;
                }
            }
            Err(e) => {
                failed += 1;
                if p.end > back_at + Duration::from_secs(1) {
                    failed_after_back += 1;
                }
                if first_error.is_none() {
                    first_error = Some(format!("{}: {e}", p.path));
                }
            }
        }
        let h = if p.end <= killed_at { &mut before } else { &mut across };
        h.record(took.max(1))?;
    }
    client.shutdown().await;
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    Ok(MasterCrashReport {
        acknowledged,
        acknowledged_lost: lost,
        failed,
        failed_after_back,
        first_error,
        master_back_ms: ms(back_at - restarted_at),
        workers_back_ms: workers_back.map(ms),
        unfinished_after_storm,
        unfinished_after_lease,
        latency: vec![
            Latency::from_hist("puts before the kill (baseline)", &before),
            Latency::from_hist("puts ending after the kill", &across),
        ],
        masters: cluster.master_count(),
        first_ack_after_kill_ms: first_ack.map(|t| ms(t - killed_at)),
    })
}

/// Runs the join scenario; the cluster is removed whatever happens.
pub(super) fn run_join(opts: &super::JoinOptions) -> Result<super::JoinReport, BenchError> {
    let spec = ClusterSpec {
        worker_capacity: 256 << 20,
        spare_hosts: 1,
        block_size: Some(opts.block_size),
        ..ClusterSpec::new(&opts.cvctl, 3)
    };
    on_rig("bench join", &spec, |cluster| {
        let store_dir = cluster.rig().dir().join("s3");
        std::fs::create_dir_all(&store_dir)?;
        let s3 = S3Server::start_at(&store_dir, cluster.rig().bridge_addr().into())?;
        let result = join_scenario(opts, cluster, &s3);
        s3.shutdown();
        result
    })
}

fn join_scenario(
    opts: &super::JoinOptions,
    cluster: &mut CvCluster,
    s3: &S3Server,
) -> Result<super::JoinReport, BenchError> {
    s3.create_bucket("data")?;
    let contents: Vec<Vec<u8>> = (0..opts.files).map(|i| bytes(opts.file_len, 500 + i as u64)).collect();
    for (i, c) in contents.iter().enumerate() {
        s3.put_object("data", &format!("j{i}.bin"), c)?;
    }
    mount_data(cluster, s3)?;
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let paths: Vec<String> = (0..opts.files).map(|i| format!("/s3/j{i}.bin")).collect();

    // Every block read (cached on its owner), and where each is.
    let owners = |cluster: &CvCluster| -> Result<Vec<(u64, u64)>, BenchError> {
        rt.block_on(async {
            let cfg = ClientConfig::load(cluster.client_config())?;
            let identity = Identity::load(&cfg.tls)?;
            let client = Client::connect(cfg.client.clone(), &identity, &cfg.transport).await?;
            let mut out = Vec::new();
            let mut right = 0;
            for (path, want) in paths.iter().zip(&contents) {
                let f = client.open(path).await?;
                if f.sequential(0).read_to_end().await? == *want {
                    right += 1;
                }
                out.extend(f.blocks().iter().map(|b| (b.block_id, b.worker_id)));
            }
            client.shutdown().await;
            if right != paths.len() {
                return Err(format!("{} of {} files read back wrong", paths.len() - right, paths.len()).into());
            }
            Ok(out)
        })
    };
    let before = owners(cluster)?;
    let host = cluster.add_worker(Duration::from_secs(15))?;
    let new_host = cluster.host_name(host);
    let new_id =
        cluster.report()?.worker(&new_host).map(|w| w.worker_id).ok_or("the new worker is not in the report")?;
    s3.reset_requests();
    let after = owners(cluster)?;
    let gets = s3.count(|r| r.method == "GET");
    let moved: Vec<&(u64, u64)> = after.iter().zip(&before).filter(|(a, b)| a.1 != b.1).map(|(a, _)| a).collect();
    // The new worker reports what it filled within a heartbeat or two.
    let mut new_worker_blocks = 0;
    let until = Instant::now() + Duration::from_secs(5);
    while Instant::now() < until {
        new_worker_blocks = cluster.report()?.worker(&new_host).map_or(0, |w| w.blocks);
        if new_worker_blocks >= moved.len() as u64 {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    Ok(super::JoinReport {
        blocks: before.len(),
        moved: moved.len(),
        moved_to_new: moved.iter().filter(|m| m.1 == new_id).count(),
        ideal: before.len() as f64 / 4.0,
        read_right: paths.len(),
        new_worker_blocks,
        store_gets_after_join: gets,
    })
}

/// Runs the fill scenario; the cluster is removed whatever happens.
pub(super) fn run_fill(opts: &super::FillOptions) -> Result<super::FillReport, BenchError> {
    let spec = ClusterSpec { worker_capacity: opts.capacity, ..ClusterSpec::new(&opts.cvctl, 3) };
    on_rig("bench fill", &spec, |cluster| {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
        rt.block_on(fill(opts, cluster))
    })
}

async fn fill(opts: &super::FillOptions, cluster: &CvCluster) -> Result<super::FillReport, BenchError> {
    let cfg = ClientConfig::load(cluster.client_config())?;
    let identity = Identity::load(&cfg.tls)?;
    let client = Client::connect(cfg.client.clone(), &identity, &cfg.transport).await?;
    client.mkdir("/fill", true).await?;
    let mut r = super::FillReport {
        acknowledged: 0,
        lost: 0,
        no_space: 0,
        other_failures: 0,
        first_refusal: None,
        first_other: None,
        leftovers: 0,
        bytes_acknowledged: 0,
        capacity_total: 3 * opts.capacity,
    };
    let mut acked = Vec::new();
    let mut in_a_row = 0;
    // Far more than fits: the loop ends at the refusals.
    for i in 0..(4 * r.capacity_total / opts.file_len as u64 + 8) {
        if in_a_row >= opts.refusals {
            break;
        }
        let path = format!("/fill/f{i}.bin");
        let data = bytes(opts.file_len, 900 + i);
        match put(&client, &path, &data).await {
            Ok(()) => {
                in_a_row = 0;
                r.acknowledged += 1;
                r.bytes_acknowledged += data.len() as u64;
                acked.push((path, data));
            }
            Err(e) if e.kind() == cv_client::ErrorKind::NoSpace => {
                in_a_row += 1;
                r.no_space += 1;
                r.first_refusal.get_or_insert_with(|| e.to_string());
            }
            Err(e) => {
                in_a_row += 1;
                r.other_failures += 1;
                r.first_other.get_or_insert_with(|| e.to_string());
            }
        }
    }
    for (path, want) in &acked {
        let ok = async { client.open(path).await?.sequential(0).read_to_end().await };
        if !matches!(ok.await, Ok(got) if got == *want) {
            r.lost += 1;
        }
    }
    let listing = client.list("/fill").await?;
    r.leftovers = listing.iter().filter(|s| !s.complete).count();
    client.shutdown().await;
    Ok(r)
}
