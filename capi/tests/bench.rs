//! Binding overhead, side by side in one run against one local cluster:
//! open + footer, a 4 KiB read inside the tail (no network: the binding's
//! own cost), and 64 KiB positioned reads, through the Rust SDK, the C ABI
//! (a C program) and JNI (a Java program). Each client runs in its own
//! process, so none shares a runtime with the cluster.
//!
//! A measurement, not a check; run by hand in release:
//! `cargo test -p cv-capi --release --test bench -- --ignored --nocapture binding_overhead`

mod common;

use common::{compile_c, compile_java, java, pattern, run};
use cv_client::Client;
use cv_tools::cluster::{ClusterOptions, LocalCluster};
use std::collections::BTreeMap;
use std::process::Command;
use std::time::Instant;

const ITERS: usize = 3000;
const ROUNDS: usize = 5;
const CHILD_ENV: &str = "CV_CAPI_BENCH_CHILD";
const PARQUET: &str = "/bench/t.parquet";
const DATA: &str = "/bench/data";
const DATA_LEN: usize = 32 << 20;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: run by hand in release"]
async fn binding_overhead() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = LocalCluster::start(&ClusterOptions::ephemeral(dir.path())).await.unwrap();
    let client = cluster.client().await.unwrap();
    client.mkdir("/bench", true).await.unwrap();
    let local = dir.path().join("t.parquet");
    cv_benches::parquet_gen::write_file(&local, 8 << 20, 5).unwrap();
    let mut w = client.create(PARQUET, false).await.unwrap();
    w.write(&std::fs::read(&local).unwrap()).await.unwrap();
    w.close().await.unwrap();
    let data: Vec<u8> = (0..DATA_LEN as u64).map(pattern).collect();
    let mut w = client.create(DATA, false).await.unwrap();
    w.write(&data).await.unwrap();
    w.close().await.unwrap();
    client.close();

    let c_exe = compile_c("cv_bench.c", dir.path(), true);
    let classes = dir.path().join("classes");
    compile_java("CvJavaBench", &classes);
    let args = [cluster.client_config().display().to_string(), PARQUET.into(), DATA.into(), ITERS.to_string()];

    let mut rust = Command::new(std::env::current_exe().unwrap());
    rust.args(["rust_client_child", "--exact", "--ignored", "--nocapture"]).env(CHILD_ENV, args.join("\n"));
    let mut c = Command::new(c_exe);
    c.args(&args);
    let mut j = java("CvJavaBench", &classes, false);
    j.args(&args);
    // Rounds alternate the three clients so that load from elsewhere on
    // the machine falls on all of them alike; the median round is shown.
    let results = tokio::task::spawn_blocking(move || {
        let mut all: BTreeMap<(String, String), Vec<Vec<f64>>> = BTreeMap::new();
        for _ in 0..ROUNDS {
            for cmd in [&mut rust, &mut c, &mut j] {
                let out = run(cmd);
                for line in String::from_utf8_lossy(&out.stdout).lines().filter(|l| l.starts_with("RESULT ")) {
                    let f: Vec<&str> = line.split_whitespace().collect();
                    let nums: Vec<f64> = f[3..6].iter().map(|v| v.parse::<f64>().unwrap() / 1000.0).collect();
                    all.entry((f[2].to_string(), f[1].to_string())).or_default().push(nums);
                }
            }
        }
        all
    })
    .await
    .unwrap();
    let median = |runs: &[Vec<f64>], i: usize| {
        let mut v: Vec<f64> = runs.iter().map(|r| r[i]).collect();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };

    let best = |runs: &[Vec<f64>]| runs.iter().map(|r| r[0]).fold(f64::INFINITY, f64::min);
    println!(
        "\nbinding overhead: {ROUNDS} rounds x {ITERS} iterations, µs; best and median round of p50, \
         median round of p99 and mean; delta = best p50 - Rust best p50 (other load on the machine \
         moves whole rounds, so the best round is the steadiest estimate)"
    );
    for op in ["open_footer", "tail_read_4k", "pread_64k"] {
        let base = best(&results[&(op.to_string(), "rust".to_string())]);
        for lang in ["rust", "rust_blocking", "rust_capi_ops", "c", "java"] {
            let Some(r) = results.get(&(op.to_string(), lang.to_string())) else { continue };
            let (b, p50, p99, mean) = (best(r), median(r, 0), median(r, 1), median(r, 2));
            println!(
                "{op:<12} {lang:<14} best p50 {b:>8.2}  p50 {p50:>8.2}  p99 {p99:>8.2}  mean {mean:>8.2}  delta {:+.2}",
                b - base
            );
        }
    }
    cluster.shutdown().await.unwrap();
}

async fn open_footer(client: &Client, path: &str, buf: &mut [u8]) {
    let f = client.open(path).await.unwrap();
    let (off, tail) = f.tail().unwrap();
    let n = tail.len();
    f.read_at(off, &mut buf[..n]).await.unwrap();
}

fn report(op: &str, ns: &mut [u64]) {
    report_as("rust", op, ns);
}

