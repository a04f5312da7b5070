//! Issue 41 on the multi-host rig: partial faults, where a process is alive but half
//! reachable or its disk is full. Needs root (and `iptables` for the one-way cut); elsewhere
//! it says why and returns.

use cv_testkit::rig::{ClusterSpec, CvCluster, Rig};
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

const T: Duration = Duration::from_secs(20);

/// One operation a client thread did: when it started and ended (since the load's start), and
/// whether it succeeded.
#[derive(Debug, Clone, Copy)]
struct Op {
    start: Duration,
    end: Duration,
    ok: bool,
}

/// What a load of `cvctl fs put` and `cvctl fs cat` did.
#[derive(Debug, Default)]
struct Outcome {
    ops: Vec<Op>,
    /// Names of the puts that succeeded (under `/pf`).
    acked: Vec<String>,
    /// Reads that returned other bytes than were put.
    wrong: Vec<String>,
    /// When the fault began, since the load's start.
    fault_at: Duration,
}

impl Outcome {
    /// How long after the fault the first operation started after it was served.
    fn served_again(&self) -> Option<Duration> {
        self.ops.iter().filter(|o| o.ok && o.start >= self.fault_at).map(|o| o.end - self.fault_at).min()
    }

    /// Operations that started `after` the fault and ended before `until` (since the fault):
    /// `(succeeded, all)`.
    fn between(&self, after: Duration, until: Duration) -> (usize, usize) {
        let (from, to) = (self.fault_at + after, self.fault_at + until);
        self.ops
            .iter()
            .filter(|o| o.start >= from && o.end <= to)
            .fold((0, 0), |(k, n), o| (k + usize::from(o.ok), n + 1))
    }
}

fn content(name: &str) -> Vec<u8> {
    format!("partial fault {name} ").repeat(300).into_bytes()
}

fn put(c: &CvCluster, dir: &Path, name: &str) -> bool {
    let f = dir.join(name);
    std::fs::write(&f, content(name)).unwrap();
    c.fs(&["put", f.to_str().unwrap(), &format!("/pf/{name}")]).is_ok()
}

/// A cluster of three masters and one worker with `/pf/r0..r3` written.
fn group(master_disk: Option<u64>, dir: &Path) -> CvCluster {
    let spec = ClusterSpec {
        masters: 3,
        heartbeat_timeout: Duration::from_secs(10),
        client_deadline: Duration::from_secs(15),
        master_disk,
        ..ClusterSpec::new(env!("CARGO_BIN_EXE_cvctl"), 1)
    };
    let c = CvCluster::start(&spec).unwrap();
    c.fs(&["mkdir", "/pf"]).unwrap();
    for i in 0..4 {
        assert!(put(&c, dir, &format!("r{i}")));
    }
    c
}

/// Runs 4 writers and 4 readers; after 3 s calls `fault`, and stops 3 s after `fault` returns.
fn load(c: &CvCluster, dir: &Path, fault: impl FnOnce()) -> Outcome {
    let run_start = Instant::now();
    let stop = AtomicBool::new(false);
    let out = Mutex::new(Outcome::default());
    std::thread::scope(|s| {
        for w in 0..4 {
            let (stop, out) = (&stop, &out);
            s.spawn(move || {
                for i in 0.. {
                    if stop.load(Ordering::Acquire) {
                        break;
                    }
                    let name = format!("w{w}-{i}");
                    let start = run_start.elapsed();
                    let ok = put(c, dir, &name);
                    let mut o = out.lock().unwrap();
                    o.ops.push(Op { start, end: run_start.elapsed(), ok });
                    if ok {
                        o.acked.push(name);
                    }
                }
            });
        }
        for r in 0..4 {
            let (stop, out) = (&stop, &out);
            s.spawn(move || {
                for i in r.. {
                    if stop.load(Ordering::Acquire) {
                        break;
                    }
                    let name = format!("r{}", i % 4);
                    let start = run_start.elapsed();
                    let got = c.fs(&["cat", &format!("/pf/{name}")]);
                    let mut o = out.lock().unwrap();
                    if got.as_ref().is_ok_and(|b| *b != content(&name)) {
                        o.wrong.push(name.clone());
                    }
                    o.ops.push(Op { start, end: run_start.elapsed(), ok: got.is_ok() });
                }
            });
        }
        std::thread::sleep(Duration::from_secs(3));
        out.lock().unwrap().fault_at = run_start.elapsed();
        fault();
        std::thread::sleep(Duration::from_secs(3));
        stop.store(true, Ordering::Release);
    });
    out.into_inner().unwrap()
}

