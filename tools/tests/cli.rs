//! `cvctl` exercised through the built binary against a real local cluster.

use cv_tools::cluster::{ClusterOptions, LocalCluster};
use std::path::Path;
use std::process::{Command, Output};

fn cvctl(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cvctl")).args(args).output().expect("run cvctl")
}

fn ok(args: &[&str]) -> String {
    let out = cvctl(args);
    assert!(out.status.success(), "cvctl {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("utf-8 output")
}

fn fs(cfg: &Path, args: &[&str]) -> Output {
    let mut all = vec!["fs", "--config", cfg.to_str().unwrap()];
    all.extend_from_slice(args);
    cvctl(&all)
}

fn fs_ok(cfg: &Path, args: &[&str]) -> String {
    let out = fs(cfg, args);
    assert!(out.status.success(), "cvctl fs {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("utf-8 output")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn file_commands_and_report_through_the_binary() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = LocalCluster::start(&ClusterOptions::ephemeral(&dir.path().join("c"))).await.unwrap();
    let cfg = cluster.client_config().to_path_buf();
    let local = dir.path().join("in.bin");
    let data: Vec<u8> = (0..5_000_000u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(&local, &data).unwrap();

    // The commands block on their own runtime: run them off this one.
    let d = dir.path().to_path_buf();
    tokio::task::spawn_blocking(move || {
        fs_ok(&cfg, &["mkdir", "-p", "/a/b"]);
        // A newline would split every line-oriented listing: names with control characters are refused.
        let bad = fs(&cfg, &["mkdir", "/a/new\nline"]);
        let why = String::from_utf8_lossy(&bad.stderr);
        assert!(!bad.status.success() && why.contains("control character"), "{why}");
        let out = fs_ok(&cfg, &["put", local.to_str().unwrap(), "/a/b/f.bin"]);
        assert!(out.contains("5000000"), "{out}");
        let ls = fs_ok(&cfg, &["ls", "/a/b", "--json"]);
        let v: serde_json::Value = serde_json::from_str(&ls).unwrap();
        assert_eq!(v[0]["path"], "/a/b/f.bin");
        assert_eq!(v[0]["length"], 5_000_000);
        let st = fs_ok(&cfg, &["stat", "/a/b/f.bin"]);
        assert!(st.contains("/a/b/f.bin") && st.contains("5000000"), "{st}");
        let out = fs(&cfg, &["cat", "/a/b/f.bin"]);
        assert!(out.status.success());
        assert!(out.stdout == data, "cat returned other bytes");
        let back = d.join("out.bin");
        fs_ok(&cfg, &["get", "/a/b/f.bin", back.to_str().unwrap()]);
        assert!(std::fs::read(&back).unwrap() == data, "get returned other bytes");
        fs_ok(&cfg, &["mv", "/a/b/f.bin", "/a/g.bin"]);
        let missing = fs(&cfg, &["stat", "/a/b/f.bin"]);
        assert!(!missing.status.success());
        assert!(String::from_utf8_lossy(&missing.stderr).contains("NotFound"));
        let refused = fs(&cfg, &["rm", "/a"]);
        assert!(!refused.status.success(), "non-recursive rm of a non-empty dir must fail");
        fs_ok(&cfg, &["rm", "-r", "/a"]);
        assert_eq!(fs_ok(&cfg, &["ls", "/"]).trim(), "");

        // The cat/get above read blocks; the worker's next heartbeat (every
        // 500 ms) carries its tier counters to the master's report.
        let mut tries = 0;
        loop {
            let report = ok(&["report", "--config", cfg.to_str().unwrap(), "--json"]);
            let v: serde_json::Value = serde_json::from_str(&report).unwrap();
            assert_eq!(v["workers"].as_array().unwrap().len(), 1);
            assert_eq!(v["workers"][0]["live"], true);
            assert_eq!(v["workers"][0]["shard_ports"].as_array().unwrap().len(), 2);
            let hits = |tier: &str| v["workers"][0][tier]["hits"].as_u64().unwrap();
            if hits("disk_tier") + hits("memory_tier") > 0 {
                break;
            }
            tries += 1;
            assert!(tries < 50, "no tier hits reported: {v}");
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    })
    .await
    .unwrap();
    cluster.shutdown().await.unwrap();
}

#[test]
fn cert_init_and_help() {
    let dir = tempfile::tempdir().unwrap();
    let certs = dir.path().join("certs");
    let out = ok(&["cert", "init", "--dir", certs.to_str().unwrap()]);
    assert!(out.contains("ca.pem"));
    assert!(certs.join("client.key").is_file());
    let again = cvctl(&["cert", "init", "--dir", certs.to_str().unwrap()]);
    assert!(!again.status.success(), "must refuse to replace a CA");
    let help = ok(&["--help"]);
    for cmd in ["up", "master", "worker", "fs", "report", "bench", "cert"] {
        assert!(help.contains(cmd), "--help lacks {cmd}");
    }
    let bench = ok(&["bench", "--help"]);
    assert!(bench.contains("open-latency"));
}

/// A client that shuts down before its process goes tells the master at once; one that only
/// closes may leave its connection open there until the idle timeout (30 s): the close frames
/// go out only if a runtime thread sends them before the process ends, which is a race. Here
/// nothing runs after `block_on` returns (a current-thread runtime, never polled again), as in
/// a command that exits. The commands call `shutdown`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shut_down_client_leaves_no_connection_at_the_master() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = LocalCluster::start(&ClusterOptions::ephemeral(&dir.path().join("c"))).await.unwrap();
    // The cluster's own start-up connections close asynchronously: count once they have.
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let before = cluster.master_connections();
    let settings = cluster.client_settings();
    let identity =
        cv_net::tls::Identity::load(&cv_net::config::TlsConfig::in_dir(&dir.path().join("c/certs"), "client")).unwrap();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let client = cv_client::Client::connect(settings, &identity, &Default::default()).await.unwrap();
            client.list("/").await.unwrap();
            client.shutdown().await;
            // A process that exits runs no destructors: the client must not be what closes.
            std::mem::forget(client);
        });
        // Nor is its socket closed (the runtime is leaked): on loopback a closed port answers
        // the master with ICMP port-unreachable, which tells it too; networks may not.
        std::mem::forget(rt);
    })
    .join()
    .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while cluster.master_connections() > before {
        assert!(
            std::time::Instant::now() < deadline,
            "{} connections open at the master 5 s after the client shut down ({before} before)",
            cluster.master_connections()
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    cluster.shutdown().await.unwrap();
}

/// A worker started with a client's certificate is refused by the master at the hello; it
/// must exit with that error (freeing its ports), not retry forever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_with_a_client_certificate_exits_with_the_refusal() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = LocalCluster::start(&ClusterOptions::ephemeral(&dir.path().join("c"))).await.unwrap();
    let certs = dir.path().join("c/certs");
    let cfg = dir.path().join("w.toml");
    std::fs::write(
        &cfg,
        format!(
            "[tls]\nca = {ca:?}\ncert = {cert:?}\nkey = {key:?}\n[worker]\nmaster = \"{m}\"\nhost = \"127.0.0.1\"\n\
             base_port = 0\nshards = 1\n[[worker.data_dirs]]\npath = {data:?}\ncapacity = \"64MiB\"\n",
            ca = certs.join("ca.pem").display().to_string(),
            cert = certs.join("client.pem").display().to_string(),
            key = certs.join("client.key").display().to_string(),
            m = cluster.master_addr(),
            data = dir.path().join("wdata").display().to_string(),
        ),
    )
    .unwrap();
    let started = std::time::Instant::now();
    let out = tokio::task::spawn_blocking(move || {
        let mut child = Command::new(env!("CARGO_BIN_EXE_cvctl"))
            .args(["worker", "--config", cfg.to_str().unwrap()])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // Bounded: a worker still running after 20 s is killed and the test fails below.
        for _ in 0..200 {
            if child.try_wait().unwrap().is_some() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        if child.try_wait().unwrap().is_none() {
            child.kill().unwrap();
        }
        child.wait_with_output().unwrap()
    })
    .await
    .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the refused worker exited 0: {err}");
    assert!(started.elapsed() < std::time::Duration::from_secs(20), "the refused worker kept running: {err}");
    assert!(err.contains("refused this worker's identity") && err.contains("node certificate"), "{err}");
    assert_eq!(cluster.client().await.unwrap().report().await.unwrap().workers.len(), 1, "it registered");
    cluster.shutdown().await.unwrap();
}

#[test]
fn an_error_names_its_request_and_the_server_logs_it_under_that_id() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("up.log");
    let mut up = Command::new(env!("CARGO_BIN_EXE_cvctl"))
        .args(["up", "--shards", "1", "--master-port", "0", "--worker-port", "0", "--dir"])
        .arg(dir.path().join("c"))
        .env("CV_LOG", "debug")
        .stdout(std::process::Stdio::piped())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(up.stdout.take().unwrap()));
    assert!(lines.any(|l| l.is_ok_and(|l| l.starts_with("cv is up"))), "cvctl up did not come up");
    let cfg = dir.path().join("c").join("client.toml");
    let out = fs(&cfg, &["stat", "/no/such/file"]);
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    let _ = up.kill();
    let _ = up.wait();
    assert!(!out.status.success());
    let id = err.split("(request ").nth(1).and_then(|s| s.get(..16)).unwrap_or_else(|| panic!("no request id: {err}"));
    assert!(id.chars().all(|c| c.is_ascii_hexdigit()), "{err}");
    let server = std::fs::read_to_string(&log).unwrap();
    let line = server.lines().find(|l| l.contains(id)).unwrap_or_else(|| panic!("the master's log lacks {id}"));
    assert!(line.contains("NotFound"), "{line}");
}

