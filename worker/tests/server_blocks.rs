//! A real 2-shard worker (shard runtimes, O_DIRECT stores, QUIC with mutual TLS) serving
//! blocks to a quinn client: routing, byte-exact reads, deletes, corruption, warm restart.
#![allow(
    clippy::disallowed_types,
    clippy::disallowed_methods,
    reason = "the test's peers (client, master, object store) run on tokio; the ban is for shard and store code"
)]

#[path = "server_common.rs"]
mod common;

use common::*;
use cv_wire::msg::{DeleteBlocks, Done, Ping, Pong, Role, StatBlock};
use cv_wire::{ErrorCode, block_id, block_shard};

#[tokio::test(flavor = "current_thread")]
async fn blocks_round_trip_on_their_shards_and_survive_restart() {
    let pki = pki();
    let dir = scratch();
    let settings = settings(dir.path());
    let worker = start(&pki, &settings);
    assert_eq!(worker.shard_addrs().len(), 2);
    let client = connect(&pki.client, worker.shard_addrs()).await;

    // Blocks of several sizes on both shards, including empty, unaligned and full-size ones.
    let sizes = [0usize, 1, 4095, 4097, 65_536, 200_001, 1 << 20];
    let mut blocks = Vec::new();
    for (seq, &len) in sizes.iter().enumerate() {
        for shard in 0..2u16 {
            let id = block_id(seq as u64 + 1, shard);
            let data = pattern(id, len);
            let ok = write(&client.shards[usize::from(shard)], id, &data).await.unwrap();
            assert_eq!(ok.len, len as u64);
            assert_eq!(ok.crc32, crc32fast::hash(&data));
            blocks.push((id, data));
        }
    }

    // Byte-exact reads at many offsets and lengths, including ranges past the end.
    for (id, data) in &blocks {
        let conn = &client.shards[usize::from(block_shard(*id))];
        let len = data.len() as u64;
        let probes = [(0, len), (0, 1), (1, 4096), (4095, 2), (65_535, 65_538), (len / 3, len / 2), (len, 10)];
        for (off, n) in probes {
            if off > len {
                continue;
            }
            let (block_len, got) = read(conn, *id, off, n).await.unwrap();
            assert_eq!(block_len, len);
            let end = (off + n).min(len);
            assert_eq!(got, data[off as usize..end as usize], "block {id} at {off}+{n}");
        }
    }

    // A committed block is never overwritten: the same bytes again are acknowledged (a
    // writer retrying after a lost answer), other bytes are refused and change nothing.
    let (id, data) = &blocks[9];
    let conn = &client.shards[usize::from(block_shard(*id))];
    assert_eq!(write(conn, *id, data).await.unwrap().crc32, crc32fast::hash(data));
    let mut forged = data.clone();
    forged[100] ^= 1;
    let e = write(conn, *id, &forged).await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::AlreadyExists), "{e}");
    assert!(e.message().contains("never overwritten"), "{e}");
    assert_eq!(code(write(conn, *id, &data[..10]).await), ErrorCode::AlreadyExists);
    assert_eq!(read(conn, *id, 0, data.len() as u64).await.unwrap().1, *data);

    // Stat and ping.
    let (id, data) = &blocks[5];
    let shard = usize::from(block_shard(*id));
    let stat = stat_block(&pki, worker.shard_addrs()[shard], *id).await.unwrap();
    // A client's write is pinned whatever it asks: only the master unpins (after an export).
    assert_eq!((stat.len, stat.pinned, stat.in_memory), (data.len() as u64, true, false), "memory tier off");
    // StatBlock carries no capability: it is for workers and masters.
    let e = client.shards[shard].call(&StatBlock { block_id: *id }, &[]).await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::PermissionDenied), "{e}");
    let reply = client.shards[0].call(&Ping { nonce: 77 }, &[b"echo me"]).await.unwrap();
    assert_eq!(reply.decode_body::<Pong>().unwrap().nonce, 77);
    assert_eq!(reply.payload(), b"echo me");

    // An offset past the end is refused.
    assert_eq!(code(read(&client.shards[0], blocks[2].0, 1 << 30, 1).await), ErrorCode::InvalidArgument);

    // Warm restart on the same directories serves every block again.
    client.endpoint.close(0u32.into(), b"restart");
    worker.shutdown().unwrap();
    let worker = start(&pki, &settings);
    let client = connect(&pki.client, worker.shard_addrs()).await;
    for (id, data) in &blocks {
        let conn = &client.shards[usize::from(block_shard(*id))];
        let (_, got) = read(conn, *id, 0, data.len() as u64).await.unwrap();
        assert_eq!(&got, data, "block {id} after restart");
    }
    client.endpoint.close(0u32.into(), b"done");
    worker.shutdown().unwrap();
}

