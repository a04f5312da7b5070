//! Short-circuit reads end to end: a real cluster on loopback (master + a worker with 2
//! shards, real O_DIRECT stores), a client on the same host reading blocks from the data
//! files through descriptors passed on the worker's Unix socket (wire/FORMAT.md).

use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

use cv_client::{Client, ClientSettings};
use cv_net::config::ByteSize;
use cv_tools::cluster::{ClusterOptions, LocalCluster};

const BLOCK: usize = 4 << 20;

fn pattern(len: usize, seed: u32) -> Vec<u8> {
    (0..len as u32).map(|i| (i.wrapping_add(seed).wrapping_mul(2_654_435_761) >> 13) as u8).collect()
}

async fn start() -> (tempfile::TempDir, LocalCluster) {
    let dir = tempfile::tempdir().unwrap();
    let mut opts = ClusterOptions::ephemeral(dir.path());
    // Small data files, so a test can find a block in them by its bytes.
    opts.capacity = ByteSize::mib(128);
    let cluster = LocalCluster::start(&opts).await.unwrap();
    (dir, cluster)
}

async fn write(client: &Client, path: &str, data: &[u8]) {
    let mut w = client.create(path, false).await.unwrap();
    w.write(data).await.unwrap();
    w.close().await.unwrap();
}

fn files_named(dir: &Path, name: &str, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            files_named(&p, name, out);
        } else if p.file_name().is_some_and(|n| n == name) {
            out.push(p);
        }
    }
}

