//! `/metrics` of a running cluster, scraped over HTTP and read with a real Prometheus
//! text-format parser (prometheus-parse): the master and the worker of cv-tools' embedded
//! cluster (served as `cvctl up` serves them), and `cvctl gateway` and `cvctl fuse` (as root)
//! as processes of their own. Named
//! series must exist, and counters must move after real traffic: reads raise the worker's
//! tier hits, opens the master's open-latency count, writes its journal commits.

mod fuse_util;

use cv_client::ClientSettings;
use cv_tools::cluster::{ClusterOptions, LocalCluster};
use prometheus_parse::{Sample, Scrape, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// errno ESTALE (Linux): a read of a version replaced or removed since the open.
const ESTALE: i32 = 116;

/// `GET /metrics` over plain HTTP/1.1; the status line and the body.
fn get(addr: SocketAddr, path: &str) -> (String, String) {
    let mut s = TcpStream::connect(addr).expect("connect to the metrics endpoint");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").expect("an HTTP response");
    (head.lines().next().unwrap_or_default().to_owned(), body.to_owned())
}

/// Scrapes and parses `addr`'s `/metrics`.
fn scrape(addr: SocketAddr) -> Scrape {
    let (status, body) = get(addr, "/metrics");
    assert!(status.contains(" 200 "), "{status}");
    Scrape::parse(body.lines().map(|l| Ok(l.to_owned()))).expect("Prometheus text format")
}

/// The samples of metric `name` (as exposed: counters end in `_total`).
fn samples<'a>(s: &'a Scrape, name: &str) -> Vec<&'a Sample> {
    s.samples.iter().filter(|x| x.metric == name).collect()
}

fn value(v: &Value) -> f64 {
    match v {
        Value::Counter(x) | Value::Gauge(x) | Value::Untyped(x) => *x,
        Value::Histogram(_) | Value::Summary(_) => panic!("not a single value: {v:?}"),
    }
}

/// Sum over every series of `name`, which must exist.
fn sum(s: &Scrape, name: &str) -> f64 {
    let found = samples(s, name);
    assert!(!found.is_empty(), "no {name} in the scrape; it has {:?}", names(s));
    found.iter().map(|x| value(&x.value)).sum()
}

/// Sum of `name` over the series whose `label` is `want`.
fn sum_where(s: &Scrape, name: &str, label: &str, want: &str) -> f64 {
    let found: Vec<_> = samples(s, name).into_iter().filter(|x| x.labels.get(label) == Some(want)).collect();
    assert!(!found.is_empty(), "no {name}{{{label}=\"{want}\"}} in the scrape");
    found.iter().map(|x| value(&x.value)).sum()
}

/// Observations of histogram `name` (the count of its `+Inf` bucket).
fn hist_count(s: &Scrape, name: &str) -> f64 {
    let found = samples(s, name);
    assert!(!found.is_empty(), "no histogram {name}; the scrape has {:?}", names(s));
    found
        .iter()
        .map(|x| match &x.value {
            Value::Histogram(b) => b.iter().map(|c| c.count).fold(0.0, f64::max),
            v => panic!("{name} is not a histogram: {v:?}"),
        })
        .sum()
}

/// The metric names the checked-in Grafana dashboard queries that start with one of
/// `prefixes` (a histogram's `_bucket` series by the histogram's name).
fn dashboard_metrics(prefixes: &[&str]) -> Vec<String> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/grafana/cv-dashboard.json");
    let text = std::fs::read_to_string(path).unwrap();
    let mut out: Vec<String> = Vec::new();
    let mut rest = text.as_str();
    while let Some(i) = rest.find("cv_") {
        let name: String =
            rest[i..].chars().take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_').collect();
        rest = &rest[i + name.len()..];
        let name = name.strip_suffix("_bucket").map(str::to_owned).unwrap_or(name);
        if prefixes.iter().any(|p| name.starts_with(p)) && !out.contains(&name) {
            out.push(name);
        }
    }
    assert!(!out.is_empty(), "the dashboard queries nothing under {prefixes:?}");
    out
}

