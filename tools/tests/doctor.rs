//! `cvctl doctor` through the built binary: a good config passes next to a running master
//! (whose clock it reads), and each kind of trouble is a FAIL line naming the thing: a
//! certificate from another CA, an expired one, a key that is not the certificate's, a
//! taken port, a data directory this user cannot write.

use std::net::UdpSocket;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

/// Runs `cvctl doctor --config <cfg> --json` (as `uid` when given) and parses its report.
fn doctor_as(cfg: &Path, uid: Option<u32>) -> (Output, serde_json::Value) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_cvctl"));
    cmd.args(["doctor", "--json", "--config"]).arg(cfg);
    if let Some(uid) = uid {
        use std::os::unix::process::CommandExt;
        cmd.uid(uid).gid(uid);
    }
    let out = cmd.output().expect("run cvctl doctor");
    let report = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("doctor printed no JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)));
    (out, report)
}

fn doctor(cfg: &Path) -> (Output, serde_json::Value) {
    doctor_as(cfg, None)
}

fn checks(report: &serde_json::Value) -> Vec<serde_json::Value> {
    report["checks"].as_array().cloned().unwrap_or_default()
}

/// The findings of `check` whose subject contains `subject`.
fn about(report: &serde_json::Value, check: &str, subject: &str) -> Vec<serde_json::Value> {
    checks(report)
        .into_iter()
        .filter(|c| c["check"] == check && c["subject"].as_str().is_some_and(|s| s.contains(subject)))
        .collect()
}

/// Asserts the run failed, with a failed `check` about `subject` of kind `problem`.
fn assert_fails(out: &Output, report: &serde_json::Value, check: &str, subject: &str, problem: &str) {
    assert!(!out.status.success(), "doctor exited 0 with {report:#}");
    assert_eq!(report["ok"], false, "{report:#}");
    let found = about(report, check, subject);
    assert!(
        found.iter().any(|c| c["status"] == "fail" && c["problem"] == problem),
        "no failed {check} about {subject} ({problem}) in {report:#}"
    );
}

fn cert_init(dir: &Path) -> PathBuf {
    let out = Command::new(env!("CARGO_BIN_EXE_cvctl")).args(["cert", "init", "--dir"]).arg(dir).output().unwrap();
    assert!(out.status.success(), "cert init: {}", String::from_utf8_lossy(&out.stderr));
    dir.to_path_buf()
}

fn tls(ca: &Path, cert: &Path, key: &Path) -> String {
    format!(
        "[tls]\nca = {:?}\ncert = {:?}\nkey = {:?}\n",
        ca.to_str().unwrap(),
        cert.to_str().unwrap(),
        key.to_str().unwrap()
    )
}

fn node_tls(certs: &Path) -> String {
    tls(&certs.join("ca.pem"), &certs.join("node.pem"), &certs.join("node.key"))
}

/// A UDP port nobody holds now (and its successor, for two shards).
fn free_udp_pair() -> u16 {
    loop {
        let port = UdpSocket::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        if port < u16::MAX
            && UdpSocket::bind(("127.0.0.1", port + 1)).is_ok()
            && UdpSocket::bind(("127.0.0.1", port)).is_ok()
        {
            return port;
        }
    }
}

fn worker_section(master: &str, base_port: u16, data: &Path) -> String {
    format!(
        "[worker]\nmaster = {master:?}\nhost = \"127.0.0.1\"\nbind = \"127.0.0.1\"\nbase_port = {base_port}\nshards = 2\n\
         pin_cores = false\n[[worker.data_dirs]]\npath = {:?}\ncapacity = \"64MiB\"\n",
        data.to_str().unwrap()
    )
}

/// A `cvctl master` or `worker` process, killed when dropped; its stdout stays open while it runs (a
/// closed pipe would fail its next line).
struct Server(Child, #[allow(dead_code)] std::io::Lines<std::io::BufReader<std::process::ChildStdout>>);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_master(cfg: &Path) -> Server {
    use std::io::BufRead;
    let mut child = Command::new(env!("CARGO_BIN_EXE_cvctl"))
        .args(["master", "--config"])
        .arg(cfg)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let line = lines.next().expect("master output").unwrap();
    assert!(line.starts_with("cv master listening on"), "{line}");
    Server(child, lines)
}