#[tokio::test(flavor = "current_thread")]
async fn wrong_shard_redirects_and_deletes_are_final() {
    let pki = pki();
    let dir = scratch();
    let worker = start(&pki, &settings(dir.path()));
    let routes = worker.routes().to_vec();
    assert_eq!(routes[1], format!("127.0.0.1:{}", worker.shard_addrs()[1].port()));
    let client = connect(&pki.client, worker.shard_addrs()).await;
    let (s0, s1) = (&client.shards[0], &client.shards[1]);
    // Deletes are the master's orders.
    let master = connect_as(&pki.master, worker.shard_addrs(), Role::Master, MASTER).await;
    let (m0, m1) = (&master.shards[0], &master.shards[1]);

    // Every request for a shard-1 block sent to shard 0 is redirected to shard 1.
    let id = block_id(9, 1);
    let data = pattern(id, 10_000);
    let e = write(s0, id, &data).await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::WrongShard));
    assert!(e.retryable());
    assert_eq!(e.redirect(), Some(routes[1].as_str()));
    write(s1, id, &data).await.unwrap();
    let e = read(s0, id, 0, 10).await.unwrap_err();
    assert_eq!((e.code(), e.redirect()), (Some(ErrorCode::WrongShard), Some(routes[1].as_str())));
    assert_eq!(code(s0.call(&StatBlock { block_id: id }, &[]).await), ErrorCode::WrongShard);
    // A delete naming a foreign block deletes nothing.
    let own = block_id(10, 0);
    write(s0, own, &pattern(own, 100)).await.unwrap();
    assert_eq!(code(m0.call(&DeleteBlocks { block_ids: vec![own, id] }, &[]).await), ErrorCode::WrongShard);
    assert_eq!(read(s0, own, 0, 100).await.unwrap().1, pattern(own, 100));
    // A client may not delete a block at all: nothing is dropped.
    let e = s1.call(&DeleteBlocks { block_ids: vec![id] }, &[]).await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::PermissionDenied), "{e}");
    assert!(e.message().contains("the master's order") && e.message().contains("client certificate"), "{e}");
    assert_eq!(read(s1, id, 0, 10_000).await.unwrap().1, data);
    // A shard index this worker does not have is simply not here.
    assert_eq!(code(read(s0, block_id(1, 7), 0, 1).await), ErrorCode::NotFound);

    // Delete, then read: NotFound; deleting again is not an error.
    let done = m1.call(&DeleteBlocks { block_ids: vec![id] }, &[]).await.unwrap();
    done.decode_body::<Done>().unwrap();
    assert_eq!(code(read(s1, id, 0, 10).await), ErrorCode::NotFound);
    m1.call(&DeleteBlocks { block_ids: vec![id] }, &[]).await.unwrap();
    assert_eq!(code(read(s1, block_id(12_345, 1), 0, 1).await), ErrorCode::NotFound);

    // A block larger than block_size is refused and not stored.
    let big = block_id(11, 0);
    assert_eq!(code(write(s0, big, &vec![7u8; (1 << 20) + 1]).await), ErrorCode::InvalidArgument);
    assert_eq!(code(read(s0, big, 0, 1).await), ErrorCode::NotFound);
    client.endpoint.close(0u32.into(), b"done");
    master.endpoint.close(0u32.into(), b"done");
    // Nor may a client certificate say it is the master, at the shard's hello.
    let ep = cv_net::rpc::client_endpoint(&pki.client, &Default::default()).unwrap();
    let e = cv_net::rpc::Conn::connect(&ep, worker.shard_addrs()[0], Role::Master, MASTER, cv_wire::Limits::DEFAULT)
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::PermissionDenied), "{e}");
    ep.close(0u32.into(), b"done");
    worker.shutdown().unwrap();
}

