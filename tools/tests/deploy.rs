//! `deploy/`: every sample config loads with the servers' own loader and `cvctl doctor` reads
//! it (with its `/etc/cv` and `/var/lib/cv` paths moved into a temporary directory holding
//! real certificates), and every systemd unit passes `systemd-analyze verify` and runs the
//! doctor on the config its server reads before it starts.

use cv_tools::config::CvConfig;
use std::path::{Path, PathBuf};
use std::process::Command;

fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy")
}

fn files(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == ext))
        .collect();
    v.sort();
    v
}

/// A sample's text with the host paths moved under `root`.
fn moved(text: &str, root: &Path) -> String {
    let r = root.to_str().unwrap();
    text.replace("\"/etc/cv/", &format!("\"{r}/etc/cv/")).replace("\"/var/lib/cv/", &format!("\"{r}/var/lib/cv/"))
}

#[test]
fn every_sample_config_loads_and_the_doctor_reads_it() {
    let root = tempfile::tempdir().unwrap();
    let etc = root.path().join("etc/cv");
    std::fs::create_dir_all(&etc).unwrap();
    let init =
        Command::new(env!("CARGO_BIN_EXE_cvctl")).args(["cert", "init", "--dir"]).arg(etc.join("certs")).output();
    assert!(init.unwrap().status.success());
    std::fs::write(etc.join("gateway.secret"), "example-secret\n").unwrap();

    let samples = files(&deploy_dir().join("examples"), "toml");
    let names: Vec<String> = samples.iter().map(|p| p.file_name().unwrap().to_string_lossy().into_owned()).collect();
    for want in ["master-1.toml", "master-2.toml", "master-3.toml", "worker.toml", "client.toml", "gateway.toml"] {
        assert!(names.iter().any(|n| n == want), "deploy/examples lacks {want}: {names:?}");
    }
    let mut bootstraps = 0;
    let mut peer_sets = Vec::new();
    for sample in &samples {
        let name = sample.file_name().unwrap().to_string_lossy().into_owned();
        let text = moved(&std::fs::read_to_string(sample).unwrap(), root.path());
        let cfg = CvConfig::parse(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
        if let Some(m) = &cfg.master {
            assert_eq!(m.peers.len(), 3, "{name}: a group of three");
            assert!(m.peers.iter().any(|p| p.id == m.node_id && p.addr == m.listen), "{name}: listens where peers say");
            bootstraps += usize::from(m.bootstrap);
            peer_sets.push(m.peers.iter().map(|p| (p.id, p.addr)).collect::<Vec<_>>());
        }
        if let Some(w) = &cfg.worker {
            let known = w.master.iter().chain(&w.masters).count();
            assert_eq!(known, 3, "{name}: the worker knows every master");
        }
        if cfg.master.is_none() && cfg.worker.is_none() {
            assert_eq!(cfg.common.client.masters.len() + 1, 3, "{name}: the client knows every master");
        }

        // The doctor reads the same file: its config line is ok, and the certificates
        // `cvctl cert init` made are the right ones for the role the file configures.
        let path = etc.join(&name);
        std::fs::write(&path, &text).unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_cvctl")).args(["doctor", "--json", "--config"]).arg(&path).output();
        let out = out.unwrap();
        let report: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{name}: no JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)));
        let checks = report["checks"].as_array().unwrap();
        assert_eq!(checks[0]["check"], "config", "{name}: {report:#}");
        assert_eq!(checks[0]["status"], "ok", "{name}: {report:#}");
        for c in checks.iter().filter(|c| c["check"] == "cert") {
            assert_eq!(c["status"], "ok", "{name}: {c}");
        }
    }
    assert_eq!(bootstraps, 1, "exactly one master founds the group");
    assert!(peer_sets.windows(2).all(|w| w[0] == w[1]), "the masters agree on the group: {peer_sets:?}");
}

/// The unit's `Key=value` lines for `key`.
fn values<'a>(unit: &'a str, key: &str) -> Vec<&'a str> {
    unit.lines().filter_map(|l| l.strip_prefix(key)?.strip_prefix('=')).collect()
}

#[test]
fn every_unit_verifies_and_checks_its_config_before_starting() {
    let units = files(&deploy_dir().join("systemd"), "service");
    let names: Vec<String> = units.iter().map(|p| p.file_name().unwrap().to_string_lossy().into_owned()).collect();
    for want in ["cv-master.service", "cv-worker.service", "cv-gateway.service", "cv-fuse@.service"] {
        assert!(names.iter().any(|n| n == want), "deploy/systemd lacks {want}: {names:?}");
    }
    let analyze = Command::new("systemd-analyze").arg("--version").output();
    assert!(
        analyze.is_ok_and(|o| o.status.success()),
        "systemd-analyze is needed to verify deploy/systemd: run scripts/install-systemd-analyze \
         (apt-get install -y systemd)"
    );
    // Verified with cvctl where the units expect it replaced by the binary under test, so the
    // executable check of every Exec line is real.
    let dir = tempfile::tempdir().unwrap();
    for (unit, name) in units.iter().zip(&names) {
        let text = std::fs::read_to_string(unit).unwrap();
        for key in ["Restart", "LimitNOFILE", "ExecStart", "ExecStartPre", "KillSignal"] {
            assert!(!values(&text, key).is_empty(), "{name} lacks {key}=");
        }
        assert_eq!(values(&text, "Restart"), ["on-failure"], "{name}");
        // The doctor reads the very config the server reads.
        let start = values(&text, "ExecStart")[0];
        let config = start.split("--config ").nth(1).and_then(|r| r.split_whitespace().next()).unwrap();
        let pre = values(&text, "ExecStartPre");
        assert!(
            pre.iter().any(|p| p.contains("cvctl doctor --config ") && p.ends_with(config)),
            "{name}: no `cvctl doctor --config {config}` before start: {pre:?}"
        );
        match name.as_str() {
            "cv-worker.service" => {
                assert_eq!(values(&text, "LimitMEMLOCK"), ["infinity"], "io_uring rings lock memory");
                assert!(values(&text, "SystemCallFilter").is_empty(), "a filter would have to pass io_uring_*");
                assert!(values(&text, "PrivateNetwork").is_empty());
            }
            "cv-fuse@.service" => {
                // The mount must land in the host's mount namespace, and /dev/fuse stay reachable.
                for key in [
                    "ProtectSystem",
                    "ProtectHome",
                    "PrivateTmp",
                    "PrivateDevices",
                    "PrivateMounts",
                    "ReadWritePaths",
                    "ProtectKernelTunables",
                    "ProtectKernelModules",
                    "ProtectKernelLogs",
                    "ProtectControlGroups",
                    "ProtectClock",
                    "DeviceAllow",
                    "NoNewPrivileges",
                ] {
                    assert!(values(&text, key).is_empty(), "{name}: {key}= would hide or break the mount");
                }
            }
            _ => {}
        }
        let local = text.replace("/usr/local/bin/cvctl", env!("CARGO_BIN_EXE_cvctl"));
        std::fs::write(dir.path().join(name), local).unwrap();
    }
    // A template is verified through an instance of it.
    let targets: Vec<PathBuf> =
        names.iter().map(|n| dir.path().join(n.replace("@.service", "@mnt-cv.service"))).collect();
    let out = Command::new("systemd-analyze").arg("verify").args(&targets).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && stderr.trim().is_empty(), "systemd-analyze verify {targets:?}:\n{stderr}");
}
