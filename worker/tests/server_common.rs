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
use cv_net::capability::{Access, KeySchedule, now_ms, source_digest};
use cv_net::config::{ByteSize, Dur};
use cv_net::identity::CertRole;
use cv_net::quic::TransportSettings;
use cv_net::rpc::{Conn, client_endpoint};
use cv_net::tls::{ClusterCa, Identity};
use cv_wire::msg::{
    BlockCap, BlockSource, ReadBlock, ReadBlockOk, Role, StatBlock, StatBlockOk, WriteBlock, WriteBlockOk,
};
use cv_wire::{ErrorCode, Limits};
use cv_worker::{DataDirSettings, WorkerHandle, WorkerServer, WorkerSettings};
use std::time::Duration;

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

/// Starts a worker without a master, handed the test's capability keys ([`cap`]) as a master
/// would hand its own.
pub fn start(pki: &Pki, settings: &WorkerSettings) -> WorkerHandle {
    let worker = WorkerServer::start(settings, &pki.node, &TransportSettings::default()).expect("worker starts");
    cv_worker::merge_keys(&worker.capability_keys(), &keys().lock().unwrap().keys());
    worker
}

/// The keys the test mints capabilities with, as a master would.
fn keys() -> &'static std::sync::Mutex<KeySchedule> {
    static KEYS: std::sync::OnceLock<std::sync::Mutex<KeySchedule>> = std::sync::OnceLock::new();
    KEYS.get_or_init(|| {
        let mut k = KeySchedule::new(Duration::from_secs(3600), Duration::from_secs(36_000), None);
        let _ = k.signer(now_ms());
        std::sync::Mutex::new(k)
    })
}

/// The capability a master would mint for `access` to `block_id` (of a block cv holds alone).
pub fn cap(access: Access, block_id: u64) -> BlockCap {
    keys().lock().unwrap().signer(now_ms()).mint(access, block_id, [0; 16])
}

/// The read capability of a block filled from `source`.
pub fn source_cap(block_id: u64, source: &BlockSource) -> BlockCap {
    let o = &source.object;
    let digest = source_digest(&o.mount, &o.key, &o.version, source.offset, source.len);
    keys().lock().unwrap().signer(now_ms()).mint(Access::Read, block_id, digest)
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
    let reply = conn.call(&WriteBlock { block_id, pinned: false, cap: cap(Access::Write, block_id) }, &[data]).await?;
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
    let req =
        ReadBlock { block_id, offset, len, source: None, fill_only: false, verify, cap: cap(Access::Read, block_id) };
    let reply = conn.call(&req, &[]).await?;
    let ok: ReadBlockOk = reply.decode_body()?;
    Ok((ok.block_len, reply.into_payload()))
}

/// `StatBlock` of `block_id` at the shard at `addr`, asked as a peer worker would (it is for
/// workers and masters only).
pub async fn stat_block(pki: &Pki, addr: SocketAddr, block_id: u64) -> Result<StatBlockOk, NetError> {
    let endpoint = client_endpoint(&pki.node, &TransportSettings::default()).unwrap();
    let conn = Conn::connect(&endpoint, addr, Role::Worker, "test-peer-worker", Limits::DEFAULT).await?;
    let got = conn.call(&StatBlock { block_id }, &[]).await.and_then(|r| Ok(r.decode_body::<StatBlockOk>()?));
    endpoint.close(0u32.into(), b"done");
    got
}

/// The error code of a failed call (panics on success or a non-remote error).
pub fn code<T: std::fmt::Debug>(r: Result<T, NetError>) -> ErrorCode {
    let e = r.expect_err("call should fail");
    e.code().unwrap_or_else(|| panic!("not a remote error: {e}"))
}