/// `cvctl fs put -f` killed with -9 in the middle of an overwrite: the acknowledged file it
/// was replacing is read byte-exact while the new version is written and after the kill, and
/// `fs stat` never shows a file being written in its place.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_overwrite_killed_midway_leaves_the_previous_version() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = LocalCluster::start(&ClusterOptions::ephemeral(&dir.path().join("c"))).await.unwrap();
    let cfg = cluster.client_config().to_path_buf();
    let d = dir.path().to_path_buf();
    tokio::task::spawn_blocking(move || {
        let old: Vec<u8> = (0..8_000_000u32).map(|i| (i % 253) as u8).collect();
        let local = d.join("old.bin");
        std::fs::write(&local, &old).unwrap();
        fs_ok(&cfg, &["put", local.to_str().unwrap(), "/k"]);
        let still_old = |when: &str| {
            let out = fs(&cfg, &["cat", "/k"]);
            assert!(out.status.success() && out.stdout == old, "{when}: /k is not the old version");
            let st = fs_ok(&cfg, &["stat", "/k"]);
            assert!(st.contains("8000000") && !st.contains("being written"), "{when}: {st}");
        };

        // The new version comes through a pipe, so the writer is mid-file when it is killed.
        let fifo = d.join("new.fifo");
        assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        let mut put = Command::new(env!("CARGO_BIN_EXE_cvctl"))
            .args(["fs", "--config", cfg.to_str().unwrap(), "put", "-f", fifo.to_str().unwrap(), "/k"])
            .spawn()
            .unwrap();
        let mut pipe = std::fs::OpenOptions::new().write(true).open(&fifo).unwrap();
        std::io::Write::write_all(&mut pipe, &vec![7u8; 12 << 20]).unwrap();
        still_old("during the overwrite");
        put.kill().unwrap();
        put.wait().unwrap();
        drop(pipe);
        still_old("after the writer was killed");
    })
    .await
    .unwrap();
    cluster.shutdown().await.unwrap();
}