/// Every metric the dashboard queries under `prefixes` is in one of `scrapes`.
fn dashboard_matches(prefixes: &[&str], scrapes: &[&Scrape]) {
    for name in dashboard_metrics(prefixes) {
        assert!(
            scrapes.iter().any(|s| s.samples.iter().any(|x| x.metric == name)),
            "the dashboard queries {name}, which no endpoint exports"
        );
    }
}

fn names(s: &Scrape) -> Vec<&str> {
    let mut v: Vec<&str> = s.samples.iter().map(|x| x.metric.as_str()).collect();
    v.dedup();
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn master_and_worker_metrics_move_with_traffic() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = LocalCluster::start(&ClusterOptions::ephemeral(dir.path())).await.unwrap();
    let served = cluster.serve_metrics().await.unwrap();
    let addr = |role: &str| served.iter().find(|(r, _)| r == role).map(|(_, m)| m.local_addr()).unwrap();
    let (master, worker) = (addr("master"), addr("worker"));
    let scrape_both =
        || async move { tokio::task::spawn_blocking(move || (scrape(master), scrape(worker))).await.unwrap() };

    let (m0, w0) = scrape_both().await;
    for name in [
        "cv_master_tail_hits_total",
        "cv_master_tail_misses_total",
        "cv_master_tail_hit_ratio",
        "cv_master_journal_batches_total",
        "cv_master_export_backlog_files",
        "cv_master_export_lag_seconds",
        "cv_master_under_replicated_files",
        "cv_master_lost_files",
        "cv_master_workers_live",
        "cv_quic_connections",
        "cv_quic_lost_packets_total",
        "cv_ufs_requests_total",
    ] {
        assert!(!samples(&m0, name).is_empty(), "master lacks {name}; it has {:?}", names(&m0));
    }
    assert_eq!(sum(&m0, "cv_master_workers_live"), 1.0);
    for name in [
        "cv_worker_tier_hits_total",
        "cv_worker_tier_misses_total",
        "cv_worker_tier_evictions_total",
        "cv_worker_tier_corrupt_total",
        "cv_worker_tier_bytes",
        "cv_worker_fills_total",
        "cv_worker_fill_joins_total",
        "cv_worker_shard_requests_in_flight",
        "cv_quic_connections_accepted_total",
        "cv_quic_streams_total",
        "cv_quic_lost_packets_total",
        "cv_ufs_requests_total",
    ] {
        assert!(!samples(&w0, name).is_empty(), "worker lacks {name}; it has {:?}", names(&w0));
    }
    // One series per shard and tier.
    assert_eq!(samples(&w0, "cv_worker_tier_hits_total").len(), 4);

    // Traffic: a file written, opened and read twice over QUIC (not short-circuit, which
    // the worker's tiers do not see).
    let client =
        cluster.client_with(ClientSettings { short_circuit: false, ..cluster.client_settings() }).await.unwrap();
    let data: Vec<u8> = (0..(3 << 20)).map(|i: u32| (i.wrapping_mul(2_654_435_761) >> 7) as u8).collect();
    let mut w = client.create("/metered", false).await.unwrap();
    w.write(&data).await.unwrap();
    w.close().await.unwrap();
    for _ in 0..2 {
        let f = client.open("/metered").await.unwrap();
        let mut buf = vec![0u8; data.len()];
        assert_eq!(f.read_at(0, &mut buf).await.unwrap(), data.len());
        assert!(buf == data);
    }

    let (m1, w1) = scrape_both().await;
    let opens = |s: &Scrape| hist_count(s, "cv_master_open_seconds");
    assert!(opens(&m1) >= opens(&m0) + 2.0, "open latency count {} -> {}", opens(&m0), opens(&m1));
    let commits = |s: &Scrape| hist_count(s, "cv_master_journal_commit_seconds");
    assert!(commits(&m1) > commits(&m0), "journal commits {} -> {}", commits(&m0), commits(&m1));
    assert!(sum(&m1, "cv_master_journal_records_total") > sum(&m0, "cv_master_journal_records_total"));
    assert!(sum(&m1, "cv_quic_streams_total") > sum(&m0, "cv_quic_streams_total"));

    let hits = |s: &Scrape| sum(s, "cv_worker_tier_hits_total");
    assert!(hits(&w1) > hits(&w0), "tier hits {} -> {}", hits(&w0), hits(&w1));
    let tier_lookups = |s: &Scrape, t| {
        sum_where(s, "cv_worker_tier_hits_total", "tier", t) + sum_where(s, "cv_worker_tier_misses_total", "tier", t)
    };
    assert!(
        tier_lookups(&w1, "disk") + tier_lookups(&w1, "memory")
            > tier_lookups(&w0, "disk") + tier_lookups(&w0, "memory")
    );
    let streams = |s: &Scrape| sum(s, "cv_quic_streams_total");
    assert!(streams(&w1) > streams(&w0), "worker streams {} -> {}", streams(&w0), streams(&w1));
    assert!(sum(&w1, "cv_quic_connections") >= 1.0);
    assert!(sum(&w1, "cv_worker_tier_bytes") > 0.0);

    dashboard_matches(&["cv_master_", "cv_worker_", "cv_quic_", "cv_ufs_"], &[&m1, &w1]);

    // Only /metrics is served.
    let (status, _) = tokio::task::spawn_blocking(move || get(master, "/other")).await.unwrap();
    assert!(status.contains(" 404 "), "{status}");

    client.shutdown().await;
    drop(served);
    cluster.shutdown().await.unwrap();
}