/// Every acknowledged put reads back exactly.
fn all_read_back(c: &CvCluster, acked: &[String]) {
    assert!(!acked.is_empty(), "no put succeeded");
    for n in acked {
        let got = c.fs(&["cat", &format!("/pf/{n}")]).unwrap();
        assert!(got == content(n), "acknowledged /pf/{n} reads back wrong");
    }
    println!("{} acknowledged puts read back exactly", acked.len());
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
    let local = tempfile::tempdir().unwrap();
    let c = group(None, local.path());
    let (old, _) = c.wait_leader(None, T).unwrap();
    let cut_for = Duration::from_secs(30);
    let o = load(&c, local.path(), || {
        c.rig().drop_inbound_udp(c.master_host(old), c.master_port(old)).unwrap();
        std::thread::sleep(cut_for);
        c.rig().allow_inbound_udp(c.master_host(old), c.master_port(old)).unwrap();
    });
    let (ok, all) = o.between(Duration::ZERO, cut_for);
    let late = o.between(Duration::from_secs(8), cut_for);
    println!(
        "leader {} cut inbound for {cut_for:?}: first operation served {:?} after the cut; {ok} of {all} \
         operations during the cut succeeded, {} of {} after its first 8 s",
        old + 1,
        o.served_again(),
        late.0,
        late.1
    );
    let served = o.served_again().expect("nothing started after the cut was served");
    // The goal is 3 s; CI machines are shared, so the test allows 8.
    assert!(served < Duration::from_secs(8), "served again only {served:?} after the cut");
    assert_eq!(late.0, late.1, "operations failed once a new leader served");
    assert!(o.wrong.is_empty(), "reads returned wrong bytes: {:?}", o.wrong);
    c.wait_voters(3, T).unwrap();
    all_read_back(&c, &o.acked);
    c.shutdown().unwrap();
}

/// The leader's Raft files are on a small tmpfs, filled up under 4 writers and 4 readers: it
/// holds its writes (nothing is cut short or lost) and steps aside; another leads, writes
/// resume and reads never stop. Space freed, the old leader writes again and follows; it
/// restarts from its files intact.
#[test]
fn a_leader_whose_log_disk_fills_steps_aside_and_writes_again_once_space_is_back() {
    if let Some(why) = Rig::unavailable() {
        eprintln!("skipped: {why}");
        return;
    }
    let local = tempfile::tempdir().unwrap();
    let mut c = group(Some(64 << 20), local.path());
    let (old, _) = c.wait_leader(None, T).unwrap();
    let filler = c.master_disk(old).unwrap().join("filler");
    let o = load(&c, local.path(), || {
        fill(&filler);
        std::thread::sleep(Duration::from_secs(10));
    });
    let (ok, all) = o.between(Duration::ZERO, Duration::from_secs(10));
    let reads_failed = o.ops.iter().filter(|op| !op.ok).count();
    println!(
        "leader {}'s disk filled: first operation served {:?} after; {ok} of {all} operations in the next \
         10 s succeeded ({reads_failed} operations failed in all)",
        old + 1,
        o.served_again()
    );
    let served = o.served_again().expect("nothing started after the disk filled was served");
    assert!(served < Duration::from_secs(8), "served again only {served:?} after the disk filled");
    assert!(o.wrong.is_empty(), "reads returned wrong bytes: {:?}", o.wrong);
    let late = o.between(Duration::from_secs(5), Duration::from_secs(10));
    assert_eq!(late.0, late.1, "operations failed once a new leader served");
    // Asked of another master: the one with the full disk may name no leader at all.
    let other = (0..3).find(|&i| i != old).unwrap();
    let now = leader_as_seen_by(&c, other).expect("no leader");
    assert_ne!(now, old, "the master with the full disk still leads");

    std::fs::remove_file(&filler).unwrap();
    let freed = Instant::now();
    // It writes again and is a working member: with the leader killed, it and the third
    // master elect a leader and take a put (a master whose log had failed for good could not).
    c.rig().kill9(c.master_at(now)).unwrap();
    assert!(put(&c, local.path(), "after-space"), "no put with the old leader's disk freed and the new one killed");
    println!("a put through the master whose disk had filled {:?} after space was freed", freed.elapsed());
    c.restart_master_at(now).unwrap();
    // Its files are whole: it starts again from them and the group still holds everything.
    c.rig().kill9(c.master_at(old)).unwrap();
    c.restart_master_at(old).unwrap();
    c.wait_voters(3, T).unwrap();
    let mut acked = o.acked;
    acked.push("after-space".into());
    all_read_back(&c, &acked);
    println!("all checked {:?} after space was freed", freed.elapsed());
    c.shutdown().unwrap();
}

