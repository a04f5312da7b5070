//! Issue 41 on the multi-host rig: partial faults, where a process is alive but half
//! reachable. Needs root and `iptables`; elsewhere it says why and returns.

use cv_testkit::rig::{ClusterSpec, CvCluster, Rig};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

const T: Duration = Duration::from_secs(20);

/// One operation a client thread did: when it started and ended (since the run's start), and
/// whether it succeeded.
#[derive(Debug, Clone, Copy)]
struct Op {
    start: Duration,
    end: Duration,
    ok: bool,
}

fn content(name: &str) -> Vec<u8> {
    format!("gray {name} ").repeat(300).into_bytes()
}

/// The leader's port drops every datagram that arrives (clients', workers' and the other
/// masters'), while its own connections to the other masters keep working: they would follow
/// it for as long as the cut lasts. With 4 writers and 4 readers going, writes and reads are
/// served again within seconds (goal 3 s) through another leader, nothing acknowledged is
/// lost, and once the cut is lifted the old leader follows.
#[test]
fn a_leader_clients_cannot_reach_is_replaced_and_nothing_acknowledged_is_lost() {
    if let Some(why) = Rig::unavailable().or_else(Rig::firewall_unavailable) {
        eprintln!("skipped: {why}");
        return;
    }
    let spec = ClusterSpec {
        masters: 3,
        heartbeat_timeout: Duration::from_secs(10),
        client_deadline: Duration::from_secs(15),
        ..ClusterSpec::new(env!("CARGO_BIN_EXE_cvctl"), 1)
    };
    let c = CvCluster::start(&spec).unwrap();
    c.wait_voters(3, T).unwrap();
    let local = tempfile::tempdir().unwrap();
    c.fs(&["mkdir", "/gray"]).unwrap();
    let read_set: Vec<String> = (0..4).map(|i| format!("r{i}")).collect();
    for n in &read_set {
        let f = local.path().join(n);
        std::fs::write(&f, content(n)).unwrap();
        c.fs(&["put", f.to_str().unwrap(), &format!("/gray/{n}")]).unwrap();
    }
    let (old, _) = c.wait_leader(None, T).unwrap();

    let cut_for = Duration::from_secs(30);
    let run_start = Instant::now();
    let stop = AtomicBool::new(false);
    let ops: Mutex<Vec<Op>> = Mutex::default();
    let acked: Mutex<Vec<String>> = Mutex::default();
    let wrong: Mutex<Vec<String>> = Mutex::default();
    let mut cut_at = Duration::ZERO;
    std::thread::scope(|s| {
        for w in 0..4 {
            let (c, stop, ops, acked, dir) = (&c, &stop, &ops, &acked, local.path());
            s.spawn(move || {
                let mut i = 0;
                while !stop.load(Ordering::Acquire) {
                    let name = format!("w{w}-{i}");
                    let f = dir.join(&name);
                    std::fs::write(&f, content(&name)).unwrap();
                    let start = run_start.elapsed();
                    let ok = c.fs(&["put", f.to_str().unwrap(), &format!("/gray/{name}")]).is_ok();
                    ops.lock().unwrap().push(Op { start, end: run_start.elapsed(), ok });
                    if ok {
                        acked.lock().unwrap().push(name);
                    }
                    i += 1;
                }
            });
        }
        for r in 0..4 {
            let (c, stop, ops, wrong, names) = (&c, &stop, &ops, &wrong, &read_set);
            s.spawn(move || {
                let mut i = r;
                while !stop.load(Ordering::Acquire) {
                    let name = &names[i % names.len()];
                    let start = run_start.elapsed();
                    let got = c.fs(&["cat", &format!("/gray/{name}")]);
                    if let Ok(bytes) = &got
                        && *bytes != content(name)
                    {
                        wrong.lock().unwrap().push(name.clone());
                    }
                    ops.lock().unwrap().push(Op { start, end: run_start.elapsed(), ok: got.is_ok() });
                    i += 1;
                }
            });
        }
        std::thread::sleep(Duration::from_secs(3));
        cut_at = run_start.elapsed();
        c.rig().drop_inbound_udp(c.master_host(old), c.master_port(old)).unwrap();
        std::thread::sleep(cut_for);
        c.rig().allow_inbound_udp(c.master_host(old), c.master_port(old)).unwrap();
        std::thread::sleep(Duration::from_secs(3));
        stop.store(true, Ordering::Release);
    });

    let ops = ops.into_inner().unwrap();
    let served_again = ops.iter().filter(|o| o.ok && o.start >= cut_at).map(|o| o.end - cut_at).min();
    let settled = cut_at + Duration::from_secs(8);
    let late_failures = ops.iter().filter(|o| !o.ok && o.start >= settled && o.end <= cut_at + cut_for).count();
    let during = ops.iter().filter(|o| o.start >= cut_at && o.end <= cut_at + cut_for);
    let (during_ok, during_all) = during.fold((0, 0), |(k, n), o| (k + usize::from(o.ok), n + 1));
    println!(
        "leader {} cut inbound for {cut_for:?}: first operation served {served_again:?} after the cut; \
         {during_ok} of {during_all} operations during the cut succeeded; {late_failures} failed after the first 8 s",
        old + 1
    );
    let served_again = served_again.expect("nothing started after the cut was served");
    // The goal is 3 s; CI machines are shared, so the test allows 8.
    assert!(served_again < Duration::from_secs(8), "served again only {served_again:?} after the cut");
    assert_eq!(late_failures, 0, "operations failed once a new leader served");
    assert!(wrong.lock().unwrap().is_empty(), "reads returned wrong bytes: {:?}", wrong.lock().unwrap());

    // The old leader follows again, and every acknowledged file reads back exactly.
    c.wait_voters(3, T).unwrap();
    let acked = acked.into_inner().unwrap();
    assert!(!acked.is_empty(), "no put succeeded");
    for n in &acked {
        let got = c.fs(&["cat", &format!("/gray/{n}")]).unwrap();
        assert!(got == content(n), "acknowledged /gray/{n} reads back wrong");
    }
    println!("{} acknowledged puts read back exactly", acked.len());
    c.shutdown().unwrap();
}
