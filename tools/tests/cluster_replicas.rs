//! Replicas of cv-only files on the multi-host rig (real `cvctl master` and `cvctl worker`
//! processes, each worker in its own network namespace): a file outside mounts survives kill -9
//! of a worker holding a copy (read at once from the other copy), is copied again after the
//! grace period (the report's under-replicated count goes back to 0), and survives a second
//! worker's death. A drained worker hands its copies over and can then die without loss.
//! Needs root (CI runs as root); elsewhere it says why and returns.

use std::process::Command;
use std::time::{Duration, Instant};

use cv_testkit::random_bytes;
use cv_testkit::rig::{ClusterSpec, CvCluster, Report, Rig};

const GRACE: Duration = Duration::from_secs(3);

fn spec(workers: usize) -> ClusterSpec {
    ClusterSpec {
        heartbeat_timeout: Duration::from_secs(2),
        replicas: 2,
        replica_grace: GRACE,
        ..ClusterSpec::new(env!("CARGO_BIN_EXE_cvctl"), workers)
    }
}

/// Puts `len` random bytes at `remote`; returns them.
fn put(cluster: &CvCluster, remote: &str, len: usize, seed: u64) -> Vec<u8> {
    let data = random_bytes(len, seed);
    let local = cluster.rig().dir().join(format!("put-{seed}.bin"));
    std::fs::write(&local, &data).unwrap();
    cluster.fs(&["put", local.to_str().unwrap(), remote]).unwrap();
    data
}

fn cat_is(cluster: &CvCluster, remote: &str, data: &[u8], when: &str) {
    let back = cluster.fs(&["cat", remote]).unwrap_or_else(|e| panic!("{when}: cat {remote}: {e}"));
    assert!(back == data, "{when}: {remote} read {} bytes, not the {} put", back.len(), data.len());
}

/// The live worker host holding the most blocks.
fn busiest(cluster: &CvCluster, r: &Report) -> usize {
    let hosts = cluster.worker_hosts();
    let blocks = |h: &usize| r.worker(&cluster.host_name(*h)).filter(|w| w.live).map_or(0, |w| w.blocks);
    *hosts.iter().max_by_key(|h| blocks(h)).unwrap()
}

#[test]
fn a_cv_only_file_survives_two_worker_deaths_and_is_copied_again_between_them() {
    if let Some(why) = Rig::unavailable() {
        eprintln!("skipped: {why}");
        return;
    }
    let cluster = CvCluster::start(&spec(3)).unwrap();
    // Three 4 MiB blocks and a bit: outside any mount, so cv holds the only copies.
    let data = put(&cluster, "/r.bin", (12 << 20) + 777, 1);
    let r = cluster.report().unwrap();
    let copies: u64 = r.workers.iter().map(|w| w.blocks).sum();
    assert_eq!(copies, 8, "4 blocks, 2 copies each: {}", r.summary());
    assert_eq!(r.under_replicated_files, 0);
    let stat = String::from_utf8(cluster.fs(&["stat", "/r.bin"]).unwrap()).unwrap();
    assert!(stat.contains("2 live copies"), "{stat}");

    let first = busiest(&cluster, &r);
    cluster.rig().kill9(cluster.worker(first).unwrap()).unwrap();
    let t = Instant::now();
    cat_is(&cluster, "/r.bin", &data, "right after kill -9 of one copy's worker");
    eprintln!("read with a copy's worker dead: {:?}", t.elapsed());
    let name = cluster.host_name(first);
    cluster.wait_for("the killed worker not live", Duration::from_secs(6), |r| !r.live(&name)).unwrap();
    let r = cluster.report().unwrap();
    assert_eq!((r.under_replicated_files, r.lost_files), (1, 0), "{}", r.summary());

    // After the grace period the missing copies are made on the third worker.
    let took = cluster
        .wait_for("every block copied again", GRACE + Duration::from_secs(15), |r| {
            r.under_replicated_files == 0 && r.lost_files == 0
        })
        .unwrap();
    eprintln!("copied again {took:?} after the worker was noticed lost (grace {GRACE:?})");
    let r = cluster.report().unwrap();
    let live_blocks: u64 = r.workers.iter().filter(|w| w.live).map(|w| w.blocks).sum();
    assert_eq!(live_blocks, 8, "both copies of every block on the two live workers: {}", r.summary());

    // A second worker dies: the last one has every block.
    let second = busiest(&cluster, &r);
    cluster.rig().kill9(cluster.worker(second).unwrap()).unwrap();
    cat_is(&cluster, "/r.bin", &data, "with two of three workers dead");
    cluster.shutdown().unwrap();
}

#[test]
fn a_drained_worker_hands_its_copies_over_and_can_then_go() {
    if let Some(why) = Rig::unavailable() {
        eprintln!("skipped: {why}");
        return;
    }
    let cluster = CvCluster::start(&spec(3)).unwrap();
    let data = put(&cluster, "/d.bin", (8 << 20) + 5, 2);
    let r = cluster.report().unwrap();
    let drained = busiest(&cluster, &r);
    let id = r.worker(&cluster.host_name(drained)).unwrap().worker_id.to_string();
    let out = Command::new(env!("CARGO_BIN_EXE_cvctl"))
        .args(["worker", "drain", "--config"])
        .arg(cluster.admin_config())
        .args([id.as_str(), "--wait", "--timeout", "30s"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "drain: {said}{}", String::from_utf8_lossy(&out.stderr));
    assert!(said.contains("drained"), "{said}");
    let name = cluster.host_name(drained);
    cluster
        .wait_for("the drained worker holds no block", Duration::from_secs(10), |r| {
            r.worker(&name).is_some_and(|w| w.draining && w.blocks == 0 && w.bytes_to_move == 0)
        })
        .unwrap();
    // New files avoid it.
    let more = put(&cluster, "/d2.bin", 4 << 20, 3);
    assert_eq!(cluster.report().unwrap().worker(&name).unwrap().blocks, 0);
    cluster.rig().kill9(cluster.worker(drained).unwrap()).unwrap();
    cat_is(&cluster, "/d.bin", &data, "after the drained worker died");
    cat_is(&cluster, "/d2.bin", &more, "after the drained worker died");
    let r = cluster.report().unwrap();
    assert_eq!((r.under_replicated_files, r.lost_files), (0, 0), "{}", r.summary());
    cluster.shutdown().unwrap();
}

/// A put whose block lands on a worker that has just stopped answering (paused, so the master
/// has not noticed yet) places that block again on the other workers and succeeds.
#[test]
fn a_put_survives_a_worker_that_stops_answering_under_it() {
    if let Some(why) = Rig::unavailable() {
        eprintln!("skipped: {why}");
        return;
    }
    let cluster = CvCluster::start(&spec(3)).unwrap();
    let victim = cluster.worker_hosts()[0];
    cluster.rig().pause(cluster.worker(victim).unwrap()).unwrap();
    let t = Instant::now();
    // Five blocks, two copies each on three workers: some land on the paused one.
    let data = put(&cluster, "/p.bin", (20 << 20) + 3, 4);
    eprintln!("put with a paused worker: {:?}", t.elapsed());
    cat_is(&cluster, "/p.bin", &data, "after the put around the paused worker");
    let r = cluster.report().unwrap();
    let name = cluster.host_name(victim);
    assert_eq!(r.worker(&name).map_or(0, |w| w.blocks), 0, "a block kept a copy on the paused worker: {}", r.summary());
    cluster.rig().resume(cluster.worker(victim).unwrap()).unwrap();
    cluster.shutdown().unwrap();
}