/// The leader master `i` names in `cvctl master list`, asked of it alone (0-based).
fn leader_as_seen_by(c: &CvCluster, i: usize) -> Option<usize> {
    let list = c.master_list_at(i).ok()?;
    let line = list.lines().find(|l| l.ends_with("leader"))?;
    line.split_whitespace().next()?.parse::<usize>().ok().map(|id| id - 1)
}

/// Fills the filesystem of `path` with one file until it is refused for want of space.
fn fill(path: &Path) {
    use std::io::Write;
    let mut f = std::fs::File::create(path).unwrap();
    let chunk = vec![0u8; 1 << 20];
    loop {
        match f.write_all(&chunk) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::StorageFull => break,
            Err(e) => panic!("filling {}: {e}", path.display()),
        }
    }
    // The last bytes in smaller pieces, so not even a small write fits.
    while f.write_all(&[0u8; 512]).is_ok() {}
}

/// A full worker, a put refused for want of space, then `rm` of a file: a put right after it
/// fits in the space freed. Block deletes used to reach the worker only in its next heartbeat
/// reply, and the space to be reported in the heartbeat after (here every 20 s), so that put
/// was refused too; now the master sends the deletes at once and the worker reports the space
/// in an early heartbeat.
#[test]
fn space_freed_by_rm_is_there_for_the_next_put() {
    if let Some(why) = Rig::unavailable() {
        eprintln!("skipped: {why}");
        return;
    }
    let spec = ClusterSpec {
        heartbeat_timeout: Duration::from_secs(60),
        worker_capacity: 24 << 20,
        block_size: Some(1 << 20),
        replicas: 1,
        ..ClusterSpec::new(env!("CARGO_BIN_EXE_cvctl"), 1)
    };
    let c = CvCluster::start(&spec).unwrap();
    let local = tempfile::tempdir().unwrap();
    let file = |name: &str, mib: usize| {
        let f = local.path().join(name);
        std::fs::write(&f, vec![name.as_bytes()[0]; mib << 20]).unwrap();
        f
    };
    let put = |name: &str, mib: usize| {
        let f = file(name, mib);
        c.cvctl(&["fs", "put", f.to_str().unwrap(), &format!("/{name}")]).unwrap()
    };
    let mut stored = Vec::new();
    let refusal = loop {
        let name = format!("f{}", stored.len());
        let out = put(&name, 4);
        if !out.status.success() {
            break String::from_utf8_lossy(&out.stderr).into_owned();
        }
        stored.push(name);
        assert!(stored.len() < 10, "a 24 MiB worker took {} files of 4 MiB", stored.len());
    };
    println!("{} files of 4 MiB stored; then: {}", stored.len(), refusal.trim());
    assert!(refusal.contains("NoSpace"), "the put was refused for another reason: {refusal}");
    c.fs(&["rm", &format!("/{}", stored[0])]).unwrap();
    let out = put("after-rm", 3);
    assert!(
        out.status.success(),
        "a 3 MiB put right after removing a 4 MiB file was refused: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got = c.fs(&["cat", "/after-rm"]).unwrap();
    assert!(got == vec![b'a'; 3 << 20], "/after-rm reads back wrong");
    c.shutdown().unwrap();
}
