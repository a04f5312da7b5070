//! A real `cvctl master` whose journal directory is a small tmpfs that fills up: reads (`fs cat`,
//! `fs ls`) are served, writes fail `NoSpace` naming the journal, `/metrics` says the journal is
//! full; once the tmpfs grows, writes work again without a restart, and everything acknowledged
//! is there after one. Needs root (it mounts the tmpfs); skipped otherwise.

use std::io::{BufRead, BufReader, Lines, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// A tmpfs mounted for the test, unmounted when dropped (also when the test fails).
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(dir: &Path, size: &str) -> Option<Tmpfs> {
        std::fs::create_dir_all(dir).unwrap();
        let out = Command::new("mount").args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"]).arg(dir).output();
        match out {
            Ok(o) if o.status.success() => Some(Tmpfs(dir.to_path_buf())),
            Ok(o) => {
                eprintln!("skipped: cannot mount a tmpfs: {}", String::from_utf8_lossy(&o.stderr));
                None
            }
            Err(e) => {
                eprintln!("skipped: cannot run mount: {e}");
                None
            }
        }
    }

    fn grow(&self, size: &str) {
        let out =
            Command::new("mount").args(["-o", &format!("remount,size={size}")]).arg(&self.0).output().expect("mount");
        assert!(out.status.success(), "remount: {}", String::from_utf8_lossy(&out.stderr));
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// A running server process, killed if the test fails before it stops it.
struct Server {
    child: Child,
    lines: Lines<BufReader<ChildStdout>>,
}

impl Server {
    /// Starts `cvctl args…` and reads its output up to the line starting with `ready`.
    fn start(args: &[&str], ready: &str, mut seen: impl FnMut(&str)) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_cvctl"))
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn cvctl");
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut server = Server { child, lines };
        while let Some(line) = server.lines.next() {
            let line = line.expect("cvctl output");
            seen(&line);
            if line.starts_with(ready) {
                return server;
            }
        }
        panic!("cvctl {args:?} exited before printing {ready:?}");
    }

    fn stop(mut self) {
        let pid = self.child.id().to_string();
        assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
        let start = Instant::now();
        while self.child.try_wait().unwrap().is_none() {
            assert!(start.elapsed() < Duration::from_secs(30), "still running 30 s after SIGTERM");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn master(cfg: &Path) -> (Server, String) {
    let mut addr = None;
    let server = Server::start(&["master", "--config", cfg.to_str().unwrap()], "cv master listening on", |line| {
        addr = line.strip_prefix("cv master listening on ").and_then(|r| r.split_whitespace().next()).map(String::from);
    });
    (server, addr.expect("master address"))
}

fn worker(cfg: &Path, master: &str) -> Server {
    Server::start(&["worker", "--config", cfg.to_str().unwrap(), "--master", master], "cv worker:", |_| {})
}

fn cvctl(cfg: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cvctl"))
        .args(&args[..1])
        .arg("--config")
        .arg(cfg)
        .args(&args[1..])
        .output()
        .expect("run cvctl")
}

fn fs_ok(cfg: &Path, args: &[&str]) -> Vec<u8> {
    let out = cvctl(cfg, &[&["fs"], args].concat());
    assert!(out.status.success(), "cvctl fs {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    out.stdout
}

fn fs_fails(cfg: &Path, args: &[&str]) -> String {
    let out = cvctl(cfg, &[&["fs"], args].concat());
    assert!(!out.status.success(), "cvctl fs {args:?} succeeded on a full journal");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn listing(cfg: &Path, dir: &str) -> Vec<String> {
    let out = fs_ok(cfg, &["ls", dir, "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    v.as_array().unwrap().iter().map(|e| e["path"].as_str().unwrap().to_owned()).collect()
}

/// Waits until the master counts a live worker (its registration is itself a write).
fn wait_registered(cfg: &Path) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let out = cvctl(cfg, &["report", "--json"]);
        if out.status.success() {
            let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            if v["workers"].as_array().is_some_and(|w| w.iter().any(|w| w["live"] == true)) {
                return;
            }
        }
        assert!(Instant::now() < deadline, "no live worker after 30 s");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The value of `name` on the master's `/metrics`.
fn metric(port: u16, name: &str) -> Option<String> {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").ok()?;
    let mut body = String::new();
    s.read_to_string(&mut body).ok()?;
    body.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(' ').map(str::to_owned))
}

/// Writes a file that takes every free byte of the file system `dir` is on.
fn fill(dir: &Path) {
    let mut f = std::fs::File::create(dir.join("filler")).unwrap();
    let chunk = vec![0xAAu8; 4096];
    loop {
        if let Err(e) = f.write_all(&chunk) {
            assert_eq!(e.kind(), std::io::ErrorKind::StorageFull, "{e}");
            break;
        }
    }
    // Any byte still free would take the next record.
    let _ = f.write_all(&[0u8; 1]);
}

#[test]
fn a_full_journal_disk_serves_reads_refuses_writes_and_takes_them_again_when_grown() {
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("journal");
    // Declared first, so dropped last: the servers are gone before it is unmounted.
    let Some(tmpfs) = Tmpfs::mount(&journal, "2m") else { return };
    let certs = dir.path().join("certs");
    let init = Command::new(env!("CARGO_BIN_EXE_cvctl")).args(["cert", "init", "--dir"]).arg(&certs).output().unwrap();
    assert!(init.status.success(), "cert init: {}", String::from_utf8_lossy(&init.stderr));
    let tls = |name: &str| {
        let p = |f: String| format!("{:?}", certs.join(f).to_str().unwrap());
        format!(
            "[tls]\nca = {}\ncert = {}\nkey = {}\n",
            p("ca.pem".into()),
            p(format!("{name}.pem")),
            p(format!("{name}.key"))
        )
    };
    let metrics_port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let node = dir.path().join("node.toml");
    std::fs::write(
        &node,
        format!(
            "{}[master]\nlisten = \"127.0.0.1:0\"\njournal_dir = {:?}\nmetrics = \"127.0.0.1:{metrics_port}\"\n\
             replicas = 1\nheartbeat_timeout = \"3s\"\n\
             [worker]\nhost = \"127.0.0.1\"\nbind = \"127.0.0.1\"\nbase_port = 0\nshards = 1\npin_cores = false\n\
             metrics = \"off\"\nmemory_tier = \"16MiB\"\n[[worker.data_dirs]]\npath = {:?}\ncapacity = \"256MiB\"\n",
            tls("node"),
            journal.to_str().unwrap(),
            dir.path().join("data").to_str().unwrap()
        ),
    )
    .unwrap();
    let local = dir.path().join("in.bin");
    let bytes: Vec<u8> = (0..300_000u32).map(|i| (i.wrapping_mul(40_503) >> 8) as u8).collect();
    std::fs::write(&local, &bytes).unwrap();
    let client = dir.path().join("client.toml");

    let (m, addr) = master(&node);
    let w = worker(&node, &addr);
    std::fs::write(&client, format!("{}[client]\nmaster = {addr:?}\n", tls("client"))).unwrap();
    wait_registered(&client);
    fs_ok(&client, &["mkdir", "/a"]);
    fs_ok(&client, &["put", local.to_str().unwrap(), "/a/before.bin"]);
    assert_eq!(metric(metrics_port, "cv_master_journal_full").as_deref(), Some("0"));

    fill(&journal);
    // Records go on into the journal's last page until it is full; the first that does not
    // fit is cut off the journal again and refused for sure.
    let mut acked = Vec::new();
    let why = loop {
        let p = format!("/a/d{}", acked.len());
        let out = cvctl(&client, &["fs", "mkdir", &p]);
        if !out.status.success() {
            break String::from_utf8_lossy(&out.stderr).into_owned();
        }
        acked.push(p);
        assert!(acked.len() < 1_000, "the journal never filled");
    };
    assert!(why.contains("NoSpace") && why.contains(journal.to_str().unwrap()), "{why}");
    assert!(!why.contains("restart"), "{why}");
    eprintln!("{} records fitted, then: {why}", acked.len());
    fs_fails(&client, &["mkdir", "/never"]);
    // Reads go on, also once the worker's heartbeats (every second) have been refused a while.
    assert_eq!(fs_ok(&client, &["cat", "/a/before.bin"]), bytes);
    std::thread::sleep(Duration::from_secs(4));
    assert_eq!(fs_ok(&client, &["cat", "/a/before.bin"]), bytes);
    let mut want: Vec<String> = acked.iter().cloned().chain(["/a/before.bin".to_owned()]).collect();
    want.sort();
    assert_eq!(listing(&client, "/a"), want);
    assert_eq!(listing(&client, "/"), ["/a"]);
    // Writes do not, whatever they are.
    let why = fs_fails(&client, &["put", local.to_str().unwrap(), "/a/never.bin"]);
    assert!(why.contains("NoSpace") && why.contains(journal.to_str().unwrap()), "{why}");
    assert_eq!(metric(metrics_port, "cv_master_journal_full").as_deref(), Some("1"));
    assert!(metric(metrics_port, "cv_master_journal_no_space_total").is_some_and(|n| n != "0"));

    // Room again, no restart.
    tmpfs.grow("16m");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let out = cvctl(&client, &["fs", "mkdir", "/after"]);
        if out.status.success() {
            break;
        }
        assert!(Instant::now() < deadline, "writes still refused: {}", String::from_utf8_lossy(&out.stderr));
        std::thread::sleep(Duration::from_millis(200));
    }
    // The worker registers again (its heartbeats were refused, so it kept reconnecting).
    wait_registered(&client);
    fs_ok(&client, &["put", local.to_str().unwrap(), "/a/after.bin"]);
    assert_eq!(metric(metrics_port, "cv_master_journal_full").as_deref(), Some("0"));
    w.stop();
    m.stop();

    // Everything acknowledged is there after a restart, nothing refused is.
    let (m, addr) = master(&node);
    let w = worker(&node, &addr);
    std::fs::write(&client, format!("{}[client]\nmaster = {addr:?}\n", tls("client"))).unwrap();
    wait_registered(&client);
    assert_eq!(listing(&client, "/"), ["/a", "/after"]);
    want.push("/a/after.bin".to_owned());
    want.sort();
    assert_eq!(listing(&client, "/a"), want);
    assert_eq!(fs_ok(&client, &["cat", "/a/before.bin"]), bytes);
    assert_eq!(fs_ok(&client, &["cat", "/a/after.bin"]), bytes);
    w.stop();
    m.stop();
}