/// Where `needle` is in one of the worker's data files.
fn find_on_disk(dir: &Path, needle: &[u8]) -> (PathBuf, u64) {
    let mut files = Vec::new();
    files_named(dir, "blocks.data", &mut files);
    for path in files {
        let bytes = std::fs::read(&path).unwrap();
        if let Some(at) = bytes.windows(needle.len()).position(|w| w == needle) {
            return (path, at as u64);
        }
    }
    panic!("{} bytes not found in any data file", needle.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_on_the_workers_host_come_from_its_files_and_match_quic() {
    let (_dir, cluster) = start().await;
    let client = cluster.client().await.unwrap();
    let data = pattern(BLOCK * 5 / 2 + 12345, 1);
    write(&client, "/sc.bin", &data).await;

    let f = client.open("/sc.bin").await.unwrap();
    let mut all = vec![0u8; data.len()];
    assert_eq!(f.read_at(0, &mut all).await.unwrap(), data.len());
    assert!(all == data, "whole file");
    // Ranges inside a chunk, across chunks, across blocks, at the very end.
    for (off, len) in [(1usize, 10usize), (65_530, 20), (BLOCK - 7, 4096 * 3 + 5), (data.len() - 3, 3)] {
        let mut buf = vec![0u8; len];
        let n = f.read_at(off as u64, &mut buf).await.unwrap();
        assert_eq!(&buf[..n], &data[off..(off + len).min(data.len())], "read_at({off}, {len})");
    }
    let got = f.read_vectored(&[(3, 100_000), (BLOCK as u64 - 50, 100)]).await.unwrap();
    assert_eq!(got[0], data[3..100_003]);
    assert_eq!(got[1], data[BLOCK - 50..BLOCK + 50]);
    let s = client.short_circuit_stats();
    assert!(s.reads >= 6, "reads went over QUIC: {s:?}");
    assert_eq!(s.fallbacks, 0, "{s:?}");

    // The switch: the same reads over QUIC, the same bytes.
    let quic = cluster.client_with(ClientSettings { short_circuit: false, ..cluster.client_settings() }).await.unwrap();
    let f = quic.open("/sc.bin").await.unwrap();
    let mut all = vec![0u8; data.len()];
    assert_eq!(f.read_at(0, &mut all).await.unwrap(), data.len());
    assert!(all == data);
    assert_eq!(quic.short_circuit_stats().reads, 0);
    cluster.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_chunk_in_the_file_is_never_returned() {
    let (dir, cluster) = start().await;
    let client = cluster.client().await.unwrap();
    let data = pattern(BLOCK, 7);
    write(&client, "/bad.bin", &data).await;
    let f = client.open("/bad.bin").await.unwrap();
    let mut head = vec![0u8; 4096];
    f.read_at(0, &mut head).await.unwrap();
    assert_eq!(head, data[..4096]);
    assert_eq!(client.short_circuit_stats().reads, 1, "the first chunk read from the file, under a lease");
    // Damage one byte in the middle of the block's second chunk, on disk.
    let at = 65_536 + 1000;
    let (path, base) = find_on_disk(dir.path(), &data[..4096]);
    let mut file = std::fs::OpenOptions::new().read(true).write(true).open(&path).unwrap();
    file.seek(SeekFrom::Start(base + at as u64)).unwrap();
    file.write_all(&[!data[at]]).unwrap();
    file.sync_all().unwrap();
    drop(file);

    let mut buf = vec![0u8; 100];
    match f.read_at(at as u64 - 50, &mut buf).await {
        // Served from a copy the worker still holds in memory, checked against its crc.
        Ok(n) => assert_eq!(&buf[..n], &data[at - 50..at + 50]),
        Err(e) => assert!(matches!(e.kind(), cv_client::ErrorKind::DataLoss | cv_client::ErrorKind::Corrupt), "{e}"),
    }
    let s = client.short_circuit_stats();
    assert_eq!((s.reads, s.fallbacks), (1, 1), "the bad chunk was caught in the client: {s:?}");
    // The worker, asked over QUIC, found the damage too and dropped its only copy: the intact
    // first chunk is not read from the file under the old lease either.
    let err = f.read_at(0, &mut head).await.unwrap_err();
    assert_eq!(err.kind(), cv_client::ErrorKind::DataLoss, "{err}");
    assert_eq!(client.short_circuit_stats().reads, 1);
    cluster.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_worker_is_not_read_behind_its_back_and_a_restarted_one_is_again() {
    let (_dir, mut cluster) = start().await;
    let client = cluster
        .client_with(ClientSettings { deadline: cv_net::config::Dur::secs(3), ..cluster.client_settings() })
        .await
        .unwrap();
    let data = pattern(BLOCK / 2, 3);
    write(&client, "/w.bin", &data).await;
    let f = client.open("/w.bin").await.unwrap();
    let mut buf = vec![0u8; 8192];
    f.read_at(0, &mut buf).await.unwrap();
    let s = client.short_circuit_stats();
    assert_eq!(s.reads, 1, "{s:?}");

    // The lease is still young and the descriptors open, but the worker is gone: the read
    // must not use them (the worker may come back and reuse the extent).
    cluster.stop_worker().await.unwrap();
    let err = f.read_at(0, &mut buf).await.unwrap_err();
    assert_eq!(client.short_circuit_stats().reads, 1, "read from a stopped worker's file: {err}");

    cluster.start_worker().await.unwrap();
    let f = client.open("/w.bin").await.unwrap();
    let mut again = vec![0u8; 8192];
    f.read_at(0, &mut again).await.unwrap();
    assert_eq!(again, data[..8192]);
    assert_eq!(client.short_circuit_stats().reads, 2, "{:?}", client.short_circuit_stats());
    cluster.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_socket_refuses_a_wrong_token() {
    let (dir, cluster) = start().await;
    let mut socks = Vec::new();
    files_named(dir.path(), "local.sock", &mut socks);
    assert_eq!(socks.len(), 1, "{socks:?}");
    let s = UnixStream::connect(&socks[0]).unwrap();
    let req = cv_wire::msg::LocalOpen { token: vec![0; 32], shard: 0 };
    let frame = cv_wire::encode(&req, 1, &[]).unwrap();
    cv_net::local::send_frame(&s, frame.head(), &[]).unwrap();
    let (reply, fds) = cv_net::local::recv_frame(&s, &cv_wire::Limits::DEFAULT, 8).unwrap();
    assert!(fds.is_empty(), "descriptors passed for a wrong token");
    let e: cv_wire::msg::ErrorReply = reply.decode_body().unwrap();
    assert_eq!(e.code, cv_wire::ErrorCode::PermissionDenied as u16, "{}", e.message);
    // And the connection is closed.
    let mut rest = Vec::new();
    (&s).read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty());
    cluster.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_block_read_for_longer_than_its_lease_stays_local_and_a_deleted_one_is_not_read_from_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let mut opts = ClusterOptions::ephemeral(dir.path());
    opts.local_lease = cv_net::config::Dur::millis(400);
    opts.capacity = ByteSize::mib(128);
    let cluster = LocalCluster::start(&opts).await.unwrap();
    let client = cluster.client().await.unwrap();
    let data = pattern(BLOCK, 11);
    write(&client, "/long.bin", &data).await;
    let f = client.open("/long.bin").await.unwrap();
    // Reads for three lease terms: each past half a term renews in the background, so
    // none waits for a lapsed lease or falls back.
    let until = std::time::Instant::now() + std::time::Duration::from_millis(1200);
    let mut n = 0u64;
    while std::time::Instant::now() < until {
        let off = (n as usize * 70_001) % (BLOCK - 4096);
        let mut buf = vec![0u8; 4096];
        f.read_at(off as u64, &mut buf).await.unwrap();
        assert_eq!(buf, data[off..off + 4096], "read {n} at {off}");
        n += 1;
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let s = client.short_circuit_stats();
    assert_eq!((s.reads, s.fallbacks), (n, 0), "{s:?}");
    // The block goes (its file deleted). Once the worker has dropped it (a QUIC reader sees it
    // gone), the short-circuit reader does not read the stale extent, though its lease may
    // still run: the worker revoked it on the socket.
    let quic = cluster.client_with(ClientSettings { short_circuit: false, ..cluster.client_settings() }).await.unwrap();
    let g = quic.open("/long.bin").await.unwrap();
    client.delete("/long.bin", false).await.unwrap();
    let gone_by = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut buf = vec![0u8; 4096];
    while g.read_at(0, &mut buf).await.is_ok() {
        assert!(std::time::Instant::now() < gone_by, "the worker kept the deleted block for 10 s");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let err = f.read_at(0, &mut buf).await.unwrap_err();
    assert_eq!(client.short_circuit_stats().reads, n, "a deleted block was read from the file: {err}");
    cluster.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_that_can_start_at_once_is_answered_from_the_io_thread() {
    let (_dir, cluster) = start().await;
    let client = cluster.client().await.unwrap();
    let data = pattern(BLOCK * 2, 5);
    write(&client, "/now.bin", &data).await;
    let f = client.open("/now.bin").await.unwrap();
    // Nothing is known yet about the shard or the block: not at once.
    assert!(f.local_read(0, 4096).is_none());
    let mut buf = vec![0u8; 4096];
    f.read_at(0, &mut buf).await.unwrap();
    // Now the shard's files and the block's lease are at hand.
    let (tx, rx) = std::sync::mpsc::channel();
    let read = f.local_read(100, 70_000).expect("a leased block of a local shard");
    read.start(move |b| tx.send(b).unwrap());
    let got = tokio::task::spawn_blocking(move || rx.recv().unwrap()).await.unwrap().expect("bytes");
    assert_eq!(&got[..], &data[100..70_100]);
    assert_eq!(client.short_circuit_stats().reads, 2);
    // Or on this thread, blocking (a read-only mount's request threads).
    let got = f.local_read(300_000, 5_000).expect("leased").read_blocking().expect("bytes");
    assert_eq!(&got[..], &data[300_000..305_000]);
    assert_eq!(client.short_circuit_stats().reads, 3);
    // Across two blocks, or into the tail, it is the async path's work.
    assert!(f.local_read(BLOCK as u64 - 10, 20).is_none(), "spans two blocks");
    assert!(f.local_read(data.len() as u64 - 10, 10).is_none(), "the tail is served from memory");
    assert!(f.local_read(0, 0).is_none());
    let quic = cluster.client_with(ClientSettings { short_circuit: false, ..cluster.client_settings() }).await.unwrap();
    let g = quic.open("/now.bin").await.unwrap();
    g.read_at(0, &mut buf).await.unwrap();
    assert!(g.local_read(0, 4096).is_none(), "short-circuit reads are off for this client");
    cluster.shutdown().await.unwrap();
}

/// A task's read alone goes through the runtime's own ring (no thread in between); reads in a
/// crowd go through the io thread, which batches them. Either way the bytes are right.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lone_read_uses_the_runtimes_ring_and_a_crowd_the_io_thread() {
    let (_dir, cluster) = start().await;
    let client = cluster.client().await.unwrap();
    let data = pattern(BLOCK * 2, 9);
    write(&client, "/ring.bin", &data).await;
    let f = client.open("/ring.bin").await.unwrap();
    let mut buf = vec![0u8; 4096];
    f.read_at(0, &mut buf).await.unwrap();
    let before = client.short_circuit_stats();
    for i in 0..8usize {
        let at = i * 300_000 + 17;
        let mut b = vec![0u8; 70_000];
        assert_eq!(f.read_at(at as u64, &mut b).await.unwrap(), b.len());
        assert!(b[..] == data[at..at + b.len()], "lone read at {at}");
    }
    let lone = client.short_circuit_stats();
    assert_eq!(lone.reads - before.reads, 8);
    assert_eq!(lone.task_ring_reads - before.task_ring_reads, 8, "each read alone went through the ring");
    let mut reads = tokio::task::JoinSet::new();
    for i in 0..32usize {
        let f = f.clone();
        // Inside the first block: one block read each.
        let at = (i * 131_071) % (BLOCK - 65_536);
        reads.spawn(async move {
            let mut b = vec![0u8; 65_536];
            f.read_at(at as u64, &mut b).await.unwrap();
            (at, b)
        });
    }
    while let Some(r) = reads.join_next().await {
        let (at, b) = r.unwrap();
        assert!(b[..] == data[at..at + b.len()], "crowded read at {at}");
    }
    let crowd = client.short_circuit_stats();
    assert_eq!(crowd.reads - lone.reads, 32);
    assert!(crowd.task_ring_reads - lone.task_ring_reads < 32, "a crowd went through the io thread too");
    cluster.shutdown().await.unwrap();
}

/// The kernel's read-ahead windows fall anywhere against the 64 KiB chunks a read must take
/// whole: each window starts in the chunk the last one ended in, which the file's memo holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_in_file_order_read_each_chunk_from_disk_once() {
    let (_dir, cluster) = start().await;
    let client = cluster.client().await.unwrap();
    let data = pattern(BLOCK, 21);
    write(&client, "/seq.bin", &data).await;
    let f = client.open("/seq.bin").await.unwrap();
    let mut buf = vec![0u8; 4096];
    f.read_at(0, &mut buf).await.unwrap();
    let before = client.short_circuit_stats();
    // 92 KiB windows (as the kernel's ~90 KiB average), then a read inside the last chunk.
    let (step, end) = (92 << 10, 3 << 20);
    let mut at = 0;
    while at < end {
        let (tx, rx) = std::sync::mpsc::channel();
        f.local_read(at as u64, step).expect("leased and local").start(move |b| tx.send(b).unwrap());
        let got = tokio::task::spawn_blocking(move || rx.recv().unwrap()).await.unwrap().expect("bytes");
        assert!(got[..] == data[at..at + step], "window at {at}");
        at += step;
    }
    let (tx, rx) = std::sync::mpsc::channel();
    let last = at - 100;
    f.local_read(last as u64, 50).expect("leased").start(move |b| tx.send(b).unwrap());
    let got = rx.recv().unwrap().expect("answered at once, on this thread, from the memo");
    assert_eq!(&got[..], &data[last..last + 50]);
    let s = client.short_circuit_stats();
    let (asked, read) = (s.bytes - before.bytes, s.disk_bytes - before.disk_bytes);
    assert_eq!(s.fallbacks, before.fallbacks);
    // Without the memo each window rereads the chunk it starts in: ~1.7x.
    assert!(read as f64 <= asked as f64 * 1.1, "read {read} bytes from disk for {asked} asked");
    cluster.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_block_that_goes_under_a_live_lease_is_revoked_not_read() {
    let (_dir, cluster) = start().await;
    let client = cluster.client().await.unwrap();
    let data = pattern(BLOCK / 4, 13);
    write(&client, "/gone.bin", &data).await;
    let f = client.open("/gone.bin").await.unwrap();
    let mut buf = vec![0u8; 4096];
    f.read_at(0, &mut buf).await.unwrap();
    let leased = std::time::Instant::now();
    assert_eq!(client.short_circuit_stats().reads, 1);
    let quic = cluster.client_with(ClientSettings { short_circuit: false, ..cluster.client_settings() }).await.unwrap();
    let g = quic.open("/gone.bin").await.unwrap();
    client.delete("/gone.bin", false).await.unwrap();
    while g.read_at(0, &mut buf).await.is_ok() {
        assert!(leased.elapsed() < std::time::Duration::from_secs(4), "the worker kept the deleted block");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    // The 5 s lease still runs, but the worker said the block went.
    assert!(leased.elapsed() < std::time::Duration::from_secs(4));
    assert!(f.read_at(0, &mut buf).await.is_err());
    assert!(f.local_read(0, 4096).is_none());
    assert_eq!(client.short_circuit_stats().reads, 1, "{:?}", client.short_circuit_stats());
    cluster.shutdown().await.unwrap();
}
