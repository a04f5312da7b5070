//! End to end: a real cluster (master + a worker with 2 shards) on loopback,
//! real QUIC with mutual TLS, real O_DIRECT stores; clients through the SDK.

use cv_client::{ErrorKind, FileKind};
use cv_net::config::ByteSize;
use cv_tools::cluster::{ClusterOptions, LocalCluster};
use std::time::{Duration, Instant};

const BLOCK: usize = 4 << 20;

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u32).wrapping_mul(2_654_435_761).rotate_left(u32::from(seed)) as u8).collect()
}

async fn start() -> (tempfile::TempDir, LocalCluster) {
    let dir = tempfile::tempdir().unwrap();
    let cluster = LocalCluster::start(&ClusterOptions::ephemeral(dir.path())).await.unwrap();
    (dir, cluster)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edge_sizes_round_trip_through_every_read_path() {
    let (_dir, cluster) = start().await;
    let client = cluster.client().await.unwrap();
    client.mkdir("/e2e", false).await.unwrap();
    for (i, len) in [0, 1, BLOCK - 1, BLOCK, BLOCK + 1, BLOCK * 7 / 2].into_iter().enumerate() {
        let data = pattern(len, i as u8);
        let path = format!("/e2e/f{i}");
        let mut w = client.create(&path, false).await.unwrap();
        // Uneven write sizes cross block boundaries mid-call.
        for piece in data.chunks(1_000_003) {
            w.write(piece).await.unwrap();
        }
        let st = w.close().await.unwrap();
        assert_eq!(st.length, len as u64);

        let f = client.open(&path).await.unwrap();
        assert_eq!(f.len(), len as u64);
        assert_eq!(f.blocks().len(), len.div_ceil(BLOCK));

        // read_at: the whole file, then ranges at awkward places.
        let mut all = vec![0u8; len + 10];
        let n = f.read_at(0, &mut all).await.unwrap();
        assert_eq!(n, len, "len {len}");
        assert!(all[..len] == data[..], "read_at whole, len {len}");
        for (off, l) in [(0usize, 1usize), (len / 2, 4097), (len.saturating_sub(3), 3), (BLOCK - 2, 5)] {
            if off >= len {
                continue;
            }
            let mut buf = vec![0u8; l];
            let n = f.read_at(off as u64, &mut buf).await.unwrap();
            let want = &data[off..(off + l).min(len)];
            assert_eq!(&buf[..n], want, "read_at({off}, {l}) of {len}");
        }
        let mut past = [0u8; 4];
        assert_eq!(f.read_at(len as u64, &mut past).await.unwrap(), 0);

        // read_vectored: overlapping, adjacent and past-the-end ranges, and ranges across a
        // block boundary and into the tail (served from memory after `open`).
        let ranges = [
            (0u64, 10usize),
            (5, 10),
            (15, 1),
            (len as u64 / 3, 70_000),
            (len as u64, 5),
            (BLOCK as u64 - 3, 7),
            (len.saturating_sub(100_000) as u64, 99_990),
            (len.saturating_sub(30) as u64, 30),
        ];
        let got = f.read_vectored(&ranges).await.unwrap();
        for ((off, l), bytes) in ranges.iter().zip(&got) {
            let s = (*off as usize).min(len);
            let e = (s + l).min(len);
            assert_eq!(bytes[..], data[s..e], "vectored ({off}, {l}) of {len}");
        }

        // The sequential reader with read-ahead.
        let back = f.sequential(0).read_to_end().await.unwrap();
        assert!(back == data, "sequential, len {len}");
    }
    client.close();
    cluster.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parquet_footer_arrives_with_open() {
    let (dir, cluster) = start().await;
    let client = cluster.client().await.unwrap();
    let local = dir.path().join("t.parquet");
    cv_benches::parquet_gen::write_file(&local, 6 << 20, 3).unwrap();
    let bytes = std::fs::read(&local).unwrap();
    let mut w = client.create("/t.parquet", false).await.unwrap();
    w.write(&bytes).await.unwrap();
    w.close().await.unwrap();

    let f = client.open("/t.parquet").await.unwrap();
    let (tail_off, tail) = f.tail().expect("the open reply carries the tail");
    let flen = cv_benches::parquet_gen::footer_len(&bytes[bytes.len() - 8..]).unwrap();
    // Exactly the footer plus its 8-byte trailer: what an engine reads next.
    assert_eq!(tail.len() as u64, flen + 8);
    assert_eq!(tail_off, bytes.len() as u64 - flen - 8);
    assert_eq!(tail, &bytes[tail_off as usize..]);
    assert!(cv_benches::parquet_gen::parse_footer(&tail[..tail.len() - 8]).unwrap() >= 2);
    client.close();
    cluster.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rename_and_delete_are_visible_to_a_second_client() {
    let (_dir, cluster) = start().await;
    let a = cluster.client().await.unwrap();
    let b = cluster.client().await.unwrap();
    a.mkdir("/d/sub", true).await.unwrap();
    let mut w = a.create("/d/sub/x", false).await.unwrap();
    w.write(b"hello").await.unwrap();
    w.close().await.unwrap();

    a.rename("/d/sub", "/d/moved").await.unwrap();
    assert_eq!(b.stat("/d/sub/x").await.unwrap_err().kind(), ErrorKind::NotFound);
    let f = b.open("/d/moved/x").await.unwrap();
    let mut buf = [0u8; 5];
    f.read_at(0, &mut buf).await.unwrap();
    assert_eq!(&buf, b"hello");
    let names: Vec<_> = b.list("/d").await.unwrap().into_iter().map(|s| (s.path, s.kind)).collect();
    assert_eq!(names, vec![("/d/moved".to_string(), FileKind::Dir)]);

    assert_eq!(a.delete("/d", false).await.unwrap_err().kind(), ErrorKind::NotEmpty);
    a.delete("/d", true).await.unwrap();
    assert_eq!(b.open("/d/moved/x").await.unwrap_err().kind(), ErrorKind::NotFound);
    assert_eq!(b.stat("/d").await.unwrap_err().kind(), ErrorKind::NotFound);
    a.close();
    b.close();
    cluster.shutdown().await.unwrap();
}

/// Writes a file (its only copy on the one worker), opens it if `open_first`, stops the
/// worker and, if `silent`, binds sockets on its shards' ports that take every datagram and
/// answer none (a hung host, not a refused port). Then reads the file through a client with a
/// 4 s deadline: the error, and how long the read took.
async fn read_with_the_worker_gone(open_first: bool, silent: bool) -> (cv_client::Error, Duration) {
    let (_dir, mut cluster) = start().await;
    let client = cluster.client().await.unwrap();
    let mut w = client.create("/x", false).await.unwrap();
    w.write(&pattern(BLOCK + 100, 9)).await.unwrap();
    w.close().await.unwrap();
    let mut settings = cluster.client_settings();
    settings.deadline = cv_net::config::Dur::secs(4);
    let impatient = cluster.client_with(settings).await.unwrap();
    let early = match open_first {
        true => Some(impatient.open("/x").await.unwrap()),
        false => None,
    };
    let shards = cluster.shard_addrs();
    cluster.stop_worker().await.unwrap();
    let holes: Vec<std::net::UdpSocket> = match silent {
        true => shards.iter().map(|a| std::net::UdpSocket::bind(a).unwrap()).collect(),
        false => Vec::new(),
    };
    // The master learns the worker is gone from its closed connection.
    let t = Instant::now();
    let f = match early {
        Some(f) => f,
        None => loop {
            let f = impatient.open("/x").await.unwrap();
            if f.blocks()[0].lost || t.elapsed() > Duration::from_secs(5) {
                break f;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        },
    };
    let t = Instant::now();
    let err = f.read_at(10, &mut [0u8; 1000]).await.unwrap_err();
    let took = t.elapsed();
    drop(holes);
    client.close();
    impatient.close();
    cluster.shutdown().await.unwrap();
    (err, took)
}

/// Reads through `f` until its blocks are gone (the worker deletes them within a heartbeat or
/// two of the master's word), and returns that error.
async fn read_until_gone(f: &cv_client::File) -> cv_client::Error {
    let t = Instant::now();
    loop {
        match f.read_at(10, &mut [0u8; 1000]).await {
            Err(e) => return e,
            Ok(_) => assert!(t.elapsed() < Duration::from_secs(15), "the old version's blocks were never deleted"),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A handle whose version was replaced, or removed, reads as `Stale` once its blocks are gone
/// (ESTALE through FUSE, `CV_ERR_STALE` in C), naming the file: not as `DataLoss`, which says
/// acknowledged bytes of a live version are gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replaced_or_removed_version_reads_as_stale_not_data_loss() {
    let (_dir, cluster) = start().await;
    let client = cluster.client().await.unwrap();
    for name in ["/replaced", "/removed"] {
        let mut w = client.create(name, false).await.unwrap();
        w.write(&pattern(BLOCK + 100, 3)).await.unwrap();
        w.close().await.unwrap();
    }
    let old = client.open("/replaced").await.unwrap();
    let mut w = client.create("/replaced", true).await.unwrap();
    w.write(&pattern(BLOCK + 100, 4)).await.unwrap();
    w.close().await.unwrap();
    let err = read_until_gone(&old).await;
    assert_eq!(err.kind(), ErrorKind::Stale, "{err}");
    assert!(!err.retryable() && err.message().contains("/replaced") && err.message().contains("replaced"), "{err}");
    let mut buf = vec![0u8; 1000];
    client.open("/replaced").await.unwrap().read_at(10, &mut buf).await.unwrap();
    assert!(buf == pattern(BLOCK + 100, 4)[10..1010], "a new open reads the new version");

    let old = client.open("/removed").await.unwrap();
    client.delete("/removed", false).await.unwrap();
    let err = read_until_gone(&old).await;
    assert_eq!(err.kind(), ErrorKind::Stale, "{err}");
    assert!(err.message().contains("/removed") && err.message().contains("removed"), "{err}");
    client.close();
    cluster.shutdown().await.unwrap();
}

/// A block whose only copy is on a worker the master lost is unreachable (retryable), not lost:
/// the worker may come back with it. The read waits a moment for that, then says so, naming
/// the file and the block, well within the call's deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_workers_only_copy_reads_as_unreachable_naming_the_file_not_as_data_loss() {
    let (err, took) = read_with_the_worker_gone(false, false).await;
    assert_eq!(err.kind(), ErrorKind::WorkerUnreachable, "{err}");
    assert!(err.retryable() && err.message().contains("/x") && err.message().contains("block"), "{err}");
    assert!(took < Duration::from_millis(3_000), "took {took:?} (deadline 4 s)");
}

/// A reader that opened the file before its worker went silent is not left waiting for the
/// whole deadline: the shard is given up after the transport's idle timeout (1.5 s), the master
/// is asked again, and says no live worker holds the block.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_that_stops_answering_is_given_up_after_the_idle_timeout_not_the_deadline() {
    let (err, took) = read_with_the_worker_gone(true, true).await;
    assert_eq!(err.kind(), ErrorKind::WorkerUnreachable, "{err}");
    assert!(err.retryable() && err.message().contains("/x"), "{err}");
    assert!(took < Duration::from_millis(3_500), "took {took:?} (deadline 4 s)");
}

/// A worker the master lost for a moment (stalled, restarted) comes back with its blocks: a
/// read meanwhile is never `DataLoss`, and the same handle reads the same bytes once it is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_lost_for_a_moment_is_not_data_loss() {
    let (_dir, mut cluster) = start().await;
    let client = cluster.client().await.unwrap();
    let data = pattern(BLOCK + 2000, 5);
    let mut w = client.create("/x", false).await.unwrap();
    w.write(&data).await.unwrap();
    w.close().await.unwrap();
    cluster.stop_worker().await.unwrap();
    let t = Instant::now();
    let f = loop {
        let f = client.open("/x").await.unwrap();
        if f.blocks()[0].lost || t.elapsed() > Duration::from_secs(5) {
            break f;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(f.blocks()[0].lost, "the master lost the worker");
    let f = std::sync::Arc::new(f);
    let reader = f.clone();
    let early = tokio::spawn(async move {
        let mut buf = vec![0u8; 1000];
        reader.read_at(10, &mut buf).await.map(|_| buf)
    });
    cluster.start_worker().await.unwrap();
    match early.await.unwrap() {
        Ok(buf) => assert!(buf == data[10..1010]),
        Err(e) => assert!(e.kind() == ErrorKind::WorkerUnreachable && e.retryable(), "{e}"),
    }
    let mut buf = vec![0u8; 1000];
    f.read_at(BLOCK as u64, &mut buf).await.unwrap();
    assert!(buf == data[BLOCK..BLOCK + 1000], "the same handle reads the same bytes");
    client.close();
    cluster.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_evicted_tail_is_read_from_the_workers_instead() {
    let dir = tempfile::tempdir().unwrap();
    // Room for about three 64 KiB default tails: the eight files below evict most of them.
    let opts = ClusterOptions { tail_budget: ByteSize::kib(200), ..ClusterOptions::ephemeral(dir.path()) };
    let cluster = LocalCluster::start(&opts).await.unwrap();
    let client = cluster.client().await.unwrap();
    let files: Vec<Vec<u8>> = (0..8u8).map(|i| pattern(300_000 + usize::from(i), 20 + i)).collect();
    for (i, data) in files.iter().enumerate() {
        let mut w = client.create(&format!("/t{i}"), false).await.unwrap();
        w.write(data).await.unwrap();
        w.close().await.unwrap();
    }
    let mut without_tail = 0;
    for (i, data) in files.iter().enumerate() {
        let f = client.open(&format!("/t{i}")).await.unwrap();
        if f.tail().is_none() {
            without_tail += 1;
        }
        let mut footer = vec![0u8; 64 << 10];
        let at = (data.len() - footer.len()) as u64;
        assert_eq!(f.read_at(at, &mut footer).await.unwrap(), footer.len());
        assert_eq!(footer, data[at as usize..], "footer of /t{i}");
    }
    assert!(without_tail >= 4, "{without_tail} of 8 opens came without their tail");
    client.close();
    cluster.shutdown().await.unwrap();
}

/// Opening a file whose writer has not completed it fails at once with a kind of its own, not
/// retryable, naming the path (issue 40): it was `Unavailable`, which the SDK retried, so a
/// caller waited out its deadline for a writer that may take hours. The client here would
/// retry a retryable error for its whole 8 s deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_being_written_fails_to_open_at_once_not_retryable() {
    let (_dir, cluster) = start().await;
    let writer = cluster.client().await.unwrap();
    let mut w = writer.create("/busy", false).await.unwrap();
    let data = pattern(BLOCK + 100, 5);
    w.write(&data).await.unwrap();
    let mut settings = cluster.client_settings();
    settings.deadline = cv_net::config::Dur::secs(8);
    settings.retries = 1_000;
    settings.backoff = cv_net::config::Dur::millis(50);
    let reader = cluster.client_with(settings).await.unwrap();
    assert!(!reader.stat("/busy").await.unwrap().complete, "visible to stat while it is written");

    let t = Instant::now();
    let err = reader.open("/busy").await.unwrap_err();
    let took = t.elapsed();
    assert_eq!((err.kind(), err.retryable()), (ErrorKind::FileIncomplete, false), "{err}");
    assert!(err.message().contains("/busy") && err.message().contains("being written"), "{err}");
    assert!(took < Duration::from_millis(1_000), "took {took:?} (deadline 8 s)");

    // Once its writer completes it, it opens.
    w.close().await.unwrap();
    let f = reader.open("/busy").await.unwrap();
    assert!(f.sequential(0).read_to_end().await.unwrap() == data);
    reader.close();
    writer.close();
    cluster.shutdown().await.unwrap();
}

/// An overwrite is atomic: while the new version is written every open gets the old one
/// byte-exact (footer included), a writer that gives up leaves it as it was, and a
/// conditional completion publishes only over the version it expects.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_overwrite_replaces_the_file_only_when_complete() {
    use cv_client::Expect;
    let (_dir, cluster) = start().await;
    let client = cluster.client().await.unwrap();
    let old = pattern(BLOCK + 300, 1);
    let mut w = client.create("/o", false).await.unwrap();
    w.write(&old).await.unwrap();
    let first = w.close().await.unwrap();
    let read = |path: &'static str| {
        let client = client.clone();
        async move { client.open(path).await.unwrap().sequential(0).read_to_end().await.unwrap() }
    };

    let mut w = client.create("/o", true).await.unwrap();
    w.write(&pattern(2 * BLOCK + 7, 2)).await.unwrap();
    assert!(read("/o").await == old, "an open during the overwrite reads the old version");
    let st = client.stat("/o").await.unwrap();
    assert!(st.complete && st.id == first.id && st.length == old.len() as u64, "{st:?}");
    w.abort().await.unwrap();
    assert!(read("/o").await == old, "an abandoned overwrite leaves the old version");

    // Conditional: two writers expect the first version; the first to close wins.
    let expect = Expect::Version { file_id: first.id, version: first.version };
    let mut a = client.create("/o", true).await.unwrap();
    let mut b = client.create("/o", true).await.unwrap();
    a.write(&pattern(1000, 3)).await.unwrap();
    b.write(&pattern(1000, 4)).await.unwrap();
    let won = a.close_if(expect).await.unwrap();
    let lost = b.close_if(expect).await.unwrap_err();
    assert_eq!(lost.kind(), ErrorKind::Stale, "{lost}");
    assert!(read("/o").await == pattern(1000, 3), "the winner's bytes");
    let mut c = client.create("/o", true).await.unwrap();
    c.write(b"x").await.unwrap();
    assert_eq!(c.close_if(Expect::Absent).await.unwrap_err().kind(), ErrorKind::AlreadyExists);
    assert_eq!(client.stat("/o").await.unwrap().id, won.id, "failed expectations changed nothing");
    client.close();
    cluster.shutdown().await.unwrap();
}

/// A writer of its own on cv-net (not the SDK) stores a block, then completes the file with a
/// tail that is not what the block holds: the master reads the tail back from the block and
/// never keeps it, so no open returns a footer that the blocks contradict; reads of those bytes
/// get the block's. The same writer with the right tail has it kept and served with the open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tail_that_differs_from_its_blocks_is_never_served() {
    use cv_net::rpc::{self, Conn};
    use cv_net::tls::Identity;
    use cv_wire::msg::*;
    let (_dir, cluster) = start().await;
    let cfg = cv_client::ClientConfig::load(cluster.client_config()).unwrap();
    let ep = rpc::client_endpoint(&Identity::load(&cfg.tls).unwrap(), &cfg.transport).unwrap();
    let limits = cv_wire::Limits::DEFAULT;
    let master = Conn::connect(&ep, cluster.master_addr(), Role::Client, "hostile", limits).await.unwrap();
    let data = pattern(100_000, 9);
    let write = |path: &'static str| {
        let (master, ep, data) = (master.clone(), ep.clone(), data.clone());
        async move {
            let create = Create { path: path.into(), overwrite: false, mode: 0o644, block_size: 0 };
            let c: CreateOk = master.call(&create, &[]).await.unwrap().decode_body().unwrap();
            let add = AddBlock { file_id: c.file_id, index: 0, exclude: vec![] };
            let b: AddBlockOk = master.call(&add, &[]).await.unwrap().decode_body().unwrap();
            let shard = Conn::connect(&ep, b.block.addr.socket_addr(), Role::Client, "hostile", limits).await.unwrap();
            let w = WriteBlock { block_id: b.block.block_id, pinned: c.pin_blocks, cap: b.block.cap };
            shard.call(&w, &[&data]).await.unwrap().decode_body::<WriteBlockOk>().unwrap();
            let blocks = vec![BlockLen { block_id: b.block.block_id, len: data.len() as u64 }];
            Complete { file_id: c.file_id, length: data.len() as u64, blocks, tail_offset: data.len() as u64 - 1000 }
        }
    };
    let tail_cached = |path: &'static str| {
        let master = master.clone();
        async move {
            let f = master.call(&Open { path: path.into() }, &[]).await.unwrap();
            (f.decode_body::<OpenOk>().unwrap().tail_cached, f.payload().to_vec())
        }
    };
    let mut lie = data[data.len() - 1000..].to_vec();
    lie[500] ^= 0x40;
    master.call(&write("/lying").await, &[&lie]).await.unwrap();
    master.call(&write("/honest").await, &[&data[data.len() - 1000..]]).await.unwrap();
    // The honest tail is kept once read back; the lying one, checked first, never is.
    let t = Instant::now();
    while !tail_cached("/honest").await.0 {
        assert!(t.elapsed() < Duration::from_secs(10), "the honest tail was never kept");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(tail_cached("/honest").await.1, data[data.len() - 1000..]);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(tail_cached("/lying").await, (false, vec![]), "a tail that differs from its block was kept");
    let client = cluster.client().await.unwrap();
    let f = client.open("/lying").await.unwrap();
    let mut tail = vec![0u8; 1000];
    f.read_at(data.len() as u64 - 1000, &mut tail).await.unwrap();
    assert!(tail == data[data.len() - 1000..], "the block's bytes, not the writer's tail");
    client.close();
    cluster.shutdown().await.unwrap();
}
