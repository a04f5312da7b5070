//! Helpers shared by the worker-server tests (included with `#[path]`; no tests of its own):
//! a test CA, a 2-shard worker on ephemeral loopback ports over real O_DIRECT stores, and a
//! quinn client speaking the cv protocol through `cv_net::rpc::Conn`.
#![allow(
    clippy::disallowed_types,
    clippy::disallowed_methods,
    reason = "the test's peers (client, master, object store) run on tokio; the ban is for shard and store code"
)]
#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::Path;

use cv_net::NetError;
use cv_net::config::{ByteSize, Dur};
use cv_net::identity::CertRole;
use cv_net::quic::TransportSettings;
use cv_net::rpc::{Conn, client_endpoint};
use cv_net::tls::{ClusterCa, Identity};
use cv_wire::msg::{ReadBlock, ReadBlockOk, Role, WriteBlock, WriteBlockOk};
use cv_wire::{ErrorCode, Limits};
use cv_worker::{DataDirSettings, WorkerHandle, WorkerServer, WorkerSettings};

/// Identities under one test CA: the worker's node identity, a client's and a master's (named
/// [`MASTER`]).
#[derive(Debug)]
pub struct Pki {
    pub ca: ClusterCa,
    pub node: Identity,
    pub client: Identity,
    pub master: Identity,
}

/// The node name of [`Pki::master`].
pub const MASTER: &str = "m1";

pub fn pki() -> Pki {
    let ca = ClusterCa::generate("test").unwrap();
    let ident = |usage| {
        let issued = ca.issue("t", &usage, &[]).unwrap();
        Identity::from_pem(&ca.cert_pem(), &issued.cert_pem, &issued.key_pem).unwrap()
    };
    let node = ident(CertRole::Node);
    let client = ident(CertRole::Client);
    let master = ident(CertRole::Master(MASTER.into()));
    Pki { ca, node, client, master }
}

/// A scratch directory on the target's file system (ext4 here; O_DIRECT works).
pub fn scratch() -> tempfile::TempDir {
    tempfile::Builder::new().prefix("cv-server-").tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap()
}

/// 2 pinned shards on ephemeral loopback ports, 1 MiB blocks, 32 MiB of disk per shard,
/// no memory tier (every read is checked against disk), no fdatasync (tests only).
pub fn settings(dir: &Path) -> WorkerSettings {
    WorkerSettings {
        host: "127.0.0.1".into(),
        bind: "127.0.0.1".parse().unwrap(),
        base_port: 0,
        shards: 2,
        pin_cores: true,
        data_dirs: vec![DataDirSettings { path: dir.to_path_buf(), capacity: ByteSize::mib(64) }],
        memory_tier: ByteSize(0),
        block_size: ByteSize::mib(1),
        chunk_size: ByteSize::kib(64),
        heartbeat_interval: Dur::millis(100),
        sync_data: false,
        ring_depth: 64,
        node: "test-worker".into(),
        ..WorkerSettings::default()
    }
}

pub fn start(pki: &Pki, settings: &WorkerSettings) -> WorkerHandle {
    WorkerServer::start(settings, &pki.node, &TransportSettings::default()).expect("worker starts")
}

/// A client endpoint and one connection (after the hello) per shard.
#[derive(Debug)]
pub struct Client {
    pub endpoint: quinn::Endpoint,
    pub shards: Vec<Conn>,
}

pub async fn connect(identity: &Identity, addrs: &[SocketAddr]) -> Client {
    connect_as(identity, addrs, Role::Client, "test-client").await
}

/// [`connect`], saying `role` and `node` in the hello.
pub async fn connect_as(identity: &Identity, addrs: &[SocketAddr], role: Role, node: &str) -> Client {
    let endpoint = client_endpoint(identity, &TransportSettings::default()).unwrap();
    let mut shards = Vec::new();
    for &a in addrs {
        shards.push(Conn::connect(&endpoint, a, role, node, Limits::DEFAULT).await.unwrap());
    }
    Client { endpoint, shards }
}

/// Deterministic bytes that differ per block and per position.
pub fn pattern(id: u64, len: usize) -> Vec<u8> {
    let mut x = id.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

pub async fn write(conn: &Conn, block_id: u64, data: &[u8]) -> Result<WriteBlockOk, NetError> {
    let reply = conn.call(&WriteBlock { block_id, pinned: false }, &[data]).await?;
    Ok(reply.decode_body::<WriteBlockOk>()?)
}

pub async fn read(conn: &Conn, block_id: u64, offset: u64, len: u64) -> Result<(u64, Vec<u8>), NetError> {
    read_checked(conn, block_id, offset, len, false).await
}

/// [`read`], asking the shard to check every chunk itself (`ReadBlock.verify`).
pub async fn read_checked(
    conn: &Conn,
    block_id: u64,
    offset: u64,
    len: u64,
    verify: bool,
) -> Result<(u64, Vec<u8>), NetError> {
    let reply = conn.call(&ReadBlock { block_id, offset, len, source: None, fill_only: false, verify }, &[]).await?;
    let ok: ReadBlockOk = reply.decode_body()?;
    Ok((ok.block_len, reply.into_payload()))
}

/// The error code of a failed call (panics on success or a non-remote error).
pub fn code<T: std::fmt::Debug>(r: Result<T, NetError>) -> ErrorCode {
    let e = r.expect_err("call should fail");
    e.code().unwrap_or_else(|| panic!("not a remote error: {e}"))
}
