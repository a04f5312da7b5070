//! Revocation, black-box: `cvctl up` (a master and a worker process tree), two client
//! identities from `cvctl cert issue`. Alice reads over long-lived connections, an open file's
//! block from the worker and stats from the master, as does Bob; `cvctl cert revoke` with the
//! operator's file cuts Alice off on both paths within seconds while Bob reads on, a new
//! connection of hers is refused at the hello naming the revocation, and a certificate issued
//! to her afterwards (a renewal) works. Prints the time from the revocation to her last
//! successful request on each path (the issue's measure).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cv_client::Client;
use cv_net::tls::Identity;

struct Up(Child);

impl Drop for Up {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `cvctl up` in `dir`; its client and admin config files.
fn up(dir: &Path) -> (Up, PathBuf, PathBuf) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_cvctl"))
        .args(["up", "--shards", "1", "--capacity", "256MiB", "--memory", "16MiB", "--master-port", "0"])
        .args(["--worker-port", "0", "--dir"])
        .arg(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn cvctl up");
    let out = child.stdout.take().unwrap();
    let up = Up(child);
    let (mut client, mut admin) = (None, None);
    for line in BufReader::new(out).lines() {
        let line = line.expect("cvctl up output");
        if let Some(p) = line.trim().strip_prefix("client config ") {
            client = Some(PathBuf::from(p.trim()));
        }
        if let Some(p) = line.trim().strip_prefix("admin config ") {
            admin = Some(PathBuf::from(p.trim()));
        }
        if line.starts_with("Ctrl-C stops it") {
            return (up, client.expect("client config"), admin.expect("admin config"));
        }
    }
    panic!("cvctl up exited before it was ready");
}

fn cvctl(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cvctl")).args(args).output().expect("run cvctl")
}

fn ok(out: Output, what: &str) -> String {
    assert!(out.status.success(), "{what}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A client identity `name` from `cvctl cert issue`, as a config file beside `client` (which
/// names `cvctl up`'s client certificate), written as `<out>.toml`.
fn issue(certs: &Path, client: &Path, name: &str, out: &Path) -> PathBuf {
    let o = out.to_str().unwrap();
    ok(
        cvctl(&["cert", "issue", "--dir", certs.to_str().unwrap(), "--role", "client", "--name", name, "--out", o]),
        "issue",
    );
    let text = std::fs::read_to_string(client)
        .unwrap()
        .replace(&certs.join("client.pem").display().to_string(), &format!("{o}.pem"))
        .replace(&certs.join("client.key").display().to_string(), &format!("{o}.key"));
    let cfg = PathBuf::from(format!("{o}.toml"));
    std::fs::write(&cfg, text).unwrap();
    cfg
}

/// What one reader saw: when its last success was, and its first failure.
#[derive(Default)]
struct Seen {
    successes: u64,
    last_ok: Option<Instant>,
    first_error: Option<(Instant, String)>,
}

/// Reads until `stop`: the first 64 KiB of an already open file (a worker's shard, over one
/// connection) and a stat (the master), each in its own loop, ~every 20 ms.
async fn read_on(cfg: PathBuf, stop: Arc<std::sync::atomic::AtomicBool>) -> (Seen, Seen) {
    let c = cv_tools::config::CvConfig::load(&cfg).unwrap();
    let identity = Identity::load(&c.common.tls).unwrap();
    let mut settings = c.common.client.clone();
    settings.short_circuit = false; // every read over QUIC, where the worker checks the peer
    let client = Client::connect(settings, &identity, &c.common.transport).await.unwrap();
    let file = client.open("/data.bin").await.unwrap();
    let (worker, master) = (Arc::new(Mutex::new(Seen::default())), Arc::new(Mutex::new(Seen::default())));
    let note = |seen: &Mutex<Seen>, r: Result<(), String>| {
        let mut s = seen.lock().unwrap();
        match r {
            Ok(()) => {
                s.successes += 1;
                s.last_ok = Some(Instant::now());
            }
            Err(e) => {
                s.first_error.get_or_insert((Instant::now(), e));
            }
        }
    };
    let blocks = async {
        let mut buf = vec![0u8; 64 << 10];
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            let r = file.read_at(0, &mut buf).await.map_err(|e| e.to_string());
            let r = r.and_then(|n| if buf[..n] == pattern()[..n] { Ok(()) } else { Err("wrong bytes".into()) });
            note(&worker, r);
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    let stats = async {
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            note(&master, client.stat("/data.bin").await.map(|_| ()).map_err(|e| e.to_string()));
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::join!(blocks, stats);
    let take = |m: Arc<Mutex<Seen>>| std::mem::take(&mut *m.lock().unwrap());
    (take(worker), take(master))
}

fn pattern() -> Vec<u8> {
    (0..(8u32 << 20)).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8).collect()
}

#[test]
fn a_revoked_client_is_cut_off_mid_read_and_refused_and_others_read_on() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("cv");
    let (_up, client, admin) = up(&data);
    let certs = data.join("certs");
    let alice = issue(&certs, &client, "alice", &dir.path().join("alice"));
    let bob = issue(&certs, &client, "bob", &dir.path().join("bob"));
    let local = dir.path().join("data.bin");
    std::fs::write(&local, pattern()).unwrap();
    ok(cvctl(&["fs", "--config", admin.to_str().unwrap(), "put", local.to_str().unwrap(), "/data.bin"]), "put");

    let rt = tokio::runtime::Runtime::new().unwrap();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let alice_reads = rt.spawn(read_on(alice.clone(), stop.clone()));
    let bob_reads = rt.spawn(read_on(bob.clone(), stop.clone()));
    std::thread::sleep(Duration::from_secs(2));

    // Not for a client: a client certificate may not revoke.
    let out = cvctl(&["cert", "revoke", "--config", bob.to_str().unwrap(), "alice"]);
    assert!(!out.status.success(), "bob revoked alice");
    assert!(String::from_utf8_lossy(&out.stderr).contains("needs an admin certificate"));

    let said = ok(cvctl(&["cert", "revoke", "--config", admin.to_str().unwrap(), "--name", "alice"]), "revoke");
    let revoked_at = Instant::now();
    assert!(said.contains("alice"), "{said}");
    std::thread::sleep(Duration::from_secs(8));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let (a_worker, a_master) = rt.block_on(alice_reads).unwrap();
    let (b_worker, b_master) = rt.block_on(bob_reads).unwrap();

    for (path, seen) in [("worker", &a_worker), ("master", &a_master)] {
        let last = seen.last_ok.expect("alice read before the revocation");
        let (failed_at, why) = seen.first_error.as_ref().unwrap_or_else(|| panic!("alice still reads from the {path}"));
        let after = last.saturating_duration_since(revoked_at);
        println!(
            "alice via the {path}: {} reads; last success {} ms after `cert revoke` returned (first failure {} ms after: {why})",
            seen.successes,
            if last > revoked_at {
                after.as_millis() as i64
            } else {
                -(revoked_at.duration_since(last).as_millis() as i64)
            },
            failed_at.saturating_duration_since(revoked_at).as_millis(),
        );
        // The worker hears of it with its next heartbeat (every 500 ms in `cvctl up`), the master at once.
        assert!(
            last < revoked_at + Duration::from_secs(5),
            "alice read from the {path} {after:?} after the revocation"
        );
    }
    for (path, seen) in [("worker", &b_worker), ("master", &b_master)] {
        assert!(
            seen.first_error.is_none(),
            "bob's reads from the {path} failed: {:?}",
            seen.first_error.as_ref().map(|e| &e.1)
        );
        assert!(seen.last_ok.is_some_and(|t| t > revoked_at + Duration::from_secs(6)), "bob read on from the {path}");
    }

    // A new connection of hers is refused at the hello, saying why.
    let out = cvctl(&["fs", "--config", alice.to_str().unwrap(), "cat", "/data.bin"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("revoked"), "alice's new connection: {err}");
    // The list says so; a certificate issued to her afterwards (a renewal) is not covered.
    let list = ok(cvctl(&["cert", "revoked", "--config", admin.to_str().unwrap()]), "revoked");
    assert!(list.contains("\"alice\"") && list.contains("1 entries"), "{list}");
    let renewed = issue(&certs, &client, "alice", &dir.path().join("alice2"));
    let out = cvctl(&["fs", "--config", renewed.to_str().unwrap(), "cat", "/data.bin"]);
    assert!(out.status.success(), "alice's renewed certificate: {}", String::from_utf8_lossy(&out.stderr));
    assert!(out.stdout == pattern(), "alice's renewed certificate reads the file");

    // By serial (a certificate file): bob's, and only his.
    let bob_pem = dir.path().join("bob.pem");
    ok(cvctl(&["cert", "revoke", "--config", admin.to_str().unwrap(), bob_pem.to_str().unwrap()]), "revoke bob");
    let out = cvctl(&["fs", "--config", bob.to_str().unwrap(), "cat", "/data.bin"]);
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("revoked"));
    let out = cvctl(&["fs", "--config", renewed.to_str().unwrap(), "cat", "/data.bin"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}
