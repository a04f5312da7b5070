//! A hostile client built on cv-net, holding a client certificate of the cluster, against a
//! real master and worker over QUIC: it deletes, overwrites, forges fills, leases and reads
//! blocks it was given no capability for (docs/security.md, "Block capabilities"). Each is
//! refused, and every acknowledged file still reads byte-exact. A second test lets
//! capabilities expire under an open file: the client renews them and reads on.

use cv_client::{ErrorKind, MountMode};
use cv_net::rpc::{self, Conn};
use cv_net::tls::Identity;
use cv_tools::cluster::{ClusterOptions, LocalCluster};
use cv_wire::msg::*;
use cv_wire::{ErrorCode, Limits, block_id, block_shard};
use std::time::Duration;

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
}

/// A raw connection as the cluster's application certificate (`client.toml`).
async fn hostile(cluster: &LocalCluster) -> (quinn::Endpoint, Conn) {
    let cfg = cv_client::ClientConfig::load(cluster.client_config()).unwrap();
    let ep = rpc::client_endpoint(&Identity::load(&cfg.tls).unwrap(), &cfg.transport).unwrap();
    let master = Conn::connect(&ep, cluster.master_addr(), Role::Client, "hostile", Limits::DEFAULT).await.unwrap();
    (ep, master)
}

async fn open(master: &Conn, path: &str) -> OpenOk {
    master.call(&Open { path: path.into() }, &[]).await.unwrap().decode_body().unwrap()
}

fn denied<T: std::fmt::Debug>(what: &str, r: Result<T, cv_net::NetError>) -> String {
    let e = r.expect_err(what);
    assert_eq!(e.code(), Some(ErrorCode::PermissionDenied), "{what}: {e}");
    e.to_string()
}

