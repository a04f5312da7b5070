//! Three masters in a Raft group (master/HA.md), in this process over real QUIC with mutual
//! TLS, with a worker and clients that know all three: the leader stops, another takes over,
//! and nothing acknowledged is lost; the stopped master comes back and catches up.

use cv_tools::cluster::{ClusterOptions, LocalCluster};
use std::time::{Duration, Instant};

/// The masters' Raft and leadership log, captured per test (cargo shows it for a failure).
fn log() {
    let filter =
        tracing_subscriber::EnvFilter::new("cv_master_raft=info,cv_master=info,cv_client=debug,openraft=error");
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_test_writer().try_init();
}

async fn leader(cluster: &LocalCluster, not: Option<usize>, within: Duration) -> usize {
    let end = Instant::now() + within;
    loop {
        if let Some(i) = cluster.leader().filter(|i| Some(*i) != not) {
            return i;
        }
        assert!(Instant::now() < end, "no master leads after {within:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn write(client: &cv_client::Client, path: &str, data: &[u8]) {
    let mut w = client.create(path, false).await.unwrap_or_else(|e| panic!("create {path}: {e}"));
    w.write(data).await.unwrap();
    w.close().await.unwrap_or_else(|e| panic!("close {path}: {e}"));
}

async fn read(client: &cv_client::Client, path: &str) -> Vec<u8> {
    let f = client.open(path).await.unwrap_or_else(|e| panic!("open {path}: {e}"));
    let mut buf = vec![0; f.len() as usize];
    let n = f.read_at(0, &mut buf).await.unwrap();
    buf.truncate(n);
    buf
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_leader_stops_and_the_group_keeps_every_acknowledged_file() {
    log();
    let dir = tempfile::tempdir().unwrap();
    let opts = ClusterOptions { masters: 3, ..ClusterOptions::ephemeral(dir.path()) };
    let mut cluster = LocalCluster::start(&opts).await.unwrap();
    let client = cluster.client().await.unwrap();
    client.mkdir("/ha", false).await.unwrap();
    for i in 0..10 {
        write(&client, &format!("/ha/a{i}"), format!("before {i}").as_bytes()).await;
    }
    // A follower refuses and names the leader; the client followed it.
    let old = leader(&cluster, None, Duration::from_secs(10)).await;
    assert_eq!(client.current_master(), cluster.master_addrs()[old], "the client does not talk to the leader");

    cluster.stop_master(old).await;
    let stopped_at = Instant::now();
    write(&client, "/ha/after-0", b"after 0").await;
    let first_write = stopped_at.elapsed();
    let new = leader(&cluster, Some(old), Duration::from_secs(10)).await;
    assert_ne!(new, old);
    for i in 1..10 {
        write(&client, &format!("/ha/after-{i}"), format!("after {i}").as_bytes()).await;
    }
    for i in 0..10 {
        assert_eq!(read(&client, &format!("/ha/a{i}")).await, format!("before {i}").as_bytes());
    }
    // The worker follows the new leader too: it is live there.
    let end = Instant::now() + Duration::from_secs(10);
    while !client.report().await.unwrap().workers.iter().any(|w| w.live) {
        assert!(Instant::now() < end, "the worker did not register with the new leader");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    cluster.start_master(old).await.unwrap();
    // A fresh client that knows only the restarted master is sent on to the leader.
    let mut only_old = cluster.client_settings();
    only_old.master = cluster.master_addrs()[old];
    only_old.masters = cluster.master_addrs();
    let c2 = cluster.client_with(only_old).await.unwrap();
    let listed = c2.list("/ha").await.unwrap();
    assert_eq!(listed.len(), 20, "a file acknowledged before or after the failover is missing");
    assert_eq!(read(&c2, "/ha/after-9").await, b"after 9");
    println!("first acknowledged write {first_write:?} after the leader stopped");
    c2.shutdown().await;
    client.shutdown().await;
    cluster.shutdown().await.unwrap();
}

fn cvctl(args: &[&str]) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_cvctl")).args(args).output().unwrap();
    assert!(out.status.success(), "cvctl {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_master_added_by_cvctl_catches_up_and_keeps_the_group_when_two_others_go() {
    log();
    let dir = tempfile::tempdir().unwrap();
    let opts = ClusterOptions { masters: 3, ..ClusterOptions::ephemeral(dir.path()) };
    let mut cluster = LocalCluster::start(&opts).await.unwrap();
    let client = cluster.client().await.unwrap();
    client.mkdir("/m", false).await.unwrap();
    for i in 0..5 {
        write(&client, &format!("/m/a{i}"), b"before the fourth").await;
    }
    let config = cluster.admin_config().to_str().unwrap().to_string();
    let (fourth, addr) = cluster.start_extra_master(4).await.unwrap();
    // A master without files grants no vote, however high the term and long the log asked.
    let raft4 = cluster.master_raft(fourth).unwrap().clone();
    assert!(raft4.is_catching_up());
    let far = cv_master_raft::LogId::new(cv_master_raft::openraft::CommittedLeaderId::new(99, 2), 1_000_000);
    let ask =
        cv_master_raft::openraft::raft::VoteRequest { vote: cv_master_raft::Vote::new(100, 2), last_log_id: Some(far) };
    assert!(!raft4.vote(ask.clone()).await.unwrap().vote_granted, "a master without files granted a vote");
    let added = tokio::task::spawn_blocking({
        let (config, addr) = (config.clone(), addr.to_string());
        move || cvctl(&["master", "add", "--config", &config, "--id", "4", "--addr", &addr])
    })
    .await
    .unwrap();
    assert!(added.contains("added"), "{added}");
    // Added and caught up: it votes again (it would grant this one: a higher term, a longer log).
    let end = Instant::now() + Duration::from_secs(10);
    while raft4.is_catching_up() {
        assert!(Instant::now() < end, "the added master never finished catching up");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let listed = tokio::task::spawn_blocking({
        let config = config.clone();
        move || cvctl(&["master", "list", "--config", &config])
    })
    .await
    .unwrap();
    assert_eq!(listed.lines().filter(|l| l.contains("voter") || l.contains("leader")).count(), 4, "{listed}");
    // Master 1 leaves the group and stops; then master 2 stops too. Of the voters {2, 3, 4}
    // only 3 and 4 are left: a write needs the new master's vote and log.
    tokio::task::spawn_blocking({
        let config = config.clone();
        move || cvctl(&["master", "remove", "--config", &config, "--id", "1"])
    })
    .await
    .unwrap();
    cluster.stop_master(0).await;
    cluster.stop_master(1).await;
    write(&client, "/m/after", b"with the fourth").await;
    for i in 0..5 {
        assert_eq!(read(&client, &format!("/m/a{i}")).await, b"before the fourth");
    }
    assert_eq!(read(&client, "/m/after").await, b"with the fourth");
    let leader = cluster.leader().expect("a master leads");
    assert!(leader == 2 || leader == fourth, "master {} leads", leader + 1);
    client.shutdown().await;
    cluster.shutdown().await.unwrap();
}

/// A master's Raft messages are taken only as its own member: a peer holding master 3's
/// certificate (a stolen key) that votes or appends as master 1 is refused `PermissionDenied`
/// naming both, probing as itself is taken, and the group goes on under its leader.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_master_certificate_speaks_only_as_its_own_member() {
    use cv_net::identity::CertRole;
    use cv_net::rpc::{Conn, client_endpoint};
    use cv_net::tls::{ClusterCa, Identity};
    use cv_wire::msg::{RaftAppend, RaftProbe, RaftProbeOk, RaftVote, RaftVoteReq, Role};
    use cv_wire::{ErrorCode, Limits};
    log();
    let dir = tempfile::tempdir().unwrap();
    let opts = ClusterOptions { masters: 3, ..ClusterOptions::ephemeral(dir.path()) };
    let cluster = LocalCluster::start(&opts).await.unwrap();
    let led = leader(&cluster, None, Duration::from_secs(10)).await;
    let target = (0..3).find(|i| *i != led && *i != 2).unwrap();
    let ca = ClusterCa::load_dir(&dir.path().join("certs")).unwrap();
    let stolen = ca.issue("cv-master-3", &CertRole::Master("cv-master-3".into()), &["127.0.0.1".into()]).unwrap();
    let id = Identity::from_pem(&ca.cert_pem(), &stolen.cert_pem, &stolen.key_pem).unwrap();
    let ep = client_endpoint(&id, &Default::default()).unwrap();
    let conn =
        Conn::connect(&ep, cluster.master_addrs()[target], Role::Master, "cv-master-3", Limits::DEFAULT).await.unwrap();
    let as_leader = (led + 1) as u64;
    let vote = RaftVote { term: 1_000, node: as_leader, committed: true };
    let calls: [(&str, Result<cv_wire::Frame, cv_net::NetError>); 3] = [
        ("append", conn.call(&RaftAppend { vote, prev: None, commit: None, entries: 0 }, &[]).await),
        ("vote", conn.call(&RaftVoteReq { vote: RaftVote { committed: false, ..vote }, last: None }, &[]).await),
        ("probe", conn.call(&RaftProbe { from: as_leader }, &[]).await),
    ];
    for (what, r) in calls {
        let e = r.err().unwrap_or_else(|| panic!("{what} as master {as_leader} was taken"));
        assert_eq!(e.code(), Some(ErrorCode::PermissionDenied), "{what}: {e}");
        assert!(e.to_string().contains("cv-master-3") && e.to_string().contains(&format!("member {as_leader}")), "{e}");
    }
    // As itself it may probe.
    let ok: RaftProbeOk = conn.call(&RaftProbe { from: 3 }, &[]).await.unwrap().decode_body().unwrap();
    assert_eq!(ok.this, target as u64 + 1);
    // The group did not move to the forged term: the same master leads and writes go on.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(leader(&cluster, None, Duration::from_secs(5)).await, led);
    let client = cluster.client().await.unwrap();
    write(&client, "/after-forgery", b"still here").await;
    assert_eq!(read(&client, "/after-forgery").await, b"still here");
    cluster.shutdown().await.unwrap();
}
