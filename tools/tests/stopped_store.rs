//! Issue 41: an object store that hangs. The store runs in a process of its own (this test
//! binary started again, running only [`store_process`]), so it can be stopped with SIGSTOP
//! as a hung store is: its socket still takes connections, nothing answers.

use cv_client::{Client, MountMode};
use cv_testkit::S3Server;
use cv_tools::cluster::{ClusterOptions, LocalCluster};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Set in the store process: the directory its files live in.
const STORE_DIR: &str = "CV_TEST_STORE_PROCESS_DIR";

/// Not a test of its own: in the process [`StoreProcess::start`] starts, serves an S3 store
/// (bucket `lake`, object `v/x`) and prints its endpoint; elsewhere it returns at once.
#[test]
fn store_process() {
    let Ok(dir) = std::env::var(STORE_DIR) else { return };
    let s3 = S3Server::start(std::path::Path::new(&dir)).unwrap();
    s3.create_bucket("lake").unwrap();
    s3.put_object("lake", "v/x", &content()).unwrap();
    println!("ENDPOINT {}", s3.endpoint());
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}

fn content() -> Vec<u8> {
    (0..300_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect()
}

/// The store's process; killed (after SIGCONT) when dropped.
struct StoreProcess {
    child: Child,
    endpoint: String,
    _dir: tempfile::TempDir,
}

impl StoreProcess {
    fn start() -> StoreProcess {
        let dir = tempfile::tempdir().unwrap();
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "store_process", "--nocapture", "--test-threads", "1"])
            .env(STORE_DIR, dir.path())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let out = BufReader::new(child.stdout.take().unwrap());
        let endpoint = out
            .lines()
            .map_while(Result::ok)
            // libtest prints `test store_process ... ` on the same line first.
            .find_map(|l| l.split_once("ENDPOINT ").map(|(_, e)| e.trim().to_owned()))
            .expect("the store process printed no endpoint");
        StoreProcess { child, endpoint, _dir: dir }
    }

    fn signal(&self, sig: &str) {
        let ok = Command::new("kill").args(["-s", sig, &self.child.id().to_string()]).status().unwrap().success();
        assert!(ok, "kill -s {sig} of the store process failed");
    }
}

impl Drop for StoreProcess {
    fn drop(&mut self) {
        let _ = Command::new("kill").args(["-s", "CONT", &self.child.id().to_string()]).status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn read_all(client: &Client, path: &str) -> Vec<u8> {
    let f = client.open(path).await.unwrap();
    let mut buf = vec![0u8; f.status().length as usize];
    let n = f.read_at(0, &mut buf).await.unwrap();
    buf.truncate(n);
    buf
}

/// A cached cache-mode file stays readable, within the re-validation bound (1 s), while its
/// store is stopped past `cv.ttl`; so does its directory's listing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_store_past_the_ttl_still_serves_cached_files_within_1_5_s() {
    let store = StoreProcess::start();
    let dir = tempfile::tempdir().unwrap();
    let cluster = LocalCluster::start(&ClusterOptions::ephemeral(dir.path())).await.unwrap();
    let client = cluster.client().await.unwrap();
    let opts = vec![
        ("endpoint".into(), store.endpoint.clone()),
        ("region".into(), S3Server::REGION.into()),
        ("access_key_id".into(), S3Server::ACCESS_KEY.into()),
        ("secret_access_key".into(), S3Server::SECRET_KEY.into()),
        ("cv.ttl".into(), "500ms".into()),
    ];
    client.mount("s3://lake/v", "/v", MountMode::Cache, opts).await.unwrap();
    assert_eq!(read_all(&client, "/v/x").await, content());
    client.list("/v").await.unwrap();

    store.signal("STOP");
    tokio::time::sleep(Duration::from_millis(800)).await; // past cv.ttl
    let started = Instant::now();
    assert_eq!(read_all(&client, "/v/x").await, content());
    let read = started.elapsed();
    let started = Instant::now();
    let listed = client.list("/v").await.unwrap();
    let list = started.elapsed();
    println!("with the store stopped: cached file read in {read:?}, listed in {list:?}");
    assert!(read < Duration::from_millis(1_500), "the cached file was served only after {read:?}");
    assert!(list < Duration::from_millis(1_500), "the listing was served only after {list:?}");
    assert!(listed.iter().any(|e| e.path == "/v/x"), "the listing lost /v/x: {listed:?}");

    store.signal("CONT");
    assert_eq!(read_all(&client, "/v/x").await, content());
    cluster.shutdown().await.unwrap();
}