fn read(id: u64, len: u64, source: Option<BlockSource>, cap: BlockCap) -> ReadBlock {
    ReadBlock { block_id: id, offset: 0, len, source, fill_only: false, verify: true, cap }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_cannot_touch_blocks_beyond_the_capabilities_it_was_given() {
    let dir = tempfile::tempdir().unwrap();
    let store = tempfile::tempdir().unwrap();
    let (object, secret) = (pattern(300_000, 1), pattern(300_000, 2));
    std::fs::write(store.path().join("a.bin"), &object).unwrap();
    std::fs::write(store.path().join("secret.bin"), &secret).unwrap();
    let cluster = LocalCluster::start(&ClusterOptions::ephemeral(dir.path())).await.unwrap();
    let admin = cluster.client().await.unwrap();
    let url = format!("fs://{}", store.path().display());
    admin.mount(&url, "/m", MountMode::Cache, vec![]).await.unwrap();
    let app = cluster.app_client().await.unwrap();
    let file = pattern(9 << 20, 3);
    let mut w = app.create("/f", false).await.unwrap();
    w.write(&file).await.unwrap();
    w.close().await.unwrap();

    let (ep, master) = hostile(&cluster).await;
    let f = open(&master, "/f").await;
    let cached = open(&master, "/m/a.bin").await;
    let b0 = f.blocks[0].clone();
    let shard = Conn::connect(&ep, b0.addr.socket_addr(), Role::Client, "hostile", Limits::DEFAULT).await.unwrap();
    let len = b0.len;

    // What the open gave does work: the block reads, byte-exact.
    let got = shard.call(&read(b0.block_id, len, None, b0.cap), &[]).await.unwrap();
    assert!(got.payload() == &file[..len as usize]);

    // No deleting, no overwriting (with none, or with the read capability), no lease and no
    // read without the block's own capability.
    denied("delete", shard.call(&DeleteBlocks { block_ids: vec![b0.block_id] }, &[]).await);
    let forged = vec![0xEE; len as usize];
    let e = denied(
        "write without",
        shard.call(&WriteBlock { block_id: b0.block_id, pinned: false, cap: BlockCap::default() }, &[&forged]).await,
    );
    assert!(e.contains(&format!("block {}", b0.block_id)), "{e}");
    denied(
        "write with a read capability",
        shard.call(&WriteBlock { block_id: b0.block_id, pinned: true, cap: b0.cap }, &[&forged]).await,
    );
    let next = block_id((b0.block_id >> 16) + 1000, block_shard(b0.block_id));
    denied(
        "write a block never allocated",
        shard.call(&WriteBlock { block_id: next, pinned: true, cap: b0.cap }, &[&forged]).await,
    );
    denied("lease without", shard.call(&LeaseBlock { block_id: b0.block_id, cap: BlockCap::default() }, &[]).await);
    denied("stat", shard.call(&StatBlock { block_id: b0.block_id }, &[]).await);
    let b1 = f.blocks[1].clone();
    let shard1 = Conn::connect(&ep, b1.addr.socket_addr(), Role::Client, "hostile", Limits::DEFAULT).await.unwrap();
    denied("read with another block's capability", shard1.call(&read(b1.block_id, 10, None, b0.cap), &[]).await);
    let mut tampered = b0.cap;
    tampered.expires_ms += 3_600_000;
    denied("read with a lengthened capability", shard.call(&read(b0.block_id, 10, None, tampered), &[]).await);

    // Forged fills: a block of the cached object asked to be filled from another object, or
    // from another range of it, and a made-up block filled from the secret object.
    let ufs = cached.ufs.clone().expect("a cached file names its object");
    let c0 = cached.blocks[0].clone();
    let cshard = Conn::connect(&ep, c0.addr.socket_addr(), Role::Client, "hostile", Limits::DEFAULT).await.unwrap();
    let from = |key: &str, offset: u64| BlockSource {
        object: UfsRef { mount: ufs.mount.clone(), key: key.into(), version: ufs.version.clone() },
        offset,
        len: c0.len,
    };
    let e = denied(
        "fill from another object",
        cshard.call(&read(c0.block_id, c0.len, Some(from("secret.bin", 0)), c0.cap), &[]).await,
    );
    assert!(e.contains("another source"), "{e}");
    denied("fill from another range", cshard.call(&read(c0.block_id, 10, Some(from("a.bin", 1)), c0.cap), &[]).await);
    let made_up = block_id((c0.block_id >> 16) + 5000, block_shard(c0.block_id));
    denied(
        "fill a made-up block",
        cshard.call(&read(made_up, 10, Some(from("secret.bin", 0)), BlockCap::default()), &[]).await,
    );
    // The genuine fill still works.
    let got = cshard.call(&read(c0.block_id, c0.len, Some(from("a.bin", 0)), c0.cap), &[]).await.unwrap();
    assert!(got.payload() == &object[..c0.len as usize]);
    ep.close(0u32.into(), b"done");

    // Nothing changed: every acknowledged byte reads back as written.
    let f = app.open("/f").await.unwrap();
    let mut buf = vec![0u8; file.len()];
    assert_eq!(f.read_at(0, &mut buf).await.unwrap(), file.len());
    assert!(buf == file, "an acknowledged file changed");
    let a = app.open("/m/a.bin").await.unwrap();
    let mut buf = vec![0u8; object.len()];
    assert_eq!(a.read_at(0, &mut buf).await.unwrap(), object.len());
    assert!(buf == object, "a cached object reads wrong");
    app.close();
    admin.close();
    cluster.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_file_outlives_its_capabilities() {
    let dir = tempfile::tempdir().unwrap();
    let opts =
        ClusterOptions { capability_lifetime: cv_net::config::Dur::secs(10), ..ClusterOptions::ephemeral(dir.path()) };
    let cluster = LocalCluster::start(&opts).await.unwrap();
    let app = cluster.app_client().await.unwrap();
    let data = pattern(2 << 20, 9);
    let mut w = app.create("/long", false).await.unwrap();
    w.write(&data).await.unwrap();
    w.close().await.unwrap();
    let f = app.open("/long").await.unwrap();
    let (ep, master) = hostile(&cluster).await;
    let old = open(&master, "/long").await.blocks[0].clone();
    let mut buf = vec![0u8; 1000];
    f.read_at(0, &mut buf).await.unwrap();

    tokio::time::sleep(Duration::from_secs(11)).await;
    // The old capability is refused as stale (open again), not as forged.
    let shard = Conn::connect(&ep, old.addr.socket_addr(), Role::Client, "hostile", Limits::DEFAULT).await.unwrap();
    let e = shard.call(&read(old.block_id, 10, None, old.cap), &[]).await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::StaleCapability), "{e}");
    assert!(e.to_string().contains("expired"), "{e}");
    ep.close(0u32.into(), b"done");
    // The file opened before reads on: its client fetched fresh capabilities.
    let mut all = vec![0u8; data.len()];
    assert_eq!(f.read_at(0, &mut all).await.unwrap(), data.len());
    assert!(all == data, "read after the capabilities expired differs");
    let missing = app.open("/nope").await.unwrap_err();
    assert_eq!(missing.kind(), ErrorKind::NotFound);
    app.close();
    cluster.shutdown().await.unwrap();
}
