//! `cvctl mount`, `load`, `free` and `report` through the built binary,
//! against a real local cluster and an in-process S3 server.

use cv_testkit::{Op, S3Server};
use cv_tools::cluster::{ClusterOptions, LocalCluster};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

const BUCKET: &str = "cvtest";
/// The master's block size (`ClusterOptions` has no knob for it).
const BLOCK: usize = 4 << 20;

/// A cluster, an S3 server with one bucket, and every output seen so far
/// (to check that no secret was ever printed).
struct Env {
    s3: S3Server,
    cluster: Option<LocalCluster>,
    cfg: PathBuf,
    dir: tempfile::TempDir,
    seen: std::sync::Mutex<Vec<String>>,
}

impl Env {
    async fn start() -> Env {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("s3");
        std::fs::create_dir_all(&root).unwrap();
        let s3 = S3Server::start(&root).unwrap();
        s3.create_bucket(BUCKET).unwrap();
        let cluster = LocalCluster::start(&ClusterOptions::ephemeral(&dir.path().join("c"))).await.unwrap();
        // The operator's file: mounts, load and free are theirs.
        let cfg = cluster.admin_config().to_path_buf();
        Env { s3, cluster: Some(cluster), cfg, dir, seen: Default::default() }
    }

    async fn stop(mut self) {
        self.cluster.take().unwrap().shutdown().await.unwrap();
    }

    /// `cvctl <cmd> --config <cfg> <rest...>`.
    fn run(&self, args: &[&str]) -> Output {
        let mut all = vec![args[0], "--config", self.cfg.to_str().unwrap()];
        all.extend_from_slice(&args[1..]);
        let out = Command::new(env!("CARGO_BIN_EXE_cvctl")).args(&all).output().expect("run cvctl");
        let mut seen = self.seen.lock().unwrap();
        seen.push(String::from_utf8_lossy(&out.stdout).into_owned());
        seen.push(String::from_utf8_lossy(&out.stderr).into_owned());
        out
    }

    fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(out.status.success(), "cvctl {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).expect("utf-8 output")
    }

    fn fails(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(!out.status.success(), "cvctl {args:?} should fail; printed {}", String::from_utf8_lossy(&out.stdout));
        String::from_utf8_lossy(&out.stderr).into_owned()
    }

    fn cat(&self, path: &str) -> Vec<u8> {
        let out = self.run(&["fs", "cat", path]);
        assert!(out.status.success(), "cat {path}: {}", String::from_utf8_lossy(&out.stderr));
        out.stdout
    }

    fn gets(&self) -> usize {
        self.s3.count(|r| matches!(r.op, Op::Get | Op::RangedGet))
    }

    /// `endpoint` and `region` as -o flags.
    fn endpoint_opts(&self) -> Vec<String> {
        vec!["-o".into(), format!("endpoint={}", self.s3.endpoint()), "-o".into(), "region=us-east-1".into()]
    }

    /// No output so far carries the access key or the secret.
    fn assert_no_secret_printed(&self) {
        for out in self.seen.lock().unwrap().iter() {
            assert!(!out.contains(S3Server::SECRET_KEY), "secret printed: {out}");
            assert!(!out.contains(S3Server::ACCESS_KEY), "access key printed: {out}");
        }
    }
}

fn args<'a>(fixed: &[&'a str], more: &'a [String]) -> Vec<&'a str> {
    fixed.iter().copied().chain(more.iter().map(String::as_str)).collect()
}

fn data(len: usize, seed: u32) -> Vec<u8> {
    (0..len as u32).map(|i| (i.wrapping_mul(2654435761).wrapping_add(seed) >> 13) as u8).collect()
}

fn json(s: &str) -> serde_json::Value {
    serde_json::from_str(s).unwrap_or_else(|e| panic!("not JSON ({e}): {s}"))
}

