//! Issue 21 on the multi-host rig: three `cvctl master` processes in a Raft group, each on
//! its own host (network namespace), two `cvctl worker`s, clients that know every master.
//! kill -9 of the leader in a put storm, a leader cut off from the others, a follower whose
//! disk was wiped, and a rolling restart of all three: nothing acknowledged is lost. Needs
//! root; elsewhere it says why and returns.

use cv_benches::failover::{self, MasterCrashOptions};
use cv_testkit::rig::{ClusterSpec, CvCluster, Rig};
use std::time::{Duration, Instant};

const T: Duration = Duration::from_secs(20);

fn group(workers: usize) -> CvCluster {
    let spec = ClusterSpec {
        masters: 3,
        heartbeat_timeout: Duration::from_secs(10),
        client_deadline: Duration::from_secs(15),
        ..ClusterSpec::new(env!("CARGO_BIN_EXE_cvctl"), workers)
    };
    CvCluster::start(&spec).unwrap()
}

fn put(c: &CvCluster, dir: &std::path::Path, name: &str) {
    let local = dir.join(name);
    std::fs::write(&local, format!("file {name}").repeat(1000)).unwrap();
    c.fs(&["put", local.to_str().unwrap(), &format!("/ha/{name}")]).unwrap();
}

fn get(c: &CvCluster, name: &str) {
    let got = c.fs(&["cat", &format!("/ha/{name}")]).unwrap();
    assert_eq!(got, format!("file {name}").repeat(1000).into_bytes(), "/ha/{name} reads back wrong");
}

#[test]
fn killing_the_leader_in_a_put_storm_loses_no_acknowledged_file() {
    if let Some(why) = Rig::unavailable() {
        eprintln!("skipped: {why}");
        return;
    }
    let opts = MasterCrashOptions {
        masters: 3,
        before: Duration::from_secs(3),
        down: Duration::from_secs(2),
        after: Duration::from_secs(4),
        ..MasterCrashOptions::new(env!("CARGO_BIN_EXE_cvctl"))
    };
    let r = failover::run_master_crash(&opts).unwrap();
    failover::print_master_crash(&r, false);
    assert!(r.acknowledged > 0, "no put succeeded at all");
    assert_eq!(r.acknowledged_lost, 0, "acknowledged puts did not read back");
    let first = r.first_ack_after_kill_ms.expect("no put that started after the kill succeeded");
    // The goal is 1.5 s; CI machines are shared, so the test allows 3.
    assert!(first < 3_000.0, "the first put after the kill was acknowledged {first} ms after it");
    assert_eq!(r.unfinished_after_lease, 0, "unfinished entries outlived the write lease");
}

/// Issue 41: `cvctl` processes (a new client each, with the leader hint of `hints`) while
/// the leader is killed. The first put started after the kill is acknowledged within
/// 1.5 s of it (the election's time, not a dial of the dead leader's), and with the dead
/// master still down each new call takes well under the dial timeout (it used to wait
/// for the dead master's unanswered dial to drain before it exited).
#[test]
fn new_cvctl_processes_are_not_slowed_by_a_killed_leader() {
    if let Some(why) = Rig::unavailable() {
        eprintln!("skipped: {why}");
        return;
    }
    let c = group(1);
    let local = tempfile::tempdir().unwrap();
    let hints = c.rig().dir().join("hints");
    let hints = hints.to_str().unwrap();
    let fs = |args: &[&str]| {
        let mut all = vec!["--leader-hint", hints];
        all.extend_from_slice(args);
        c.fs(&all)
    };
    fs(&["mkdir", "/ha"]).unwrap();
    let data = local.path().join("data");
    std::fs::write(&data, b"x".repeat(10_000)).unwrap();
    // The hint now names the leader: the case where it is the one killed.
    fs(&["put", data.to_str().unwrap(), "/ha/before"]).unwrap();
    let (old, _) = c.wait_leader(None, T).unwrap();
    c.rig().kill9(c.master_at(old)).unwrap();
    let killed = Instant::now();
    let mut n = 0;
    let first = loop {
        n += 1;
        if fs(&["put", data.to_str().unwrap(), &format!("/ha/after-{n}")]).is_ok() {
            break killed.elapsed();
        }
        assert!(killed.elapsed() < T, "no put succeeded within {T:?} of the kill");
    };
    println!("first put by a new cvctl acknowledged {} ms after the leader was killed ({n} tries)", first.as_millis());
    let mut calls = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        fs(&["stat", "/ha/before"]).unwrap();
        calls.push(t.elapsed());
    }
    println!("cvctl fs stat with a master down: {calls:?}");
    // The goal is 1.5 s; CI machines are shared, so the test allows 3.
    assert!(first < Duration::from_secs(3), "the first put after the kill took {first:?}");
    // The dial timeout (the transport's idle timeout) is 1.5 s; a process start is ~0.1 s.
    let slowest = calls.iter().max().unwrap();
    assert!(*slowest < Duration::from_millis(750), "a cvctl call took {slowest:?} with one master down");
    c.shutdown().unwrap();
}