fn report_as(lang: &str, op: &str, ns: &mut [u64]) {
    let mean = ns.iter().sum::<u64>() / ns.len() as u64;
    ns.sort_unstable();
    println!("RESULT {lang} {op} {} {} {mean}", ns[ns.len() / 2], ns[ns.len() * 99 / 100]);
}

/// The Rust SDK side, in its own process: async calls on a two-worker
/// runtime (the shape of the library's internal one).
#[test]
#[ignore = "started by binding_overhead in its own process"]
fn rust_client_child() {
    let Ok(spec) = std::env::var(CHILD_ENV) else { return };
    let a: Vec<&str> = spec.lines().collect();
    let iters: usize = a[3].parse().unwrap();
    let cfg = cv_client::ClientConfig::load(std::path::Path::new(a[0])).unwrap();
    let identity = cv_net::tls::Identity::load(&cfg.tls).unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let client = rt.block_on(async {
        let client = Client::connect(cfg.client, &identity, &cfg.transport).await.unwrap();
        let mut footer = vec![0u8; 1 << 20];
        let mut ns = vec![0u64; iters];
        for _ in 0..iters / 4 {
            open_footer(&client, a[1], &mut footer).await;
        }
        for slot in ns.iter_mut() {
            let t = Instant::now();
            open_footer(&client, a[1], &mut footer).await;
            *slot = t.elapsed().as_nanos() as u64;
        }
        report("open_footer", &mut ns);

        let p = client.open(a[1]).await.unwrap();
        let (toff, tail) = p.tail().unwrap();
        let n = tail.len().min(4096);
        let mut tns = vec![0u64; iters * 10];
        for i in -(tns.len() as i64 / 4)..tns.len() as i64 {
            let t = Instant::now();
            p.read_at(toff, &mut footer[..n]).await.unwrap();
            if i >= 0 {
                tns[i as usize] = t.elapsed().as_nanos() as u64;
            }
        }
        report("tail_read_4k", &mut tns);

        let f = client.open(a[2]).await.unwrap();
        let mut block = vec![0u8; 64 << 10];
        let slots = f.len() / block.len() as u64;
        let mut x: u64 = 42;
        for i in -(iters as i64 / 4)..iters as i64 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let off = ((x >> 33) % slots) * block.len() as u64;
            let t = Instant::now();
            assert_eq!(f.read_at(off, &mut block).await.unwrap(), block.len());
            if i >= 0 {
                ns[i as usize] = t.elapsed().as_nanos() as u64;
            }
        }
        report("pread_64k", &mut ns);
        client
    });

    // The same calls made blocking, one `block_on` per call from a thread
    // outside the runtime: the model the C ABI and JNI use.
    let mut footer = vec![0u8; 1 << 20];
    let mut ns = vec![0u64; iters];
    for i in -(iters as i64 / 4)..iters as i64 {
        let t = Instant::now();
        rt.block_on(open_footer(&client, a[1], &mut footer));
        if i >= 0 {
            ns[i as usize] = t.elapsed().as_nanos() as u64;
        }
    }
    report_as("rust_blocking", "open_footer", &mut ns);
    let f = rt.block_on(client.open(a[2])).unwrap();
    let mut block = vec![0u8; 64 << 10];
    let slots = f.len() / block.len() as u64;
    let mut x: u64 = 42;
    for i in -(iters as i64 / 4)..iters as i64 {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let off = ((x >> 33) % slots) * block.len() as u64;
        let t = Instant::now();
        assert_eq!(rt.block_on(f.read_at(off, &mut block)).unwrap(), block.len());
        if i >= 0 {
            ns[i as usize] = t.elapsed().as_nanos() as u64;
        }
    }
    report_as("rust_blocking", "pread_64k", &mut ns);
    client.close();

    // The C ABI's own code path (handle tables, its runtime's `block_on`), linked into this
    // Rust process: against `c` it separates the library's work from the C process around it.
    let c = cv_capi::ops::client_from_file(a[0]).unwrap();
    for i in -(iters as i64 / 4)..iters as i64 {
        let t = Instant::now();
        let f = cv_capi::ops::open(c, a[1]).unwrap();
        let info = cv_capi::ops::file_info(f).unwrap();
        let len = (info.length - info.tail_offset) as usize;
        cv_capi::ops::pread_fully(f, info.tail_offset, &mut footer[..len]).unwrap();
        cv_capi::ops::file_close(f).unwrap();
        if i >= 0 {
            ns[i as usize] = t.elapsed().as_nanos() as u64;
        }
    }
    report_as("rust_capi_ops", "open_footer", &mut ns);
    let f = cv_capi::ops::open(c, a[2]).unwrap();
    for i in -(iters as i64 / 4)..iters as i64 {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let off = ((x >> 33) % slots) * block.len() as u64;
        let t = Instant::now();
        cv_capi::ops::pread_fully(f, off, &mut block).unwrap();
        if i >= 0 {
            ns[i as usize] = t.elapsed().as_nanos() as u64;
        }
    }
    report_as("rust_capi_ops", "pread_64k", &mut ns);
    cv_capi::ops::file_close(f).unwrap();
    cv_capi::ops::client_close(c).unwrap();
}