#[test]
fn a_good_config_passes_and_reads_the_running_masters_clock() {
    let dir = tempfile::tempdir().unwrap();
    let certs = cert_init(&dir.path().join("certs"));
    let master_port = free_udp_pair();
    let master_addr = format!("127.0.0.1:{master_port}");
    let master_cfg = dir.path().join("master.toml");
    let journal = dir.path().join("journal");
    let master_text = format!("{}[master]\nlisten = {master_addr:?}\njournal_dir = {:?}\n", node_tls(&certs), journal);
    std::fs::write(&master_cfg, master_text).unwrap();
    let _master = start_master(&master_cfg);

    let worker_cfg = dir.path().join("worker.toml");
    let data = dir.path().join("data");
    std::fs::write(&worker_cfg, node_tls(&certs) + &worker_section(&master_addr, free_udp_pair(), &data)).unwrap();
    let (out, report) = doctor(&worker_cfg);
    assert!(out.status.success(), "{report:#}\n{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(report["ok"], true);
    for c in checks(&report) {
        assert_eq!(c["status"], "ok", "every check of a good config on an idle host: {c}");
    }
    let clock = about(&report, "clock", &master_addr);
    assert_eq!(clock.len(), 1, "{report:#}");
    assert!(clock[0]["detail"].as_str().unwrap().contains("this host"), "{}", clock[0]);
    let direct = about(&report, "data_dir", data.to_str().unwrap());
    assert!(direct.iter().any(|c| c["detail"].as_str().unwrap().contains("O_DIRECT works")), "{report:#}");
    assert_eq!(about(&report, "port", "worker shard").len(), 2, "{report:#}");
    let certs_ok = about(&report, "cert", certs.to_str().unwrap());
    assert!(certs_ok.len() >= 4, "CA, chain, role and key findings: {report:#}");

    // The master's own config while it runs: its port is held by a cv master of this cluster,
    // which is a warning (it is up already), not a failure; the journal is writable.
    let (out, report) = doctor(&master_cfg);
    assert!(out.status.success(), "{report:#}");
    let port = about(&report, "port", &master_addr);
    assert_eq!((port[0]["status"].as_str(), port[0]["problem"].as_str()), (Some("warn"), Some("in_use")), "{report:#}");
    assert!(port[0]["detail"].as_str().unwrap().contains("cv master"), "{report:#}");
    assert!(about(&report, "journal", journal.to_str().unwrap()).iter().all(|c| c["status"] == "ok"), "{report:#}");

    // The worker running on that config: its shard ports and its /metrics are held by a cv
    // worker of this cluster (warnings), and it still passes.
    let mut worker = Command::new(env!("CARGO_BIN_EXE_cvctl"))
        .args(["worker", "--config"])
        .arg(&worker_cfg)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(worker.stdout.take().unwrap()));
    let started = lines.next().and_then(Result::ok).unwrap_or_default();
    let _worker = Server(worker, lines);
    assert!(started.starts_with("cv worker:"), "{started}");
    let (out, report) = doctor(&worker_cfg);
    assert!(out.status.success(), "{report:#}");
    let shards = about(&report, "port", "worker shard");
    assert_eq!(shards.len(), 2, "{report:#}");
    for s in &shards {
        assert_eq!((s["status"].as_str(), s["problem"].as_str()), (Some("warn"), Some("in_use")), "{s}");
        assert!(s["detail"].as_str().unwrap().contains("cv worker"), "{s}");
    }
    let socket = about(&report, "port", "local.sock");
    assert_eq!(socket[0]["status"], "warn", "the running worker's short-circuit socket: {report:#}");

    // The text form: one line per finding, with the status first.
    let text =
        Command::new(env!("CARGO_BIN_EXE_cvctl")).args(["doctor", "--config"]).arg(&worker_cfg).output().unwrap();
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(text.lines().any(|l| l.starts_with("ok   clock") && l.contains(&master_addr)), "{text}");
}

