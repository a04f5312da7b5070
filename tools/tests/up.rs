//! The servers as separate processes through the built binary: `cvctl up`, and `cvctl master`
//! with `cvctl worker` from one config file and `cvctl cert init` certificates (the deployment
//! path). Ctrl-C (SIGINT) and SIGTERM stop them cleanly, with exit status 0, and what was
//! written before is there after a restart on the same directories.

use std::io::{BufRead, BufReader, Lines};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// A running server process, killed if the test fails before it stops it.
struct Server {
    child: Child,
    lines: Lines<BufReader<ChildStdout>>,
}

impl Server {
    /// Starts `cvctl args…` and reads its output up to the line starting with `ready`,
    /// giving `seen` every line on the way.
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
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `cvctl up` on `dir`, and the client config it printed.
fn up(dir: &Path) -> (Server, PathBuf) {
    let (server, client, _) = up_with_admin(dir);
    (server, client)
}

/// `cvctl up` on `dir`, and the client and admin configs it printed.
fn up_with_admin(dir: &Path) -> (Server, PathBuf, PathBuf) {
    let dir = dir.to_str().unwrap();
    let args = ["up", "--shards", "2", "--capacity", "1GiB", "--memory", "32MiB"];
    let (mut client_config, mut admin_config) = (None, None);
    let server = Server::start(
        &[&args[..], &["--master-port", "0", "--worker-port", "0", "--dir", dir]].concat(),
        "Ctrl-C stops it",
        |line| {
            if let Some(path) = line.trim().strip_prefix("client config ") {
                client_config = Some(PathBuf::from(path.trim()));
            }
            if let Some(path) = line.trim().strip_prefix("admin config ") {
                admin_config = Some(PathBuf::from(path.trim()));
            }
        },
    );
    let client = client_config.expect("`cvctl up` printed no client config");
    (server, client, admin_config.expect("`cvctl up` printed no admin config"))
}

/// Sends `signal` (a `kill` name: INT, TERM) and waits for the exit, with the lines printed meanwhile.
fn stop(mut up: Server, signal: &str) -> (ExitStatus, Vec<String>) {
    let pid = up.child.id().to_string();
    let sent = Command::new("kill").args([&format!("-{signal}"), &pid]).status().expect("run kill");
    assert!(sent.success(), "kill -{signal} {pid}");
    let start = Instant::now();
    let status = loop {
        if let Some(status) = up.child.try_wait().expect("wait for cvctl up") {
            break status;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "cvctl up still running 30 s after SIG{signal}");
        std::thread::sleep(Duration::from_millis(50));
    };
    let rest = up.lines.by_ref().map_while(Result::ok).collect();
    (status, rest)
}

fn fs(cfg: &Path, args: &[&str]) -> Vec<u8> {
    cvctl_with_config(cfg, &[&["fs"], args].concat())
}

/// `cvctl <args> --config <cfg>`'s standard output; it must succeed.
fn cvctl_with_config(cfg: &Path, args: &[&str]) -> Vec<u8> {
    let out = Command::new(env!("CARGO_BIN_EXE_cvctl"))
        .args(&args[..1])
        .arg("--config")
        .arg(cfg)
        .args(&args[1..])
        .output()
        .expect("run cvctl");
    assert!(out.status.success(), "cvctl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    out.stdout
}

#[test]
fn ctrl_c_and_sigterm_stop_up_cleanly_and_keep_what_was_written() {
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().join("cv");
    let local = dir.path().join("in.bin");
    let data: Vec<u8> = (0..3_000_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8).collect();
    std::fs::write(&local, &data).unwrap();

    let (first, cfg) = up(&data_dir);
    fs(&cfg, &["put", local.to_str().unwrap(), "/kept.bin"]);
    let (status, rest) = stop(first, "INT");
    assert!(status.success(), "exit after Ctrl-C: {status}");
    assert!(rest.iter().any(|l| l.starts_with("stopping")), "{rest:?}");

    let (second, cfg) = up(&data_dir);
    assert_eq!(fs(&cfg, &["cat", "/kept.bin"]), data, "the file after a restart");
    let (status, _) = stop(second, "TERM");
    assert!(status.success(), "exit after SIGTERM: {status}");
}

/// `cvctl master` listening on port 0 and the address it printed.
fn master(cfg: &Path) -> (Server, String) {
    let mut addr = None;
    let server = Server::start(&["master", "--config", cfg.to_str().unwrap()], "cv master listening on", |line| {
        addr = line.strip_prefix("cv master listening on ").and_then(|r| r.split_whitespace().next()).map(String::from);
    });
    (server, addr.expect("master address"))
}

/// `cvctl worker` and the shard ports it printed.
fn worker(cfg: &Path, master: &str) -> (Server, Vec<u64>) {
    let args = ["worker", "--config", cfg.to_str().unwrap(), "--master", master];
    let mut ports = Vec::new();
    let server = Server::start(&args, "cv worker:", |line| {
        if let Some((_, addrs)) = line.split_once(" at ") {
            ports = addrs.split(", ").filter_map(|a| a.rsplit(':').next()?.trim().parse().ok()).collect();
        }
    });
    assert!(!ports.is_empty(), "the worker printed no shard addresses");
    (server, ports)
}

/// Waits until the master counts a live worker on `ports`. A worker says it is up before its
/// registration has reached the master, and a restarted master still knows the worker's
/// previous ports (port 0 gives new ones each start) until it registers again.
fn wait_registered(client_cfg: &Path, ports: &[u64]) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let report: serde_json::Value =
            serde_json::from_slice(&cvctl_with_config(client_cfg, &["report", "--json"])).unwrap();
        let workers = report["workers"].as_array().cloned().unwrap_or_default();
        let registered = workers.iter().any(|w| {
            w["live"] == true
                && w["shard_ports"]
                    .as_array()
                    .is_some_and(|p| p.iter().filter_map(|v| v.as_u64()).eq(ports.iter().copied()))
        });
        if registered {
            return;
        }
        assert!(Instant::now() < deadline, "no live worker on ports {ports:?} after 30 s: {report}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn master_and_worker_processes_serve_files_and_stop_cleanly_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let certs = dir.path().join("certs");
    let init = Command::new(env!("CARGO_BIN_EXE_cvctl")).args(["cert", "init", "--dir"]).arg(&certs).output().unwrap();
    assert!(init.status.success(), "cert init: {}", String::from_utf8_lossy(&init.stderr));
    let tls = |name: &str| tls_section(&certs, name);
    let node = dir.path().join("node.toml");
    let data = dir.path().join("data");
    std::fs::write(
        &node,
        format!(
            "{}[master]\nlisten = \"127.0.0.1:0\"\njournal_dir = {:?}\n\
             [worker]\nhost = \"127.0.0.1\"\nbind = \"127.0.0.1\"\nbase_port = 0\nshards = 2\npin_cores = false\n\
             memory_tier = \"16MiB\"\n[[worker.data_dirs]]\npath = {:?}\ncapacity = \"1GiB\"\n",
            tls("node"),
            dir.path().join("journal").to_str().unwrap(),
            data.to_str().unwrap()
        ),
    )
    .unwrap();
    let local = dir.path().join("in.bin");
    let bytes: Vec<u8> = (0..9_000_000u32).map(|i| (i.wrapping_mul(40_503) >> 8) as u8).collect();
    std::fs::write(&local, &bytes).unwrap();

    for round in 0..2 {
        let (m, addr) = master(&node);
        let (w, ports) = worker(&node, &addr);
        let client = dir.path().join("client.toml");
        std::fs::write(&client, format!("{}[client]\nmaster = {addr:?}\n", tls("client"))).unwrap();
        wait_registered(&client, &ports);
        if round == 0 {
            fs(&client, &["put", local.to_str().unwrap(), "/kept.bin"]);
        }
        assert_eq!(fs(&client, &["cat", "/kept.bin"]), bytes, "round {round}");
        let (status, _) = stop(w, "TERM");
        assert!(status.success(), "worker exit after SIGTERM: {status}");
        let (status, _) = stop(m, "TERM");
        assert!(status.success(), "master exit after SIGTERM: {status}");
    }
}

/// The `[tls]` section naming `certs/ca.pem` and the identity `name` (`certs/<name>.pem`, `.key`).
fn tls_section(certs: &Path, name: &str) -> String {
    let p = |f: String| format!("{:?}", certs.join(f).to_str().unwrap());
    format!(
        "[tls]\nca = {}\ncert = {}\nkey = {}\n",
        p("ca.pem".into()),
        p(format!("{name}.pem")),
        p(format!("{name}.key"))
    )
}

/// `cvctl args…` (the config flag among them), whatever it returns.
fn cvctl(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_cvctl")).args(args).output().expect("run cvctl")
}

/// Fails with the admin right named and the client certificate shown; returns stderr.
fn refused(out: std::process::Output, what: &str) -> String {
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "{what} was taken from a client certificate");
    assert!(err.contains("needs an admin certificate"), "{what}: {err}");
    assert!(err.contains("client certificate"), "{what}: the refusal names the certificate: {err}");
    err
}

/// What `cvctl up`'s own client file could once do to the whole cluster (mount the directory
/// holding the cluster's keys, drain the only worker, free every cached block) is refused now;
/// the operator's admin file does it; and an identity from `cvctl cert issue` holds its role
/// at once.
#[test]
fn the_client_file_of_cvctl_up_cannot_change_the_cluster() {
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().join("cv");
    let (server, client, admin) = up_with_admin(&data_dir);
    let c = client.to_str().unwrap();
    let certs = data_dir.join("certs");
    let keys = format!("fs://{}", certs.display());

    refused(cvctl(&["mount", "--config", c, "add", &keys, "/x", "--mode", "cache"]), "mount add");
    refused(cvctl(&["worker", "drain", "1", "--config", c]), "worker drain");
    refused(cvctl(&["free", "/", "--config", c]), "free");
    // Nothing changed: no mount, the worker still takes writes, the client still reads and writes.
    let ls = String::from_utf8(cvctl_with_config(&admin, &["mount", "ls"])).unwrap();
    assert!(!ls.contains("/x"), "{ls}");
    let local = dir.path().join("f.bin");
    std::fs::write(&local, b"a client's file").unwrap();
    fs(&client, &["put", local.to_str().unwrap(), "/f.bin"]);
    assert_eq!(fs(&client, &["cat", "/f.bin"]), b"a client's file");

    // Not even the operator mounts the cluster's own directory (its keys).
    let out = cvctl(&["mount", "--config", admin.to_str().unwrap(), "add", &keys, "/x", "--mode", "cache"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("the master's own files"), "{err}");

    // The operator mounts (a directory of its choosing) and unmounts.
    let scratch = dir.path().join("scratch");
    std::fs::create_dir_all(&scratch).unwrap();
    std::fs::write(scratch.join("s.txt"), b"mounted").unwrap();
    let url = format!("fs://{}", scratch.display());
    cvctl_with_config(&admin, &["mount", "add", &url, "/s", "--mode", "cache"]);
    assert_eq!(fs(&client, &["cat", "/s/s.txt"]), b"mounted");
    refused(cvctl(&["mount", "--config", c, "rm", "/s"]), "mount rm");
    cvctl_with_config(&admin, &["mount", "rm", "/s"]);

    // New identities from the same CA, in another process: an admin that may, a client that may not.
    let issue = |role: &str, name: &str| {
        let out = cvctl(
            &["cert", "issue", "--dir", certs.to_str().unwrap(), "--role", role, "--name", name, "--out"]
                .iter()
                .copied()
                .chain([dir.path().join(name).to_str().unwrap()])
                .collect::<Vec<_>>(),
        );
        assert!(out.status.success(), "cert issue {role}: {}", String::from_utf8_lossy(&out.stderr));
        let text = std::fs::read_to_string(&admin).unwrap();
        let cfg = dir.path().join(format!("{name}.toml"));
        let pem = dir.path().join(format!("{name}.pem"));
        let key = dir.path().join(format!("{name}.key"));
        let text = text
            .replace(&certs.join("admin.pem").display().to_string(), &pem.display().to_string())
            .replace(&certs.join("admin.key").display().to_string(), &key.display().to_string());
        std::fs::write(&cfg, text).unwrap();
        cfg
    };
    let ops = issue("admin", "ops2");
    cvctl_with_config(&ops, &["mount", "add", &url, "/s2", "--mode", "cache"]);
    let app = issue("client", "app2");
    let err = refused(cvctl(&["mount", "--config", app.to_str().unwrap(), "rm", "/s2"]), "mount rm (issued client)");
    assert!(err.contains("app2"), "the refusal names the certificate's holder: {err}");
    assert_eq!(fs(&app, &["cat", "/s2/s.txt"]), b"mounted");
    let (status, _) = stop(server, "TERM");
    assert!(status.success(), "exit after SIGTERM: {status}");
}

/// One identity per node from `cvctl cert issue`: a master and a worker each on a certificate
/// naming its node serve as before; the worker's certificate used for another node name is
/// refused by the master, and that worker exits saying why.
#[test]
fn per_node_certificates_serve_and_bind_each_to_its_node() {
    let dir = tempfile::tempdir().unwrap();
    let certs = dir.path().join("certs");
    let ok = |out: std::process::Output, what: &str| {
        assert!(out.status.success(), "{what}: {}", String::from_utf8_lossy(&out.stderr));
    };
    ok(cvctl(&["cert", "init", "--dir", certs.to_str().unwrap()]), "cert init");
    for (role, name) in [("master", "m1"), ("worker", "w1")] {
        let out = certs.join(name);
        let args = ["cert", "issue", "--dir", certs.to_str().unwrap(), "--role", role, "--name", name];
        ok(cvctl(&[&args[..], &["--san", "127.0.0.1", "--out", out.to_str().unwrap()]].concat()), "cert issue");
    }
    let tls = |name: &str| tls_section(&certs, name);
    let worker_file = |node: &str, data: &str| {
        let path = dir.path().join(format!("{node}-{data}.toml"));
        let text = format!(
            "{}[worker]\nnode = {node:?}\nhost = \"127.0.0.1\"\nbind = \"127.0.0.1\"\nbase_port = 0\nshards = 1\n\
             pin_cores = false\nmemory_tier = \"16MiB\"\n[[worker.data_dirs]]\npath = {:?}\ncapacity = \"1GiB\"\n",
            tls("w1"),
            dir.path().join(data).to_str().unwrap()
        );
        std::fs::write(&path, text).unwrap();
        path
    };
    let master_file = dir.path().join("master.toml");
    let journal = dir.path().join("journal");
    let text = format!("{}[master]\nnode = \"m1\"\nlisten = \"127.0.0.1:0\"\njournal_dir = {journal:?}\n", tls("m1"));
    std::fs::write(&master_file, text).unwrap();

    let (m, addr) = master(&master_file);
    let (w, ports) = worker(&worker_file("w1", "data"), &addr);
    let client = dir.path().join("client.toml");
    std::fs::write(&client, format!("{}[client]\nmaster = {addr:?}\n", tls("client"))).unwrap();
    wait_registered(&client, &ports);
    let local = dir.path().join("in.bin");
    std::fs::write(&local, vec![7u8; 3 << 20]).unwrap();
    fs(&client, &["put", local.to_str().unwrap(), "/f.bin"]);
    assert_eq!(fs(&client, &["cat", "/f.bin"]), vec![7u8; 3 << 20]);

    // The same certificate as another worker: refused at the master, and the worker says so.
    let mut other = Command::new(env!("CARGO_BIN_EXE_cvctl"))
        .args(["worker", "--config", worker_file("w2", "data2").to_str().unwrap(), "--master", &addr])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while other.try_wait().unwrap().is_none() && started.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(100));
    }
    if other.try_wait().unwrap().is_none() {
        other.kill().unwrap();
    }
    let out = other.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a worker on another node's certificate kept running: {err}");
    assert!(err.contains("may not speak as node \"w2\""), "{err}");

    let (status, _) = stop(w, "TERM");
    assert!(status.success(), "worker exit after SIGTERM: {status}");
    let (status, _) = stop(m, "TERM");
    assert!(status.success(), "master exit after SIGTERM: {status}");
}
