//! A cluster of real processes on the multi-host rig (cv-testkit's `rig`): one `cvctl master` and three
//! `cvctl worker`s, each in its own network namespace with its own address. Files go in and come back
//! byte for byte; a killed worker and a worker whose link is cut are reported not live within the
//! master's heartbeat timeout while the others stay live; the cut worker is live again once its link
//! is back. Needs root (CI runs as root); elsewhere it says why and returns.

use std::time::{Duration, Instant};

use cv_testkit::random_bytes;
use cv_testkit::rig::{ClusterSpec, CvCluster, Report, Rig};

/// The master's heartbeat timeout here; workers are told to heartbeat three times within it.
const HEARTBEAT_TIMEOUT: Duration = Duration::from_secs(2);

/// Live flags of every worker host, for messages.
fn live_of(c: &CvCluster, r: &Report) -> Vec<(String, bool)> {
    c.worker_hosts().iter().map(|&h| (c.host_name(h), r.live(&c.host_name(h)))).collect()
}

#[test]
fn files_round_trip_and_dead_or_cut_workers_go_not_live() {
    if let Some(why) = Rig::unavailable() {
        eprintln!("skipped: {why}");
        return;
    }
    let started = Instant::now();
    let spec = ClusterSpec { heartbeat_timeout: HEARTBEAT_TIMEOUT, ..ClusterSpec::new(env!("CARGO_BIN_EXE_cvctl"), 3) };
    let cluster = CvCluster::start(&spec).unwrap();
    let workers = cluster.worker_hosts();
    assert_eq!(workers, vec![2, 3, 4]);
    let name = |h: usize| cluster.host_name(h);

    // A few files of a few MiB, not multiples of the 4 MiB block, spread over the workers.
    let dir = cluster.rig().dir().join("files");
    std::fs::create_dir_all(&dir).unwrap();
    let sizes = [3 << 20, (5 << 20) + 12_345, (9 << 20) + 1];
    let mut files = Vec::new();
    for (i, &len) in sizes.iter().enumerate() {
        let data = random_bytes(len, i as u64 + 1);
        let local = dir.join(format!("f{i}.bin"));
        std::fs::write(&local, &data).unwrap();
        let remote = format!("/rig/f{i}.bin");
        if i == 0 {
            cluster.fs(&["mkdir", "-p", "/rig"]).unwrap();
        }
        cluster.fs(&["put", local.to_str().unwrap(), &remote]).unwrap();
        files.push((remote, data));
    }
    for (remote, data) in &files {
        let back = cluster.fs(&["cat", remote]).unwrap();
        assert!(back == *data, "{remote}: cat returned {} bytes, not the {} put", back.len(), data.len());
    }

    // Slack over the heartbeat timeout: the master's tick (a quarter of it) and a report round trip.
    let within = HEARTBEAT_TIMEOUT + Duration::from_millis(2_500);

    // kill -9 one worker: exactly it goes not live.
    let (killed, cut, kept) = (workers[0], workers[1], workers[2]);
    cluster.rig().kill9(cluster.worker(killed).unwrap()).unwrap();
    let took =
        cluster.wait_for(&format!("worker {} not live", name(killed)), within, |r| !r.live(&name(killed))).unwrap();
    let r = cluster.report().unwrap();
    assert!(r.worker(&name(killed)).is_some(), "the killed worker vanished from the report: {}", r.summary());
    assert!(r.live(&name(cut)) && r.live(&name(kept)), "a healthy worker went not live: {:?}", live_of(&cluster, &r));
    eprintln!("killed worker {} not live after {took:?}", name(killed));

    // Cut another worker's link: it goes not live too, the third stays live.
    cluster.rig().cut_link(cut).unwrap();
    let took = cluster.wait_for(&format!("worker {} not live", name(cut)), within, |r| !r.live(&name(cut))).unwrap();
    let r = cluster.report().unwrap();
    assert!(r.live(&name(kept)) && !r.live(&name(killed)), "{:?}", live_of(&cluster, &r));
    eprintln!("cut worker {} not live after {took:?}", name(cut));

    // Its link back: it heartbeats (or reconnects) and is live again; the killed one stays down.
    cluster.rig().restore_link(cut).unwrap();
    let took = cluster
        .wait_for(&format!("worker {} live again", name(cut)), Duration::from_secs(10), |r| r.live(&name(cut)))
        .unwrap();
    let r = cluster.report().unwrap();
    assert!(r.live(&name(kept)) && !r.live(&name(killed)), "{:?}", live_of(&cluster, &r));
    eprintln!("restored worker {} live after {took:?}", name(cut));

    cluster.shutdown().unwrap();
    eprintln!("whole test {:?}", started.elapsed());
}

/// Issue 20's first finding: a full worker evicted the only copy of an acknowledged file to
/// make room for the next one. Blocks written through cv are pinned now, so the worker refuses
/// the write that does not fit (`NoSpace`) and every file acknowledged before it reads back.
#[test]
fn a_full_worker_refuses_the_write_and_keeps_every_acknowledged_file() {
    if let Some(why) = Rig::unavailable() {
        eprintln!("skipped: {why}");
        return;
    }
    // Room for twelve 4 MiB blocks; each file is five.
    let spec = ClusterSpec { worker_capacity: 48 << 20, ..ClusterSpec::new(env!("CARGO_BIN_EXE_cvctl"), 1) };
    let cluster = CvCluster::start(&spec).unwrap();
    let dir = cluster.rig().dir().join("files");
    std::fs::create_dir_all(&dir).unwrap();
    let put = |i: u64| {
        let data = random_bytes(20 << 20, 100 + i);
        let local = dir.join(format!("full{i}.bin"));
        std::fs::write(&local, &data).unwrap();
        (cluster.fs(&["put", local.to_str().unwrap(), &format!("/full{i}.bin")]), data)
    };
    let (a, a_data) = put(0);
    let (b, b_data) = put(1);
    a.unwrap();
    b.unwrap();
    let (c, _) = put(2);
    let refused = c.expect_err("a third 20 MiB file does not fit in 48 MiB beside two pinned ones").to_string();
    assert!(refused.contains("NoSpace"), "the refusal names the cause: {refused}");
    for (i, data) in [(0, &a_data), (1, &b_data)] {
        let back = cluster.fs(&["cat", &format!("/full{i}.bin")]).unwrap();
        assert!(back == *data, "/full{i}.bin: cat returned {} bytes, not the {} put", back.len(), data.len());
    }
    cluster.shutdown().unwrap();
}