#[test]
fn certificates_from_another_ca_expired_or_with_the_wrong_key_fail_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let ours = cert_init(&dir.path().join("ours"));
    let theirs = cert_init(&dir.path().join("theirs"));
    let write = |name: &str, text: String| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p
    };

    // Another cluster's node certificate.
    let foreign = theirs.join("node.pem");
    let cfg = write("foreign.toml", tls(&ours.join("ca.pem"), &foreign, &theirs.join("node.key")));
    let (out, report) = doctor(&cfg);
    assert_fails(&out, &report, "cert", foreign.to_str().unwrap(), "wrong_ca");

    // Our certificate with another identity's key.
    let key = ours.join("client.key");
    let cfg = write("key.toml", tls(&ours.join("ca.pem"), &ours.join("node.pem"), &key));
    let (out, report) = doctor(&cfg);
    assert_fails(&out, &report, "cert", key.to_str().unwrap(), "key_mismatch");

    // A key file others may read (0644, as a copy made without care would be).
    let exposed = dir.path().join("exposed.key");
    std::fs::copy(ours.join("node.key"), &exposed).unwrap();
    std::fs::set_permissions(&exposed, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    let cfg = write("exposed.toml", tls(&ours.join("ca.pem"), &ours.join("node.pem"), &exposed));
    let (out, report) = doctor(&cfg);
    assert_fails(&out, &report, "cert", exposed.to_str().unwrap(), "key_exposed");

    // A client certificate where a worker needs a node's.
    let client = ours.join("client.pem");
    let text = tls(&ours.join("ca.pem"), &client, &ours.join("client.key"))
        + &worker_section("127.0.0.1:1", 0, &dir.path().join("data"));
    let (out, report) = doctor(&write("client-as-node.toml", text));
    assert_fails(&out, &report, "cert", client.to_str().unwrap(), "wrong_role");

    // An expired node certificate under a CA of our own making, and one that expires soon.
    let made = dir.path().join("made");
    std::fs::create_dir_all(&made).unwrap();
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::default();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![rcgen::KeyUsagePurpose::KeyCertSign, rcgen::KeyUsagePurpose::DigitalSignature];
    let ca = ca_params.self_signed(&ca_key).unwrap();
    std::fs::write(made.join("ca.pem"), ca.pem()).unwrap();
    let issue = |name: &str, not_before, not_after| {
        let mut p = rcgen::CertificateParams::new(vec![cv_net::tls::SERVER_NAME.to_string()]).unwrap();
        p.not_before = not_before;
        p.not_after = not_after;
        p.key_usages = vec![rcgen::KeyUsagePurpose::DigitalSignature];
        p.extended_key_usages =
            vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth, rcgen::ExtendedKeyUsagePurpose::ClientAuth];
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = p.signed_by(&key, &ca, &ca_key).unwrap();
        std::fs::write(made.join(format!("{name}.pem")), cert.pem()).unwrap();
        let key_path = made.join(format!("{name}.key"));
        std::fs::write(&key_path, key.serialize_pem()).unwrap();
        std::fs::set_permissions(&key_path, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
        (made.join(format!("{name}.pem")), made.join(format!("{name}.key")))
    };
    let (expired, expired_key) = issue("expired", rcgen::date_time_ymd(2020, 1, 1), rcgen::date_time_ymd(2021, 1, 1));
    let (out, report) = doctor(&write("expired.toml", tls(&made.join("ca.pem"), &expired, &expired_key)));
    assert_fails(&out, &report, "cert", expired.to_str().unwrap(), "expired");
    let detail = about(&report, "cert", expired.to_str().unwrap())[0]["detail"].as_str().unwrap().to_string();
    assert!(detail.contains("2021-01-01"), "{detail}");

    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
    let in_ten_days = rcgen::date_time_ymd(1970, 1, 1) + (now + Duration::from_secs(10 * 86_400));
    let (soon, soon_key) = issue("soon", rcgen::date_time_ymd(2020, 1, 1), in_ten_days);
    let (out, report) = doctor(&write("soon.toml", tls(&made.join("ca.pem"), &soon, &soon_key)));
    assert!(out.status.success(), "expiring soon is a warning: {report:#}");
    let found = about(&report, "cert", soon.to_str().unwrap());
    assert!(found.iter().any(|c| c["status"] == "warn" && c["problem"] == "expires_soon"), "{report:#}");
}

#[test]
fn a_taken_port_fails_naming_the_address() {
    let dir = tempfile::tempdir().unwrap();
    let certs = cert_init(&dir.path().join("certs"));
    // Shard 1's port is free; shard 0's is held by a plain UDP socket, not a cv server.
    let port = free_udp_pair();
    let squatter = UdpSocket::bind(("127.0.0.1", port)).unwrap();
    let text = node_tls(&certs) + &worker_section("127.0.0.1:1", port, &dir.path().join("data"));
    let cfg = dir.path().join("busy.toml");
    std::fs::write(&cfg, text).unwrap();
    let (out, report) = doctor(&cfg);
    assert_fails(&out, &report, "port", &format!("127.0.0.1:{port}"), "in_use");
    drop(squatter);
    let (out, report) = doctor(&cfg);
    assert!(out.status.success(), "the port is free again: {report:#}");
}

