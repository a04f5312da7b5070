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
    let dir = dir.to_str().unwrap();
    let args = ["up", "--shards", "2", "--capacity", "1GiB", "--memory", "32MiB"];
    let mut client_config = None;
    let server = Server::start(
        &[&args[..], &["--master-port", "0", "--worker-port", "0", "--dir", dir]].concat(),
        "Ctrl-C stops it",
        |line| {
            if let Some(path) = line.trim().strip_prefix("client config ") {
                client_config = Some(PathBuf::from(path.trim()));
            }
        },
    );
    (server, client_config.expect("`cvctl up` printed no client config"))
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
    let tls = |name: &str| {
        let p = |f: String| format!("{:?}", certs.join(f).to_str().unwrap());
        format!(
            "[tls]\nca = {}\ncert = {}\nkey = {}\n",
            p("ca.pem".into()),
            p(format!("{name}.pem")),
            p(format!("{name}.key"))
        )
    };
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