/// A `cvctl` process, killed if the test fails before it ends.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cvctl_gateway_serves_metrics() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = LocalCluster::start(&ClusterOptions::ephemeral(dir.path())).await.unwrap();
    let client = cluster.client().await.unwrap();
    client.mkdir("/public", false).await.unwrap();
    let mut w = client.create("/public/hello.txt", false).await.unwrap();
    w.write(b"hello, metrics").await.unwrap();
    w.close().await.unwrap();

    // The cluster's client config plus a [gateway] on ports the system picked just now.
    let free = || std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let (s3, metrics) = (free(), free());
    let config = dir.path().join("gateway.toml");
    let mut text = std::fs::read_to_string(cluster.client_config()).unwrap();
    text.push_str(&format!(
        "\n[gateway]\nbind = \"{s3}\"\nmetrics = \"{metrics}\"\n\
         [[gateway.buckets]]\nname = \"open\"\npath = \"/public\"\npublic = true\n"
    ));
    std::fs::write(&config, text).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_cvctl"))
        .args(["gateway", "--config", config.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn cvctl gateway");
    let stdout = child.stdout.take().unwrap();
    let proc = Proc(child);
    let seen = tokio::task::spawn_blocking(move || {
        let deadline = Instant::now() + Duration::from_secs(30);
        for line in BufReader::new(stdout).lines() {
            let line = line.unwrap();
            if line.contains("gateway metrics at") || Instant::now() > deadline {
                return Some(line);
            }
        }
        None
    })
    .await
    .unwrap();
    assert!(seen.is_some_and(|l| l.contains(&metrics.to_string())), "cvctl gateway did not announce its metrics");

    let before = tokio::task::spawn_blocking(move || scrape(metrics)).await.unwrap();
    assert_eq!(sum_where(&before, "cv_gateway_requests_total", "kind", "get"), 0.0);
    let (status, body) = tokio::task::spawn_blocking(move || get(s3, "/open/hello.txt")).await.unwrap();
    assert!(status.contains(" 200 "), "{status}: {body}");
    assert_eq!(body, "hello, metrics");
    let after = tokio::task::spawn_blocking(move || scrape(metrics)).await.unwrap();
    assert_eq!(sum_where(&after, "cv_gateway_requests_total", "kind", "get"), 1.0);
    assert_eq!(sum(&after, "cv_gateway_bytes_out_total"), 14.0);
    assert_eq!(sum(&after, "cv_gateway_cache_corrupt_total"), 0.0);
    dashboard_matches(&["cv_gateway_"], &[&after]);

    drop(proc);
    client.shutdown().await;
    cluster.shutdown().await.unwrap();
}

/// A `cvctl fuse` mount (as root) with `extra` flags, serving `/metrics` at the address
/// returned; `None` (skip) without root or /dev/fuse, which CI has.
fn fuse_with_metrics(extra: &[&str]) -> Option<(fuse_util::Mounted, std::net::SocketAddr)> {
    if !std::path::Path::new("/dev/fuse").exists()
        || !std::fs::read_to_string("/proc/self/status").unwrap().contains("\nUid:\t0\t")
    {
        assert!(std::env::var_os("CI").is_none(), "the FUSE metrics tests need root and /dev/fuse");
        eprintln!("SKIP: cvctl fuse needs root and /dev/fuse");
        return None;
    }
    let addr = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let m = fuse_util::mount(&[&["--metrics", &addr.to_string()], extra].concat());
    // The endpoint is up once the mount is (it is served right after mounting).
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(addr).is_err() {
        assert!(Instant::now() < deadline, "cvctl fuse serves no /metrics at {addr}");
        std::thread::sleep(Duration::from_millis(20));
    }
    Some((m, addr))
}

#[test]
fn cvctl_fuse_serves_metrics() {
    let Some((m, addr)) = fuse_with_metrics(&["--attr-ttl", "60s"]) else { return };
    let before = scrape(addr);
    assert_eq!(sum_where(&before, "cv_fuse_requests_total", "op", "write"), 0.0);
    assert!(sum(&before, "cv_client_connections") >= 1.0);

    let data = vec![7u8; 100_000];
    std::fs::write(m.path("f"), &data).unwrap();
    assert!(std::fs::read(m.path("f")).unwrap() == data);
    let after = scrape(addr);
    assert!(sum_where(&after, "cv_fuse_requests_total", "op", "write") >= 1.0);
    assert!(sum_where(&after, "cv_fuse_requests_total", "op", "create") >= 1.0);
    assert_eq!(sum(&after, "cv_fuse_write_bytes_total"), data.len() as f64);
    assert!(sum(&after, "cv_fuse_read_bytes_total") >= data.len() as f64);
    dashboard_matches(&["cv_fuse_", "cv_client_"], &[&after]);
    fstat_after_reads_is_answered_from_memory(&m, addr);
}

/// A read-only mount: changes are refused with EROFS, and since no atime can change the kernel
/// keeps a file's attributes across its READs, so `fstat` after a read does not ask the mount.
#[test]
fn a_read_only_mount_refuses_changes_and_is_not_asked_for_attributes_after_reads() {
    use std::os::unix::fs::FileExt;
    let Some((m, addr)) = fuse_with_metrics(&["--read-only"]) else { return };
    let client = m.rt.block_on(m.cluster.as_ref().unwrap().client()).unwrap();
    let data: Vec<u8> = (0..4u32 << 20).map(|i| (i % 253) as u8).collect();
    m.rt.block_on(async {
        let mut w = client.create("/ro", false).await.unwrap();
        w.write(&data).await.unwrap();
        w.close().await.unwrap();
    });
    let erofs = |r: std::io::Result<()>| r.expect_err("a change on a read-only mount").kind();
    assert_eq!(erofs(std::fs::write(m.path("new"), b"x")), std::io::ErrorKind::ReadOnlyFilesystem);
    assert_eq!(erofs(std::fs::remove_file(m.path("ro"))), std::io::ErrorKind::ReadOnlyFilesystem);
    let f = std::fs::File::open(m.path("ro")).unwrap();
    assert_eq!(f.metadata().unwrap().len(), data.len() as u64);
    let before = sum_where(&scrape(addr), "cv_fuse_requests_total", "op", "getattr");
    for i in 0..8u64 {
        let mut b = [0u8; 4096];
        f.read_exact_at(&mut b, i * (400 << 10)).unwrap();
        assert_eq!(b[..], data[(i * (400 << 10)) as usize..][..4096]);
        assert_eq!(f.metadata().unwrap().len(), data.len() as u64);
    }
    let getattrs = sum_where(&scrape(addr), "cv_fuse_requests_total", "op", "getattr") - before;
    // The kernel's attributes last the default attr_ttl (1 s); the loop takes far less.
    assert!(getattrs <= 1.0, "{getattrs} GETATTRs for 8 fstats after reads on a read-only mount");
    // Several request threads, each reading on its own: readers at once get the same bytes.
    std::thread::scope(|s| {
        for t in 0..4u64 {
            let (path, data) = (m.path("ro"), &data);
            s.spawn(move || {
                let f = std::fs::File::open(path).unwrap();
                let mut b = vec![0u8; 100_000];
                for i in 0..data.len() as u64 / 100_000 {
                    let at = (i * 100_000 + t * 4096) % (data.len() as u64 - 100_000);
                    f.read_exact_at(&mut b, at).unwrap();
                    assert!(b[..] == data[at as usize..at as usize + b.len()], "reader {t} at {at}");
                }
            });
        }
    });
    // The blocks are on this host's worker: once leased, READs are answered on the kernel's
    // threads, not the runtime.
    let s = scrape(addr);
    let reads = sum_where(&s, "cv_fuse_requests_total", "op", "read");
    let at_once = sum(&s, "cv_fuse_reads_at_once_total");
    assert!(at_once > reads / 2.0 && at_once <= reads, "{at_once} of {reads} READs answered at once");
    client.close();
}

/// A read-only mount with `--open-ttl` answers opens, opendirs and lookups of paths the master
/// named within the ttl from memory. A file replaced elsewhere is read as one whole version,
/// old or new (a read of the old version may fail once its blocks are gone), and the new
/// version is read once the ttl has passed.
#[test]
fn a_read_only_mount_with_open_ttl_reuses_opens_and_reads_whole_versions() {
    const TTL: Duration = Duration::from_secs(5);
    let Some((m, addr)) = fuse_with_metrics(&["--read-only", "--open-ttl", "5s", "--attr-ttl", "50ms"]) else {
        return;
    };
    let client = m.rt.block_on(m.cluster.as_ref().unwrap().client()).unwrap();
    let put = |data: &[u8]| {
        m.rt.block_on(async {
            let mut w = client.create("/d/f", true).await.unwrap();
            w.write(data).await.unwrap();
            w.close().await.unwrap();
        })
    };
    let old: Vec<u8> = (0..(6u32 << 20)).map(|i| (i % 253) as u8).collect();
    let new: Vec<u8> = (0..(6u32 << 20)).map(|i| (i % 241) as u8).collect();
    let newer: Vec<u8> = (0..(6u32 << 20)).map(|i| (i % 239) as u8).collect();
    m.rt.block_on(client.mkdir("/d", true)).unwrap();
    put(&old);
    let names = || -> Vec<_> { std::fs::read_dir(m.path("d")).unwrap().map(|e| e.unwrap().file_name()).collect() };
    assert_eq!(names(), ["f"]);
    assert!(std::fs::read(m.path("d/f")).unwrap() == old);
    let reused = || sum(&scrape(addr), "cv_fuse_reused_total");
    let before = reused();
    // The kernel's entries last 50 ms: later lookups, opens and listings reach the mount,
    // which answers them from what the master said the first time.
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(names(), ["f"]);
    assert!(std::fs::read(m.path("d/f")).unwrap() == old);
    assert!(reused() - before >= 2.0, "an opendir and an open (and a lookup) answered from memory");

    put(&new);
    let replaced = Instant::now();
    let mut saw_new = false;
    while replaced.elapsed() < TTL * 5 {
        match std::fs::read(m.path("d/f")) {
            Ok(got) if got == new => {
                saw_new = true;
                break;
            }
            Ok(got) => assert!(got == old, "a read of neither version, {:?} after the replacement", replaced.elapsed()),
            // The old version's blocks are gone: the read fails, and the mount forgets it.
            Err(e) => assert_eq!(e.raw_os_error(), Some(ESTALE), "{e}"),
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(saw_new, "the new version is read once open_ttl ({TTL:?}) has passed");
    assert!(replaced.elapsed() < TTL + Duration::from_secs(3), "{:?}", replaced.elapsed());

    // Past the kernel's pages (O_DIRECT), a read of the old version fails once its blocks are
    // gone (the worker deletes them within a heartbeat or two), and that makes the next open
    // ask the master: the newer version is read before the ttl has passed.
    let direct = || {
        use std::io::Read;
        use std::os::unix::fs::OpenOptionsExt;
        const O_DIRECT: i32 = 0o40000;
        let mut f = std::fs::OpenOptions::new().read(true).custom_flags(O_DIRECT).open(m.path("d/f"))?;
        let mut out = Vec::new();
        f.read_to_end(&mut out).map(|_| out)
    };
    assert!(direct().unwrap() == new);
    put(&newer);
    let replaced = Instant::now();
    let mut log = Vec::new();
    loop {
        log.push(match direct() {
            Ok(got) if got == newer => "newer",
            Ok(got) if got == new => "new",
            Ok(_) => panic!("a read of neither version: {log:?}"),
            Err(e) => {
                assert_eq!(e.raw_os_error(), Some(ESTALE), "{e}");
                "ESTALE"
            }
        });
        match log[..] {
            [.., "newer"] => break,
            [.., "ESTALE", _] => panic!("a failed read did not make the next open ask the master: {log:?}"),
            _ => {}
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(log.contains(&"ESTALE") && replaced.elapsed() < TTL, "{log:?} in {:?}", replaced.elapsed());
    let stale = sum(&scrape(addr), "cv_fuse_stale_reads_total");
    let refused = log.iter().filter(|&&r| r == "ESTALE").count() as f64;
    assert!(stale >= refused, "{stale} stale reads counted for {refused} refused");
    client.close();
}

/// The kernel forgets a file's atime after each READ it sends, so each `fstat` after a read is
/// a GETATTR: within attr_ttl the mount answers it from memory, not with a master round trip.
/// A change made through the mount is seen at once all the same.
fn fstat_after_reads_is_answered_from_memory(m: &fuse_util::Mounted, addr: std::net::SocketAddr) {
    use std::os::unix::fs::FileExt;
    // Written by another client, so the kernel holds none of its pages.
    let client = m.rt.block_on(m.cluster.as_ref().unwrap().client()).unwrap();
    let data: Vec<u8> = (0..8u32 << 20).map(|i| (i % 251) as u8).collect();
    m.rt.block_on(async {
        let mut w = client.create("/big", false).await.unwrap();
        w.write(&data).await.unwrap();
        w.close().await.unwrap();
    });
    let before = sum(&scrape(addr), "cv_fuse_attr_cache_hits_total");
    let f = std::fs::File::open(m.path("big")).unwrap();
    for i in 0..20u64 {
        // 400 KiB apart: each misses the kernel's read-ahead, so each is a READ.
        let mut b = [0u8; 4096];
        f.read_exact_at(&mut b, i * (400 << 10)).unwrap();
        assert_eq!(b[..], data[(i * (400 << 10)) as usize..][..4096]);
        assert_eq!(f.metadata().unwrap().len(), data.len() as u64);
    }
    let hits = sum(&scrape(addr), "cv_fuse_attr_cache_hits_total") - before;
    assert!(hits >= 15.0, "{hits} of 20 fstats after a read were answered from memory");
    // Changes through the mount: the next stat shows them, not what was kept.
    std::fs::write(m.path("big"), b"short").unwrap();
    assert_eq!(std::fs::metadata(m.path("big")).unwrap().len(), 5);
    std::fs::OpenOptions::new().write(true).open(m.path("big")).unwrap().set_len(3).unwrap();
    assert_eq!(f.metadata().unwrap().len(), 3, "an fstat through a descriptor opened before the change");
    std::fs::rename(m.path("big"), m.path("big2")).unwrap();
    assert_eq!(std::fs::metadata(m.path("big2")).unwrap().len(), 3);
    assert!(std::fs::metadata(m.path("big")).is_err());
    client.close();
}