fn write_options_file(dir: &Path, endpoint: &str, secret: &str) -> PathBuf {
    let p = dir.join("s3-options.toml");
    std::fs::write(
        &p,
        format!(
            "# credentials stay off the command line\nendpoint = \"{endpoint}\"\nregion = \"us-east-1\"\n\
             access_key_id = \"{}\"\nsecret_access_key = \"{secret}\"\ncv.ttl = \"60s\"\n",
            S3Server::ACCESS_KEY
        ),
    )
    .unwrap();
    p
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mount_add_ls_rm_keep_secrets_out_of_every_output() {
    let env = Env::start().await;
    env.s3.put_object(BUCKET, "data/a.txt", b"hello").unwrap();
    let env = tokio::task::spawn_blocking(move || {
        // Credentials as -o flags.
        let mut opts = env.endpoint_opts();
        opts.extend(["-o".into(), format!("access_key_id={}", S3Server::ACCESS_KEY)]);
        opts.extend(["-o".into(), format!("secret_access_key={}", S3Server::SECRET_KEY)]);
        let url = format!("s3://{BUCKET}/data");
        let out = env.ok(&args(&["mount", "add", &url, "/s3", "--mode", "cache"], &opts));
        assert!(out.contains("/s3") && out.contains("cache"), "{out}");

        // Credentials in an options file; -o overrides a key of the file.
        let file = write_options_file(env.dir.path(), "http://127.0.0.1:1", S3Server::SECRET_KEY);
        let more = vec!["-o".to_owned(), format!("endpoint={}", env.s3.endpoint())];
        let file_arg = ["--options-file", file.to_str().unwrap()];
        env.ok(&args(&[&["mount", "add", &url, "/s3f", "--mode", "cache"][..], &file_arg].concat(), &more));

        let ls = env.ok(&["mount", "ls"]);
        let lines: Vec<&str> = ls.lines().collect();
        assert_eq!(lines.len(), 2, "{ls}");
        for (line, point) in lines.iter().zip(["/s3", "/s3f"]) {
            assert!(line.starts_with(point), "{ls}");
            assert!(line.contains("cache") && line.contains("s3://cvtest/data"), "{ls}");
            assert!(line.contains("access_key_id=***") && line.contains("secret_access_key=***"), "{ls}");
            assert!(line.contains(&format!("endpoint={}", env.s3.endpoint())), "{ls}");
        }
        let v = json(&env.ok(&["mount", "ls", "--json"]));
        let mounts = v.as_array().unwrap();
        assert_eq!(mounts.len(), 2, "{v}");
        assert_eq!(mounts[0]["cv_path"], "/s3");
        assert_eq!(mounts[0]["mode"], "cache");
        assert_eq!(mounts[0]["ufs_url"], url.as_str());
        assert_eq!(mounts[0]["options"]["access_key_id"], "***");
        assert_eq!(mounts[0]["options"]["secret_access_key"], "***");
        assert_eq!(mounts[0]["options"]["region"], "us-east-1");
        assert_eq!(mounts[1]["options"]["cv.ttl"], "60s");
        assert_eq!(mounts[1]["options"]["secret_access_key"], "***");

        // The mount works: its object reads back.
        assert_eq!(env.cat("/s3f/a.txt"), b"hello");

        // A malformed options file is refused without quoting its content.
        let bad = env.dir.path().join("bad.toml");
        std::fs::write(&bad, format!("region = \"us-east-1\"\nsecret_access_key = {}\n", S3Server::SECRET_KEY))
            .unwrap();
        let err =
            env.fails(&["mount", "add", &url, "/bad", "--mode", "cache", "--options-file", bad.to_str().unwrap()]);
        assert!(err.contains("line 2"), "{err}");
        // A bad -o is refused without echoing it.
        let err = env.fails(&["mount", "add", &url, "/bad", "--mode", "cache", "-o", S3Server::SECRET_KEY]);
        assert!(err.contains("KEY=VALUE"), "{err}");

        // --mode fs is sent as such.
        env.ok(&args(&["mount", "add", &format!("s3://{BUCKET}/out"), "/fsm", "--mode", "fs"], &opts));
        let v = json(&env.ok(&["mount", "ls", "--json"]));
        assert_eq!(v[0]["cv_path"], "/fsm", "{v}");
        assert_eq!(v[0]["mode"], "fs", "{v}");
        assert_eq!(v[0]["options"]["secret_access_key"], "***", "{v}");
        // A file written under it that the store refuses to take: the mount is not removed
        // while the file is not exported, unless forced.
        env.s3.set_fault(cv_testkit::Fault::Status(503));
        let local = env.dir.path().join("local.txt");
        std::fs::write(&local, b"not yet exported").unwrap();
        env.ok(&["fs", "put", local.to_str().unwrap(), "/fsm/x.txt"]);
        let err = env.fails(&["mount", "rm", "/fsm"]);
        assert!(err.contains("1 file(s) not yet exported"), "{err}");
        // Still refusing while forced: were the store to take the file in between, the file
        // would be an exported copy, which the rm removes from cv (the store then holds it).
        env.ok(&["mount", "rm", "/fsm", "--force"]);
        env.s3.set_fault(cv_testkit::Fault::None);

        // The unexported file stays in cv (forced: it is cv's only copy).
        assert_eq!(env.cat("/fsm/x.txt"), b"not yet exported");

        env.ok(&["mount", "rm", "/s3"]);
        assert!(env.ok(&["fs", "ls", "/s3f"]).contains("/s3f/a.txt"), "listed before the rm");
        env.ok(&["mount", "rm", "/s3f"]);
        // The entries listed from the store go with the mount: none is left to fail a read.
        let left = env.ok(&["fs", "ls", "/s3f"]);
        assert!(!left.contains("a.txt"), "entries of a removed mount are still listed: {left}");
        assert_eq!(env.ok(&["mount", "ls"]).trim(), "");
        assert_eq!(json(&env.ok(&["mount", "ls", "--json"])), serde_json::json!([]));
        env.assert_no_secret_printed();
        env
    })
    .await
    .unwrap();
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mount_add_fails_clearly_on_a_bad_endpoint_or_a_wrong_secret() {
    let env = Env::start().await;
    let env = tokio::task::spawn_blocking(move || {
        let url = format!("s3://{BUCKET}/data");
        let creds = |secret: &str| {
            vec![
                "-o".to_owned(),
                format!("access_key_id={}", S3Server::ACCESS_KEY),
                "-o".to_owned(),
                format!("secret_access_key={secret}"),
                "-o".to_owned(),
                "region=us-east-1".to_owned(),
            ]
        };

        // Nothing listens on port 1.
        let mut opts = creds(S3Server::SECRET_KEY);
        opts.extend(["-o".into(), "endpoint=http://127.0.0.1:1".into()]);
        let t = Instant::now();
        let err = env.fails(&args(&["mount", "add", &url, "/s3", "--mode", "cache"], &opts));
        assert!(t.elapsed() < Duration::from_secs(30), "took {:?}", t.elapsed());
        eprintln!("bad endpoint: {err}");
        assert!(err.starts_with("cvctl: ") && err.contains("127.0.0.1:1"), "{err}");

        // The server refuses a wrong signature.
        let mut opts = creds("not-the-secret");
        opts.extend(["-o".into(), format!("endpoint={}", env.s3.endpoint())]);
        let err = env.fails(&args(&["mount", "add", &url, "/s3", "--mode", "cache"], &opts));
        eprintln!("wrong secret: {err}");
        assert!(err.contains("PermissionDenied"), "{err}");
        assert!(!err.contains("not-the-secret"), "{err}");

        // Neither was recorded.
        assert_eq!(env.ok(&["mount", "ls"]).trim(), "");
        env.assert_no_secret_printed();
        env
    })
    .await
    .unwrap();
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cat_load_free_and_sync_through_a_cache_mount() {
    let env = Env::start().await;
    // Each object is larger than the master's default tail (64 KiB), so its
    // reads need blocks; big.bin spans two blocks.
    let objects = [
        ("dir/small.bin", data(100 << 10, 1)),
        ("dir/mid.bin", data(1 << 20, 2)),
        ("dir/big.bin", data(BLOCK + 123_457, 3)),
    ];
    for (key, bytes) in &objects {
        env.s3.put_object(BUCKET, &format!("data/{key}"), bytes).unwrap();
    }
    env.s3.put_object(BUCKET, "data/top.txt", b"first version").unwrap();
    let env = tokio::task::spawn_blocking(move || {
        let url = format!("s3://{BUCKET}/data");
        let file = write_options_file(env.dir.path(), &env.s3.endpoint(), S3Server::SECRET_KEY);
        env.ok(&["mount", "add", &url, "/s3", "--mode", "cache", "--options-file", file.to_str().unwrap()]);

        // fs ls and fs cat see the bucket.
        let ls = env.ok(&["fs", "ls", "/s3"]);
        assert!(ls.contains("/s3/dir") && ls.contains("/s3/top.txt"), "{ls}");
        let v = json(&env.ok(&["fs", "ls", "/s3/dir", "--json"]));
        let lens: Vec<(String, u64)> = v
            .as_array()
            .unwrap()
            .iter()
            .map(|e| (e["path"].as_str().unwrap().to_owned(), e["length"].as_u64().unwrap()))
            .collect();
        for (key, bytes) in &objects {
            assert!(lens.contains(&(format!("/s3/{key}"), bytes.len() as u64)), "{v}");
        }
        assert_eq!(env.cat("/s3/top.txt"), b"first version");

        // load brings in every block.
        let t = Instant::now();
        let v = json(&env.ok(&["load", "/s3/dir", "--json", "--parallel", "4"]));
        let load_time = t.elapsed();
        let total: usize = objects.iter().map(|(_, b)| b.len()).sum();
        assert_eq!(v["files"], 3, "{v}");
        assert_eq!(v["bytes"], total as u64, "{v}");
        assert_eq!(v["failed"], 0, "{v}");
        eprintln!("load of {total} bytes in 3 files: {load_time:?}");
        // Text summary; a second load is all cache hits.
        let before = env.gets();
        let text = env.ok(&["load", "/s3/dir"]);
        assert!(text.contains("loaded 3 files") && text.contains(&format!("{total} bytes")), "{text}");
        assert!(text.contains("0 failed"), "{text}");
        assert_eq!(env.gets(), before, "a second load fetched again");

        // Reading loaded files costs no GET.
        let before = env.gets();
        for (key, bytes) in &objects {
            assert!(env.cat(&format!("/s3/{key}")) == *bytes, "{key}: other bytes");
        }
        assert_eq!(env.gets(), before, "reads after load went to the store");

        // free drops the blocks (the worker deletes them at its next heartbeat):
        // reads fetch again and return the same bytes.
        let v = json(&env.ok(&["free", "/s3/dir", "--json"]));
        assert_eq!(v["files"], 3, "{v}");
        assert_eq!(v["blocks"], 4, "{v}");
        assert_eq!(v["skipped"], 0, "{v}");
        for (key, bytes) in &objects {
            let deadline = Instant::now() + Duration::from_secs(10);
            loop {
                let before = env.gets();
                assert!(env.cat(&format!("/s3/{key}")) == *bytes, "{key}: other bytes after free");
                if env.gets() > before {
                    break;
                }
                assert!(Instant::now() < deadline, "{key}: no GET within 10 s of free");
                std::thread::sleep(Duration::from_millis(200));
            }
        }
        let text = env.ok(&["free", "/s3/top.txt"]);
        assert!(text.contains("of 1 files") && text.contains("skipped 0"), "{text}");

        // A replaced object is served in its old version until mount sync.
        env.s3.put_object(BUCKET, "data/top.txt", b"second, longer version").unwrap();
        let replaced = data(1 << 20, 99);
        env.s3.put_object(BUCKET, "data/dir/mid.bin", &replaced).unwrap();
        assert_eq!(env.cat("/s3/top.txt"), b"first version");
        env.ok(&["mount", "sync", "/s3"]);
        assert_eq!(env.cat("/s3/top.txt"), b"second, longer version");
        assert!(env.cat("/s3/dir/mid.bin") == replaced, "mid.bin: old version served after sync");

        let report = json(&env.ok(&["report", "--json"]));
        assert_eq!(report["export"]["backlog_files"], 0, "{report}");
        assert!(report["export"]["lag_ms"].is_u64(), "{report}");
        let text = env.ok(&["report"]);
        assert!(text.contains("export backlog 0 files"), "{text}");

        env.ok(&["mount", "rm", "/s3"]);
        assert_eq!(env.ok(&["mount", "ls"]).trim(), "");
        env.assert_no_secret_printed();
        env
    })
    .await
    .unwrap();
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn report_shows_the_export_of_an_fs_mode_mount() {
    let env = Env::start().await;
    let env = tokio::task::spawn_blocking(move || {
        let file = write_options_file(env.dir.path(), &env.s3.endpoint(), S3Server::SECRET_KEY);
        let url = format!("s3://{BUCKET}/out");
        env.ok(&["mount", "add", &url, "/out", "--mode", "fs", "--options-file", file.to_str().unwrap()]);
        let text = env.ok(&["report"]);
        assert!(text.contains("export backlog 0 files, 0 bytes"), "{text}");

        let bytes = data(300 << 10, 7);
        let local = env.dir.path().join("x.bin");
        std::fs::write(&local, &bytes).unwrap();
        env.ok(&["fs", "put", local.to_str().unwrap(), "/out/x.bin"]);
        let deadline = Instant::now() + Duration::from_secs(20);
        let report = loop {
            let v = json(&env.ok(&["report", "--json"]));
            let e = &v["export"];
            for k in ["backlog_files", "backlog_bytes", "lag_ms", "exported", "failures"] {
                assert!(e[k].is_u64(), "export.{k} missing: {v}");
            }
            if e["exported"].as_u64() >= Some(1) && e["backlog_files"] == 0 {
                break v;
            }
            assert!(Instant::now() < deadline, "not exported within 20 s: {v}");
            std::thread::sleep(Duration::from_millis(200));
        };
        assert_eq!(report["export"]["backlog_bytes"], 0, "{report}");
        let stored = env.dir.path().join("s3").join(BUCKET).join("out/x.bin");
        assert!(std::fs::read(&stored).ok() == Some(bytes), "the store does not hold x.bin as written");
        let text = env.ok(&["report"]);
        assert!(text.contains("export backlog 0 files, 0 bytes") && text.contains("exported 1"), "{text}");
        // The file is now a copy of its object: free may drop its blocks.
        let v = json(&env.ok(&["free", "/out", "--json"]));
        assert_eq!(v["files"], 1, "{v}");
        assert_eq!(v["skipped"], 0, "{v}");
        env.assert_no_secret_printed();
        env
    })
    .await
    .unwrap();
    env.stop().await;
}

#[test]
fn help_tells_how_to_keep_secrets_off_the_command_line_and_that_load_resumes() {
    let help = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_cvctl")).args(args).output().unwrap();
        assert!(out.status.success());
        String::from_utf8(out.stdout).unwrap()
    };
    let top = help(&["--help"]);
    for cmd in ["mount", "load", "free"] {
        assert!(top.contains(cmd), "--help lacks {cmd}");
    }
    let add = help(&["mount", "add", "--help"]);
    assert!(add.contains("--options-file") && add.contains("shell history"), "{add}");
    let load = help(&["load", "--help"]);
    assert!(load.contains("Resumable") && load.contains("--parallel"), "{load}");
    let out = Command::new(env!("CARGO_BIN_EXE_cvctl")).args(["mount", "add", "s3://b", "/m"]).output().unwrap();
    assert!(!out.status.success(), "--mode is required");
}