#[tokio::test(flavor = "current_thread")]
async fn a_flipped_byte_on_disk_gives_corrupt_never_wrong_bytes() {
    let pki = pki();
    let dir = scratch();
    let worker = start(&pki, &settings(dir.path()));
    let client = connect(&pki.client, worker.shard_addrs()).await;
    let s1 = &client.shards[1];
    let id = block_id(3, 1);
    let data = pattern(id, 300_000);
    write(s1, id, &data).await.unwrap();
    let other = block_id(4, 1);
    write(s1, other, &pattern(other, 5000)).await.unwrap();
    let twin = block_id(5, 1);
    let twin_data = pattern(twin, 300_000);
    write(s1, twin, &twin_data).await.unwrap();

    // Find each block's bytes in shard 1's data file and flip one in its third chunk.
    let path = dir.path().join("shard-1").join("blocks.data");
    let file = std::fs::read(&path).unwrap();
    for d in [&data, &twin_data] {
        let at = file.windows(64).position(|w| w == &d[..64]).expect("block bytes on disk");
        let victim = at + 150_000;
        use std::os::unix::fs::FileExt;
        let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        f.write_all_at(&[file[victim] ^ 0x20], victim as u64).unwrap();
        f.sync_all().unwrap();
    }
    // Chunks before the flip still verify; the chunk holding it never comes back.
    assert_eq!(read(s1, id, 0, 65_536).await.unwrap().1, data[..65_536]);
    // Read whole, a chunk goes with its stored crc for the reader to check: the frame check
    // refuses it (this raw client calls that Malformed; the SDK asks again with `verify`).
    for b in [id, twin] {
        let e = read(s1, b, 131_072, 65_536).await.unwrap_err();
        assert_eq!(e.code(), Some(ErrorCode::Malformed), "{e}");
        assert!(e.to_string().contains("crc32"), "{e}");
    }
    // Asked for part of the chunk, or asked to verify, the shard checks it and drops the block.
    let e = read(s1, id, 140_000, 20_000).await.unwrap_err();
    let twin_e = read_checked(s1, twin, 131_072, 65_536, true).await.unwrap_err();
    for e in [e, twin_e] {
        assert_eq!(e.code(), Some(ErrorCode::Corrupt));
        assert!(e.retryable(), "corrupt must tell the caller to refetch");
    }
    assert_eq!(code(read(s1, twin, 0, 10).await), ErrorCode::NotFound);
    // The block was dropped, so the caller refetches it; the neighbour is unharmed.
    assert_eq!(code(read(s1, id, 0, 10).await), ErrorCode::NotFound);
    assert_eq!(read(s1, other, 0, 5000).await.unwrap().1, pattern(other, 5000));
    // Rewriting it (the refetch) serves correct bytes again.
    write(s1, id, &data).await.unwrap();
    assert_eq!(read(s1, id, 0, 300_000).await.unwrap().1, data);
    client.endpoint.close(0u32.into(), b"done");
    worker.shutdown().unwrap();
}

/// A worker whose shard finds its block index damaged (a bad record with intact ones after it)
/// does not start, says which file and where, and leaves the file as it is (STORE-FORMAT.md).
#[tokio::test(flavor = "current_thread")]
async fn a_damaged_block_index_stops_the_worker_and_names_the_file() {
    let pki = pki();
    let dir = scratch();
    let settings = settings(dir.path());
    let worker = start(&pki, &settings);
    let client = connect(&pki.client, worker.shard_addrs()).await;
    for seq in 1..4u64 {
        let id = block_id(seq, 1);
        write(&client.shards[1], id, &pattern(id, 5000)).await.unwrap();
    }
    client.endpoint.close(0u32.into(), b"restart");
    worker.shutdown().unwrap();

    // A byte of shard 1's second ADD: the third comes after it.
    let index = dir.path().join("shard-1").join("blocks.index");
    let mut bytes = std::fs::read(&index).unwrap();
    let second = 28 + 8 + u32::from_le_bytes(bytes[28..32].try_into().unwrap()) as usize;
    bytes[second + 8 + 5] ^= 0x40;
    std::fs::write(&index, &bytes).unwrap();

    let err = match cv_worker::WorkerServer::start(&settings, &pki.node, &Default::default()) {
        Ok(w) => {
            w.shutdown().unwrap();
            panic!("a worker started on a damaged block index");
        }
        Err(e) => e,
    };
    assert_eq!(err.kind(), cv_worker::WorkerErrorKind::Store, "{err}");
    assert!(!err.retryable());
    // What `cvctl worker` prints before it exits non-zero.
    let text = err.to_string();
    for part in [index.display().to_string(), format!("record at byte {second}"), "bad crc".into(), "move".into()] {
        assert!(text.contains(&part), "{text:?} lacks {part:?}");
    }
    assert_eq!(std::fs::read(&index).unwrap(), bytes, "the damaged index is not cut");
}
