//! The rig itself: hosts reach each other and the root namespace, links cut and come back, paused
//! processes stay silent, small disks fill, and teardown (explicit, on panic, by the sweep) leaves
//! no namespace, link or mount behind. Root only: elsewhere each test says why and returns.
//!
//! The UDP peers are this test binary run again inside a host (`ip netns exec`), selected by
//! the ignored `helper` test and told what to do through the environment.

use std::net::{SocketAddr, UdpSocket};
use std::process::Command;
use std::time::Duration;

use cv_testkit::rig::{Rig, sweep};

const PORT: u16 = 9999;

/// `CV_RIG_ECHO=addr`: echo every datagram until killed. `CV_RIG_SEND=addr`: send one, exit 0
/// only if it comes back within a second.
#[test]
#[ignore = "run by the other tests inside a rig host"]
fn helper() {
    if let Ok(addr) = std::env::var("CV_RIG_ECHO") {
        let s = UdpSocket::bind(addr.parse::<SocketAddr>().unwrap()).unwrap();
        let mut buf = [0u8; 64];
        loop {
            let (n, from) = s.recv_from(&mut buf).unwrap();
            s.send_to(&buf[..n], from).unwrap();
        }
    }
    if let Ok(addr) = std::env::var("CV_RIG_SEND") {
        assert!(ping(addr.parse().unwrap()), "no echo from {addr}");
    }
}

fn ping(to: SocketAddr) -> bool {
    let s = UdpSocket::bind("0.0.0.0:0").unwrap();
    s.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
    let mut buf = [0u8; 64];
    // A few tries: the first datagram may wait for ARP.
    (0..3).any(|_| s.send_to(b"ping", to).is_ok() && s.recv_from(&mut buf).is_ok_and(|(n, _)| &buf[..n] == b"ping"))
}

fn helper_cmd(var: &str, addr: SocketAddr) -> Command {
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.args(["--exact", "helper", "--ignored", "--nocapture", "--test-threads=1"]).env(var, addr.to_string());
    c
}

fn skip() -> bool {
    match Rig::unavailable() {
        Some(why) => {
            eprintln!("skipped: {why}");
            true
        }
        None => false,
    }
}

/// Whether anything of rig `s` is left: its bridge, veths or namespaces.
fn leftovers(s: u8) -> Vec<String> {
    let links = Command::new("ip").args(["-o", "link"]).output().unwrap().stdout;
    let ns = Command::new("ip").args(["netns", "list"]).output().unwrap().stdout;
    let text = String::from_utf8_lossy(&links).into_owned() + &String::from_utf8_lossy(&ns);
    let mine = [format!("cvb{s}:"), format!("cvv{s}h"), format!("cv{s}h")];
    text.lines().filter(|l| mine.iter().any(|m| l.contains(m.as_str()))).map(str::to_string).collect()
}

#[test]
fn hosts_talk_links_cut_processes_pause_and_teardown_is_clean() {
    if skip() {
        return;
    }
    let rig = Rig::new(2).unwrap();
    let s = rig.subnet();
    let (h1, h2) = (rig.host(1).unwrap().clone(), rig.host(2).unwrap().clone());
    assert_eq!((h1.addr.octets(), h2.addr.octets()), ([10, 210, s, 11], [10, 210, s, 12]));
    let echo_at = SocketAddr::from((h2.addr, PORT));
    let echo = rig.spawn(2, "echo", &helper_cmd("CV_RIG_ECHO", echo_at)).unwrap();
    let from_h1 = || rig.exec(1, &helper_cmd("CV_RIG_SEND", echo_at)).unwrap().status.success();
    // The echo binds asynchronously: wait for it from the root namespace.
    let up = (0..50).any(|_| ping(echo_at) || (std::thread::sleep(Duration::from_millis(100)), false).1);
    assert!(up, "root namespace cannot reach host 2 through the bridge\n{}", rig.logs());
    assert!(from_h1(), "host 1 cannot reach host 2\n{}", rig.logs());

    rig.cut_link(2).unwrap();
    assert!(!from_h1() && !ping(echo_at), "host 2 still reachable with its link cut");
    rig.restore_link(2).unwrap();
    assert!(from_h1(), "host 2 unreachable after its link came back");

    rig.pause(echo).unwrap();
    assert!(!ping(echo_at), "a paused process answered");
    rig.resume(echo).unwrap();
    assert!(ping(echo_at), "no answer after resume");

    let disk = rig.small_disk(2, 1 << 20).unwrap();
    std::fs::write(disk.join("fits"), vec![1u8; 512 << 10]).unwrap();
    let full = std::fs::write(disk.join("too-big"), vec![1u8; 2 << 20]).unwrap_err();
    assert_eq!(full.raw_os_error(), Some(28), "expected ENOSPC, got {full}");

    let pid = rig.pid(echo).unwrap();
    let dir = rig.dir().to_path_buf();
    rig.shutdown().unwrap();
    assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists(), "the echo process survived teardown");
    assert!(!dir.exists(), "the temp dir (and its tmpfs) survived teardown");
    assert_eq!(leftovers(s), Vec::<String>::new());
}

#[test]
fn kill9_and_teardown_on_panic() {
    if skip() {
        return;
    }
    let (tx, rx) = std::sync::mpsc::channel();
    let panicked = std::thread::spawn(move || {
        let rig = Rig::new(1).unwrap();
        let addr = SocketAddr::from((rig.host(1).unwrap().addr, PORT));
        let p = rig.spawn(1, "echo", &helper_cmd("CV_RIG_ECHO", addr)).unwrap();
        let q = rig.spawn(1, "echo-2", &helper_cmd("CV_RIG_ECHO", SocketAddr::from((addr.ip(), PORT + 1)))).unwrap();
        let status = rig.kill9(p).unwrap();
        assert!(!status.success() && !rig.alive(p).unwrap() && rig.alive(q).unwrap());
        assert!(rig.kill9(p).is_err(), "an exited process was signalled");
        tx.send((rig.subnet(), rig.pid(q).unwrap())).unwrap();
        panic!("test panic: the rig must still be torn down");
    })
    .join();
    assert!(panicked.is_err());
    let (s, pid) = rx.recv().unwrap();
    assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists(), "a process survived the panic");
    assert_eq!(leftovers(s), Vec::<String>::new());
}

#[test]
fn sweep_removes_rigs_whose_creator_is_gone() {
    if skip() {
        return;
    }
    // A pid that no longer exists, and a subnet nobody uses.
    let mut gone = Command::new("true").spawn().unwrap();
    gone.wait().unwrap();
    let links = String::from_utf8(Command::new("ip").args(["-o", "link"]).output().unwrap().stdout).unwrap();
    let s = (2..=254u8).rev().find(|s| !links.contains(&format!("cvb{s}:"))).unwrap();
    let dir = tempfile::Builder::new().prefix("cv-rig-stale-").tempdir().unwrap().keep();
    let ip = |args: &[&str]| assert!(Command::new("ip").args(args).status().unwrap().success(), "ip {args:?}");
    let br = format!("cvb{s}");
    ip(&["link", "add", "name", &br, "type", "bridge"]);
    ip(&["link", "set", "dev", &br, "alias", &format!("cv-rig pid={} dir={}", gone.id(), dir.display())]);
    ip(&["netns", "add", &format!("cv{s}h1")]);
    ip(&["netns", "add", &format!("cv{s}h2")]);
    // (A parallel test's `Rig::new` may sweep it first: only the end state is asserted.)
    sweep();
    assert_eq!(leftovers(s), Vec::<String>::new());
    assert!(!dir.exists(), "the stale rig's temp dir was kept");
}
