//! `--log-format json` / `CV_LOG_FORMAT=json`: a real `cvctl master` process logs one JSON
//! object per stderr line, with the level, the target and the event's fields (its message
//! among them), so a collector needs no parser for prose.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Runs `cvctl master` on `cfg` with `how` applied until it listens, stops it with SIGTERM and
/// returns its stderr lines.
fn master_stderr(cfg: &Path, how: impl FnOnce(&mut Command)) -> Vec<String> {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_cvctl"));
    cmd.env("CV_LOG", "info").env_remove("CV_LOG_FORMAT").env_remove("RUST_LOG");
    how(&mut cmd);
    cmd.args(["master", "--config"]).arg(cfg).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn cvctl master");
    // Kept open until the process exits: it prints more, and a closed pipe would panic it.
    let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = stdout.next();
    let listening = matches!(&first, Some(Ok(l)) if l.starts_with("cv master listening on"));
    let pid = child.id().to_string();
    let sent = Command::new("kill").args(["-TERM", &pid]).status().expect("run kill");
    let deadline = Instant::now() + Duration::from_secs(30);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("cvctl master still running 30 s after SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(stdout);
    assert!(listening && sent.success(), "master did not start: {first:?}");
    let stderr = BufReader::new(child.stderr.take().unwrap());
    stderr.lines().map(|l| l.unwrap()).collect()
}

fn config(dir: &Path) -> std::path::PathBuf {
    let certs = dir.join("certs");
    let init = Command::new(env!("CARGO_BIN_EXE_cvctl")).args(["cert", "init", "--dir"]).arg(&certs).output().unwrap();
    assert!(init.status.success());
    let cfg = dir.join("master.toml");
    let p = |f: &str| format!("{:?}", certs.join(f).to_str().unwrap());
    let text = format!(
        "[tls]\nca = {}\ncert = {}\nkey = {}\n[master]\nlisten = \"127.0.0.1:0\"\njournal_dir = {:?}\n",
        p("ca.pem"),
        p("node.pem"),
        p("node.key"),
        dir.join("journal").to_str().unwrap()
    );
    std::fs::write(&cfg, text).unwrap();
    cfg
}

/// Every line parses as a JSON object with level, target and fields; the events the master
/// logs at info while starting and stopping are among them.
fn assert_json_lines(lines: &[String]) {
    assert!(!lines.is_empty(), "no log lines at CV_LOG=info");
    let events: Vec<serde_json::Value> = lines
        .iter()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON line ({e}): {l:?}")))
        .collect();
    for (e, line) in events.iter().zip(lines) {
        assert!(e["level"].is_string() && e["target"].is_string() && e["timestamp"].is_string(), "{line}");
        assert!(e["fields"].is_object(), "{line}");
    }
    let message = |m: &str| {
        events.iter().any(|e| e["fields"]["message"].as_str().is_some_and(|s| s.contains(m)) && e["level"] == "INFO")
    };
    assert!(message("master serving"), "{lines:#?}");
    assert!(message("stopping the master"), "{lines:#?}");
    let serving = events.iter().find(|e| e["fields"]["message"] == "master serving").unwrap();
    assert_eq!(serving["target"], "cv_master::server::run", "{serving}");
    assert!(serving["fields"]["addr"].as_str().is_some_and(|a| a.starts_with("127.0.0.1:")), "{serving}");
}

#[test]
fn the_flag_and_the_variable_make_every_log_line_json() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());
    assert_json_lines(&master_stderr(&cfg, |c| {
        c.args(["--log-format", "json"]);
    }));
    assert_json_lines(&master_stderr(&cfg, |c| {
        c.env("CV_LOG_FORMAT", "json");
    }));
    // Text stays the default.
    let text = master_stderr(&cfg, |_| {});
    assert!(text.iter().any(|l| l.contains("master serving")), "{text:#?}");
    assert!(text.iter().all(|l| serde_json::from_str::<serde_json::Value>(l).is_err()), "{text:#?}");
}