#[test]
fn a_cut_off_leader_a_wiped_follower_and_a_rolling_restart_lose_nothing() {
    if let Some(why) = Rig::unavailable() {
        eprintln!("skipped: {why}");
        return;
    }
    let mut c = group(1);
    let local = tempfile::tempdir().unwrap();
    c.fs(&["mkdir", "/ha"]).unwrap();
    let mut names = Vec::new();
    for i in 0..5 {
        let n = format!("a{i}");
        put(&c, local.path(), &n);
        names.push(n);
    }

    // The leader's link is cut: the other two elect a leader and take puts; the cut-off one,
    // back, follows it and holds what was written meanwhile.
    let (old, _) = c.wait_leader(None, T).unwrap();
    c.rig().cut_link(c.master_host(old)).unwrap();
    let cut_at = Instant::now();
    let (new, took) = c.wait_leader(Some(old), T).unwrap();
    println!("leader {} cut off: master {} leads after {took:?}", old + 1, new + 1);
    for i in 0..5 {
        let n = format!("b{i}");
        put(&c, local.path(), &n);
        names.push(n);
    }
    println!("puts through the new leader done {:?} after the cut", cut_at.elapsed());
    c.rig().restore_link(c.master_host(old)).unwrap();

    // A follower loses its disk and comes back empty; with the third master stopped, a put
    // needs its vote and its log, so it succeeds only once the wiped one has caught up.
    let (leader, _) = c.wait_leader(None, T).unwrap();
    let wiped = (0..3).find(|&i| i != leader).unwrap();
    let third = (0..3).find(|&i| i != leader && i != wiped).unwrap();
    c.rig().kill9(c.master_at(wiped)).unwrap();
    c.wipe_master(wiped).unwrap();
    c.restart_master_at(wiped).unwrap();
    std::thread::sleep(Duration::from_secs(2));
    c.rig().kill9(c.master_at(third)).unwrap();
    put(&c, local.path(), "c0");
    names.push("c0".into());
    c.restart_master_at(third).unwrap();

    // Rolling restart: each master in turn is killed and started again while puts go on.
    for i in 0..3 {
        c.rig().kill9(c.master_at(i)).unwrap();
        put(&c, local.path(), &format!("d{i}"));
        names.push(format!("d{i}"));
        c.restart_master_at(i).unwrap();
        c.wait_leader(None, T).unwrap();
        // As an operator would: give the restarted master time to rejoin (the leader dials
        // the new process, it catches up) before the next one goes down.
        std::thread::sleep(Duration::from_secs(2));
    }
    for n in &names {
        get(&c, n);
    }
    let listed = String::from_utf8(c.fs(&["ls", "/ha"]).unwrap()).unwrap();
    for n in &names {
        assert!(listed.contains(n.as_str()), "/ha/{n} is not listed:\n{listed}");
    }
    c.shutdown().unwrap();
}
