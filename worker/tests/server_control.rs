//! The control plane against a small real master (quinn on tokio via `cv_net::rpc::serve`)
//! that speaks the registry protocol: registration, heartbeats with block-report deltas,
//! the master's delete and re-register commands, and a master that is down, then restarts.
#![allow(
    clippy::disallowed_types,
    clippy::disallowed_methods,
    reason = "the test's peers (client, master, object store) run on tokio; the ban is for shard and store code"
)]

#[path = "server_common.rs"]
mod common;

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use cv_net::quic::TransportSettings;
use cv_net::rpc::{BoxFuture, Peer, Reply, Service, serve, server_endpoint};
use cv_wire::msg::{Heartbeat, HeartbeatOk, RegisterOk, RegisterWorker, Role, WorkerCommand};
use cv_wire::{ErrorCode, Frame, Kind, Limits, block_id};

const WORKER_ID: u64 = 42;

#[derive(Debug, Default)]
struct Seen {
    registrations: Vec<RegisterWorker>,
    heartbeats: Vec<Heartbeat>,
    commands: VecDeque<WorkerCommand>,
}

#[derive(Debug, Default)]
struct FakeMaster {
    seen: Mutex<Seen>,
}

impl Service for FakeMaster {
    fn handle<'a>(&'a self, _peer: &'a Peer, frame: Frame) -> BoxFuture<'a, Reply> {
        Box::pin(async move {
            let id = frame.header().request_id;
            let mut seen = self.seen.lock().unwrap();
            match frame.kind() {
                Kind::RegisterWorker => {
                    seen.registrations.push(frame.decode_body().unwrap());
                    Reply::ok(
                        id,
                        &RegisterOk { worker_id: WORKER_ID, heartbeat_ms: 50, keys: Default::default() },
                        Vec::new(),
                    )
                }
                Kind::Heartbeat => {
                    seen.heartbeats.push(frame.decode_body().unwrap());
                    let commands = seen.commands.drain(..).collect();
                    Reply::ok(id, &HeartbeatOk { commands }, Vec::new())
                }
                other => Reply::error(id, ErrorCode::Unsupported, other.name(), None),
            }
        })
    }
}

/// Serves a fake master on `addr` until the returned endpoint is closed.
async fn master_on(pki: &Pki, addr: SocketAddr) -> (quinn::Endpoint, Arc<FakeMaster>) {
    // A closed predecessor releases the port once its connections drained (quinn: ~3 s here,
    // far longer on a loaded machine).
    let start = Instant::now();
    let ep = loop {
        match server_endpoint(addr, &pki.node, &TransportSettings::default()) {
            Ok(ep) => break ep,
            Err(_) if start.elapsed() < Duration::from_secs(60) => {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(e) => panic!("master cannot bind {addr}: {e}"),
        }
    };
    let master = Arc::new(FakeMaster::default());
    tokio::spawn(serve(ep.clone(), master.clone(), Role::Master, "fake-master".into(), Limits::DEFAULT));
    (ep, master)
}

/// Polls `master` until `done` holds, for at most 10 s.
async fn wait_for(master: &FakeMaster, what: &str, done: impl Fn(&Seen) -> bool) {
    let start = Instant::now();
    while !done(&master.seen.lock().unwrap()) {
        assert!(start.elapsed() < Duration::from_secs(10), "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn reported_added(seen: &Seen, id: u64) -> Option<(u64, u16)> {
    seen.heartbeats.iter().flat_map(|h| &h.added).find(|r| r.block_id == id).map(|r| (r.len, r.shard))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registers_heartbeats_and_obeys_the_master() {
    let pki = pki();
    let dir = scratch();
    // A port where no master listens yet: the worker must serve anyway and keep retrying.
    let master_addr = std::net::UdpSocket::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let mut s = settings(dir.path());
    s.master = Some(master_addr.to_string());
    let worker = start(&pki, &s);
    let client = connect(&pki.client, worker.shard_addrs()).await;
    let early = block_id(1, 0);
    write(&client.shards[0], early, &pattern(early, 5000)).await.unwrap();
    assert_eq!(worker.worker_id(), None);
    tokio::time::sleep(Duration::from_millis(300)).await;

    // The master comes up: registration, then a heartbeat with the full block report.
    let (ep, master) = master_on(&pki, master_addr).await;
    wait_for(&master, "registration", |s| !s.registrations.is_empty()).await;
    {
        let seen = master.seen.lock().unwrap();
        let r = &seen.registrations[0];
        assert_eq!(r.worker_id, None);
        assert_eq!(r.host, "127.0.0.1");
        let ports: Vec<u16> = worker.shard_addrs().iter().map(|a| a.port()).collect();
        assert_eq!(r.shard_ports, ports);
        assert!(r.capacity > 60 << 20 && r.capacity <= 64 << 20, "capacity {}", r.capacity);
        assert!(r.used >= 5000, "used {}", r.used);
    }
    wait_for(&master, "full report", |s| reported_added(s, early) == Some((5000, 0))).await;
    assert_eq!(worker.worker_id(), Some(WORKER_ID));

    // A new block shows up as a delta with its length and shard.
    let id = block_id(2, 1);
    write(&client.shards[1], id, &pattern(id, 70_000)).await.unwrap();
    wait_for(&master, "added delta", |s| reported_added(s, id) == Some((70_000, 1))).await;
    assert!(master.seen.lock().unwrap().heartbeats.iter().all(|h| h.worker_id == WORKER_ID));

    // The master's delete reaches the owning shard; the removal comes back as a delta.
    master.seen.lock().unwrap().commands.push_back(WorkerCommand::DeleteBlocks(vec![id]));
    wait_for(&master, "removed delta", |s| s.heartbeats.iter().any(|h| h.removed.contains(&id))).await;
    assert_eq!(code(read(&client.shards[1], id, 0, 1).await), ErrorCode::NotFound);
    assert_eq!(read(&client.shards[0], early, 0, 5000).await.unwrap().1, pattern(early, 5000));

    // Re-register on request, keeping the id, followed by a full report again.
    let beats = master.seen.lock().unwrap().heartbeats.len();
    master.seen.lock().unwrap().commands.push_back(WorkerCommand::Reregister);
    wait_for(&master, "re-registration", |s| s.registrations.len() == 2).await;
    assert_eq!(master.seen.lock().unwrap().registrations[1].worker_id, Some(WORKER_ID));
    wait_for(&master, "full report after re-registration", |s| {
        s.heartbeats[beats..].iter().any(|h| h.added.iter().any(|r| r.block_id == early))
    })
    .await;

    // The master restarts on the same address: the worker comes back with its id.
    ep.close(0u32.into(), b"master restart");
    drop(ep);
    let (ep, master) = master_on(&pki, master_addr).await;
    wait_for(&master, "registration after master restart", |s| !s.registrations.is_empty()).await;
    assert_eq!(master.seen.lock().unwrap().registrations[0].worker_id, Some(WORKER_ID));
    wait_for(&master, "report to the new master", |s| reported_added(s, early).is_some()).await;

    client.endpoint.close(0u32.into(), b"done");
    worker.shutdown().unwrap();
    ep.close(0u32.into(), b"done");
}
