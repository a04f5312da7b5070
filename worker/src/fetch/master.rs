//! The pool's own connection to the master, used only to ask for mounts (`GetMount`). It
//! presents the worker's node certificate and says `Role::Worker`: the master gives a
//! mount's credentials to nobody else. Connected on first use, again after it failed.

use std::net::SocketAddr;
use std::time::Duration;

use cv_net::quic::TransportSettings;
use cv_net::rpc::{Conn, client_endpoint_at};
use cv_net::tls::Identity;
use cv_net::{NetError, NetErrorKind};
use cv_wire::msg::{GetMount, GetMountOk, Mount, Role};
use cv_wire::{ErrorCode, Limits};
use tokio::sync::Mutex;

use super::error::{FetchError, FetchErrorKind};

/// Where the master is and who we are to it.
#[derive(Debug, Clone)]
pub(crate) struct MasterSpec {
    /// The masters (`host:port`, resolved again on every connection attempt), shared with
    /// the control thread: both follow the leader.
    pub(crate) masters: std::sync::Arc<cv_net::masters::MasterList<String>>,
    pub(crate) node: String,
    pub(crate) identity: Identity,
    pub(crate) transport: TransportSettings,
    /// The worker's bind address: connections to the master leave from it.
    pub(crate) bind: std::net::IpAddr,
    /// Deadline of connecting, and of one call.
    pub(crate) timeout: Duration,
}

/// A lazily (re)connected link to the master. Must be used inside the pool's runtime.
#[derive(Debug)]
pub(crate) struct MasterLink {
    spec: MasterSpec,
    /// The endpoint and the current connection; held while connecting so that concurrent
    /// callers share one attempt.
    state: Mutex<(Option<quinn::Endpoint>, Option<Conn>)>,
}

impl MasterLink {
    pub(crate) fn new(spec: MasterSpec) -> Self {
        Self { spec, state: Mutex::new((None, None)) }
    }

    /// The mount at `cv_path`, credentials included, from the master that leads: one that
    /// answers `NotLeader` or cannot be reached sends the ask to the next, each tried once.
    pub(crate) async fn get_mount(&self, cv_path: &str) -> Result<Mount, FetchError> {
        let mut tries = self.spec.masters.len();
        loop {
            let addr = self.spec.masters.current();
            match self.get_mount_at(cv_path, &addr).await {
                Err((e, Some(net)))
                    if tries > 1
                        && (net.kind() != NetErrorKind::Remote || net.code() == Some(ErrorCode::NotLeader)) =>
                {
                    tries -= 1;
                    self.spec.masters.moved(&addr, crate::control::named_leader(&net));
                    tracing::debug!(from = %addr, error = %e, "mount lookup goes to another master");
                }
                r => return r.map_err(|(e, _)| e),
            }
        }
    }

    async fn get_mount_at(&self, cv_path: &str, addr: &str) -> Result<Mount, (FetchError, Option<NetError>)> {
        let conn = self.conn(addr).await.map_err(|e| (unreachable_master(addr, &e), Some(e)))?;
        let req = GetMount { cv_path: cv_path.to_owned() };
        let res = match tokio::time::timeout(self.spec.timeout, conn.call(&req, &[])).await {
            Ok(r) => r,
            Err(_) => Err(NetError::new(NetErrorKind::Timeout, format!("GetMount took over {:?}", self.spec.timeout))),
        };
        let frame = match res {
            Ok(f) => f,
            Err(e) => {
                if e.kind() != NetErrorKind::Remote || e.code() == Some(ErrorCode::NotLeader) {
                    self.forget(&conn).await;
                }
                return Err((refused(cv_path, addr, &e), Some(e)));
            }
        };
        let ok: GetMountOk = frame.decode_body().map_err(|e| {
            (FetchError::new(FetchErrorKind::Failed, format!("master's GetMount reply for {cv_path}: {e}")), None)
        })?;
        Ok(ok.mount)
    }

    /// The current connection, connecting to `addr` first if there is none or it closed.
    async fn conn(&self, addr: &str) -> Result<Conn, NetError> {
        let mut st = self.state.lock().await;
        if let Some(c) = &st.1
            && !c.is_closed()
        {
            return Ok(c.clone());
        }
        st.1 = None;
        let ep = match &st.0 {
            Some(ep) => ep.clone(),
            None => {
                let ep = client_endpoint_at(&self.spec.identity, &self.spec.transport, self.spec.bind)?;
                st.0 = Some(ep.clone());
                ep
            }
        };
        let connect = async {
            let addr = resolve(addr).await?;
            Conn::connect(&ep, addr, Role::Worker, &self.spec.node, Limits::DEFAULT).await
        };
        let conn = tokio::time::timeout(self.spec.timeout, connect).await.map_err(|_| {
            NetError::new(NetErrorKind::Timeout, format!("connecting took over {:?}", self.spec.timeout))
        })??;
        st.1 = Some(conn.clone());
        Ok(conn)
    }

    /// Drops `conn` if it is still the current one, so the next call reconnects.
    async fn forget(&self, conn: &Conn) {
        let mut st = self.state.lock().await;
        if st.1.as_ref().is_some_and(|c| c.quinn().stable_id() == conn.quinn().stable_id()) {
            st.1 = None;
        }
    }

    /// Closes the endpoint (the master sees the connection go).
    pub(crate) async fn close(&self) {
        let st = self.state.lock().await;
        if let Some(ep) = &st.0 {
            ep.close(0u32.into(), b"worker stopping");
        }
    }
}

fn unreachable_master(addr: &str, e: &NetError) -> FetchError {
    FetchError::new(
        FetchErrorKind::Unavailable,
        format!("cannot reach the master at {addr} to resolve the mount: {e}; a retry may succeed"),
    )
}

/// A failed GetMount: the master's answer, or the connection's failure.
fn refused(cv_path: &str, addr: &str, e: &NetError) -> FetchError {
    match e.code() {
        Some(ErrorCode::NotFound) if e.kind() == NetErrorKind::Remote => FetchError::new(
            FetchErrorKind::Stale,
            format!("no mount at {cv_path} any more (the master says: {e}); reopen the file"),
        ),
        _ if e.kind() == NetErrorKind::Remote && !e.retryable() => {
            FetchError::new(FetchErrorKind::Failed, format!("the master refused GetMount {cv_path}: {e}"))
        }
        _ => unreachable_master(addr, e),
    }
}

async fn resolve(addr: &str) -> Result<SocketAddr, NetError> {
    let mut addrs = tokio::net::lookup_host(addr)
        .await
        .map_err(|e| NetError::new(NetErrorKind::Connect, format!("resolve {addr}")).with_source(e))?;
    addrs.next().ok_or_else(|| NetError::new(NetErrorKind::Connect, format!("{addr} resolves to nothing")))
}
