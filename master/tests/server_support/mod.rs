//! Shared by the server_* tests: a real master on loopback QUIC with certificates from a fresh
//! cluster CA and its journal in a tempdir, and connections in any role.
#![allow(dead_code)]

use cv_master::server::{MasterServer, ServerConfig};
use cv_master_core::config::Clock;
use cv_net::NetError;
use cv_net::config::Dur;
use cv_net::identity::CertRole;
use cv_net::quic::TransportSettings;
use cv_net::rpc::{self, Conn};
use cv_net::tls::{ClusterCa, Identity};
use cv_wire::msg::Role;
use cv_wire::{ErrorCode, Frame, Limits, Message};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

pub struct Harness {
    pub ca: ClusterCa,
    pub dir: tempfile::TempDir,
    issued: std::sync::Mutex<std::collections::HashMap<CertRole, cv_net::tls::Issued>>,
}

impl Harness {
    pub fn new() -> Self {
        Harness {
            ca: ClusterCa::generate("test").unwrap(),
            dir: tempfile::tempdir().unwrap(),
            issued: Default::default(),
        }
    }

    /// The harness's certificate for `usage`: one per role, as one process holds one (a retry
    /// on a new connection is known by its certificate's serial).
    pub fn identity(&self, usage: CertRole) -> Identity {
        let mut issued = self.issued.lock().unwrap();
        let issued = issued.entry(usage.clone()).or_insert_with(|| self.ca.issue("test", &usage, &[]).unwrap());
        Identity::from_pem(&self.ca.cert_pem(), &issued.cert_pem, &issued.key_pem).unwrap()
    }

    pub fn journal_dir(&self) -> PathBuf {
        self.dir.path().join("journal")
    }

    pub fn config(&self) -> ServerConfig {
        config_in(&self.journal_dir())
    }

    pub async fn start(&self) -> MasterServer {
        self.start_with(&self.config(), None).await
    }

    pub async fn start_with(&self, cfg: &ServerConfig, clock: Option<Arc<dyn Clock>>) -> MasterServer {
        let id = self.identity(CertRole::Node);
        let t = TransportSettings::default();
        match clock {
            Some(c) => MasterServer::start_with_clock(cfg, &id, &t, c).await.unwrap(),
            None => MasterServer::start(cfg, &id, &t).await.unwrap(),
        }
    }

    /// Connects holding a certificate of `cert`'s role, saying `role` and `node` in the hello.
    pub async fn connect_as(
        &self,
        server: &MasterServer,
        cert: CertRole,
        role: Role,
        node: &str,
    ) -> Result<Conn, NetError> {
        let ep = rpc::client_endpoint(&self.identity(cert), &TransportSettings::default()).unwrap();
        let fut = Conn::connect(&ep, server.local_addr(), role, node, Limits::DEFAULT);
        tokio::time::timeout(Duration::from_secs(10), fut).await.expect("connect hangs")
    }

    pub async fn connect(&self, server: &MasterServer, role: Role) -> Conn {
        // Node roles need a node certificate, the admin role an admin's; clients hold a client's.
        let usage = match role {
            Role::Worker | Role::Master => CertRole::Node,
            Role::Admin => CertRole::Admin,
            Role::Client => CertRole::Client,
        };
        let ep = rpc::client_endpoint(&self.identity(usage), &TransportSettings::default()).unwrap();
        let fut = Conn::connect(&ep, server.local_addr(), role, "test-peer", Limits::DEFAULT);
        tokio::time::timeout(Duration::from_secs(10), fut).await.expect("connect hangs").unwrap()
    }
}

pub fn config_in(journal_dir: &Path) -> ServerConfig {
    ServerConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        journal_dir: journal_dir.to_path_buf(),
        heartbeat_timeout: Dur::secs(10),
        // The workers of these tests are stand-ins that serve no blocks to read a tail back from.
        check_tails: false,
        // Local directories and stores on loopback, as the tests mount them.
        mounts: cv_master::server::MountPolicy {
            allow: vec!["s3://".into(), "fs://".into()],
            endpoints: vec!["http://127.0.0.1:*".into()],
            private: vec![],
        },
        ..ServerConfig::default()
    }
}

/// Calls and decodes the reply as `R`.
pub async fn call<M: Message, R: Message>(conn: &Conn, msg: &M, payload: &[u8]) -> (R, Vec<u8>) {
    let frame = call_frame(conn, msg, payload).await.unwrap_or_else(|e| panic!("{msg:?} failed: {e}"));
    (frame.decode_body::<R>().unwrap(), frame.into_payload())
}

pub async fn call_frame<M: Message>(conn: &Conn, msg: &M, payload: &[u8]) -> Result<Frame, NetError> {
    tokio::time::timeout(Duration::from_secs(10), conn.call(msg, &[payload])).await.expect("call hangs")
}

/// Calls expecting an error reply; returns its code.
pub async fn call_err<M: Message>(conn: &Conn, msg: &M) -> ErrorCode {
    match call_frame(conn, msg, &[]).await {
        Ok(f) => panic!("{msg:?} succeeded with {:?}", f.kind()),
        Err(e) => e.code().unwrap_or_else(|| panic!("{msg:?}: not a remote error: {e}")),
    }
}

/// A Parquet-shaped file: `len` bytes ending in a `footer`-byte footer, its length and `PAR1`.
pub fn parquet_bytes(len: usize, footer: u32) -> Vec<u8> {
    let mut v: Vec<u8> = (0..len).map(|i| (i * 31 % 251) as u8).collect();
    let n = v.len();
    v[n - 8..n - 4].copy_from_slice(&footer.to_le_bytes());
    v[n - 4..].copy_from_slice(b"PAR1");
    v
}
