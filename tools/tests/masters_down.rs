//! Issue 41: one master of three is down (its port silent, as after kill -9) and a new client
//! (a `cvctl` process's life: connect, one call, shutdown) costs nothing noticeable: it does
//! not wait for the dead master's dial, neither to find the leader nor to close. A leader
//! hint that names the dead master or a follower still works, at the price of a short wait
//! or one redirect, and is corrected.
//!
//! In this process over real QUIC with mutual TLS: three masters in a Raft group and a worker.

use cv_client::{Client, ClientConfig, LeaderHint};
use cv_net::tls::Identity;
use cv_tools::cluster::{ClusterOptions, LocalCluster};
use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

/// The group with master 0 (the first one clients list) stopped and its port held by a
/// socket that never answers; returns the cluster, that socket and the leader's index.
async fn group_with_a_dead_master(dir: &std::path::Path) -> (LocalCluster, UdpSocket, usize) {
    let opts = ClusterOptions { masters: 3, shards: 1, pin_cores: false, ..ClusterOptions::ephemeral(dir) };
    let mut cluster = LocalCluster::start(&opts).await.unwrap();
    let dead = cluster.master_addrs()[0];
    cluster.stop_master(0).await;
    // Its endpoint lets the port go once its connections have drained (slow on a loaded
    // 2-core CI machine: a 10 s wait once ran out).
    let end = Instant::now() + Duration::from_secs(30);
    let hole = loop {
        match UdpSocket::bind(dead) {
            Ok(s) => break s,
            Err(e) => assert!(Instant::now() < end, "the stopped master's port {dead}: {e}"),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let end = Instant::now() + Duration::from_secs(20);
    let leader = loop {
        if let Some(i) = cluster.leader().filter(|i| *i != 0) {
            break i;
        }
        assert!(Instant::now() < end, "no master leads without master 1");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    (cluster, hole, leader)
}

/// One short-lived client's life; how long it took, and where its calls went.
async fn one_call(cfg: &ClientConfig, identity: &Identity, hint: Option<LeaderHint>) -> (Duration, SocketAddr, usize) {
    let started = Instant::now();
    let client = Client::connect_hinted(cfg.client.clone(), identity, &cfg.transport, hint).await.unwrap();
    client.stat("/").await.unwrap();
    let (to, connections) = (client.current_master(), client.open_connections());
    client.shutdown().await;
    (started.elapsed(), to, connections)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_master_costs_a_new_client_no_dial_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let (cluster, _hole, leader) = group_with_a_dead_master(dir.path()).await;
    let cfg = ClientConfig::load(cluster.client_config()).unwrap();
    let identity = Identity::load(&cfg.tls).unwrap();
    // What a dial of the dead master waits for an answer before it gives up.
    let dial_timeout = cfg.transport.idle_timeout.get();
    for round in 0..3 {
        let (took, to, _) = one_call(&cfg, &identity, None).await;
        println!("round {round}: connect + stat + shutdown in {took:?}");
        assert_eq!(to, cluster.master_addrs()[leader], "the call did not end at the leader");
        assert!(
            took < dial_timeout / 3,
            "a new client took {took:?} with one master down (dial timeout {dial_timeout:?})"
        );
    }
    cluster.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hint_naming_a_dead_master_or_a_follower_still_works() {
    let dir = tempfile::tempdir().unwrap();
    let (cluster, _hole, leader) = group_with_a_dead_master(dir.path()).await;
    let cfg = ClientConfig::load(cluster.client_config()).unwrap();
    let identity = Identity::load(&cfg.tls).unwrap();
    let dial_timeout = cfg.transport.idle_timeout.get();
    let addrs = cluster.master_addrs();
    let follower = (1..3).find(|i| *i != leader).unwrap();
    let hints = tempfile::tempdir().unwrap();
    let hint = LeaderHint::in_dir(hints.path(), &cfg.client);

    for (named, what) in [(addrs[0], "the dead master"), (addrs[follower], "a follower")] {
        hint.write(named).unwrap();
        let (took, to, _) = one_call(&cfg, &identity, Some(hint.clone())).await;
        println!("hint naming {what}: connect + stat + shutdown in {took:?}");
        assert_eq!(to, addrs[leader], "with a hint naming {what}, the call did not end at the leader");
        assert!(took < dial_timeout / 2, "a hint naming {what} cost {took:?} (dial timeout {dial_timeout:?})");
        assert_eq!(hint.read(), Some(addrs[leader]), "the hint naming {what} was not corrected");
    }
    // A damaged hint is no hint.
    std::fs::write(hint.path(), "leader = ???").unwrap();
    let (_, to, _) = one_call(&cfg, &identity, Some(hint.clone())).await;
    assert_eq!(to, addrs[leader]);
    // A right hint: only the leader is dialed.
    let (took, to, connections) = one_call(&cfg, &identity, Some(hint.clone())).await;
    println!("hint naming the leader: connect + stat + shutdown in {took:?}, {connections} connection(s)");
    assert_eq!(to, addrs[leader]);
    assert_eq!(connections, 1, "with a right hint other masters were dialed too");
    cluster.shutdown().await.unwrap();
}