#[test]
fn a_data_dir_this_user_cannot_write_fails_naming_it() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let certs = cert_init(&dir.path().join("certs"));
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o555)).unwrap();
    let cfg = dir.path().join("ro.toml");
    std::fs::write(&cfg, node_tls(&certs) + &worker_section("127.0.0.1:1", 0, &data)).unwrap();
    // Root writes anywhere: run the doctor as `nobody` then, with the config and certificates
    // readable to it (the data directory stays root's, mode 0555).
    let uid = nix_uid();
    let run_as = (uid == 0).then_some(65_534);
    if run_as.is_some() {
        for p in [dir.path(), &certs] {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        // The node's key becomes nobody's, still 0600, as it would be the service user's.
        std::os::unix::fs::chown(certs.join("node.key"), Some(65_534), None).unwrap();
    }
    let (out, report) = doctor_as(&cfg, run_as);
    assert_fails(&out, &report, "data_dir", data.to_str().unwrap(), "not_writable");
    let line = about(&report, "data_dir", data.to_str().unwrap())[0]["detail"].as_str().unwrap().to_string();
    assert!(line.contains("not writable"), "{line}");
    // Writable again, the same config passes.
    std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o777)).unwrap();
    let (out, report) = doctor_as(&cfg, run_as);
    assert!(out.status.success(), "{report:#}");
}

/// This process's effective uid, from /proc (no libc call).
fn nix_uid() -> u32 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("Uid:")).unwrap();
    line.split_whitespace().nth(2).unwrap().parse().unwrap()
}

/// Answers every request as a master from before `MasterTime` answers that kind: the frame
/// is refused while it is read, as an unknown kind (`Malformed`, request id 0).
struct OlderMaster;

impl cv_net::rpc::Service for OlderMaster {
    fn handle<'a>(
        &'a self,
        _peer: &'a cv_net::rpc::Peer,
        frame: cv_wire::Frame,
    ) -> cv_net::rpc::BoxFuture<'a, cv_net::rpc::Reply> {
        let msg = format!("wire UnknownKind: frame kind {}", frame.kind() as u16);
        Box::pin(async move { cv_net::rpc::Reply::error(0, cv_wire::ErrorCode::Malformed, &msg, None) })
    }
}

#[test]
fn a_master_that_does_not_report_its_time_is_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let certs = cert_init(&dir.path().join("certs"));
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let node = cv_net::tls::Identity::load(&cv_net::config::TlsConfig::in_dir(&certs, "node")).unwrap();
    let transport = cv_net::quic::TransportSettings::default();
    let _in_rt = rt.enter();
    let ep = cv_net::rpc::server_endpoint("127.0.0.1:0".parse().unwrap(), &node, &transport).unwrap();
    let addr = ep.local_addr().unwrap();
    let role = cv_wire::msg::Role::Master;
    rt.spawn(cv_net::rpc::serve(ep.clone(), std::sync::Arc::new(OlderMaster), role, "old".into(), Default::default()));

    let cfg = dir.path().join("client.toml");
    let client_tls = tls(&certs.join("ca.pem"), &certs.join("client.pem"), &certs.join("client.key"));
    std::fs::write(&cfg, format!("{client_tls}[client]\nmaster = \"{addr}\"\n")).unwrap();
    let (out, report) = doctor(&cfg);
    assert!(out.status.success(), "{report:#}");
    let clock = about(&report, "clock", &addr.to_string());
    assert_eq!(
        (clock[0]["status"].as_str(), clock[0]["problem"].as_str()),
        (Some("warn"), Some("no_time")),
        "{report:#}"
    );
    assert!(clock[0]["detail"].as_str().unwrap().contains("does not report its time"), "{report:#}");
    // A client's own identity is what a client config should carry.
    let role = about(&report, "cert", "client.pem");
    assert!(role.iter().any(|c| c["status"] == "ok" && c["detail"].as_str().unwrap().contains("client certificate")));
    ep.close(0u32.into(), b"done");
}
