//! The addresses this config's servers bind: the master's QUIC port, one UDP port per worker
//! shard, the gateway's TCP listener, the /metrics listeners and the worker's short-circuit
//! socket. Each is bound for
//! a moment; one that is taken is asked for a cv hello, so a server of this cluster that is up
//! already (a warning) is told apart from another program holding the port (a failure).

use super::{Check, Finding, Problem};
use crate::config::CvConfig;
use cv_net::rpc::{Conn, client_endpoint};
use cv_net::tls::Identity;
use std::io::ErrorKind;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// The findings for every address of the config.
pub(super) async fn check(cfg: &CvConfig) -> Vec<Finding> {
    let mut udp: Vec<(SocketAddr, String)> = Vec::new();
    let mut out = Vec::new();
    if let Some(m) = &cfg.master {
        udp.push((m.listen, "master".into()));
    }
    if let Some(w) = &cfg.worker {
        // 0 shards is one per CPU this process may use, as the worker counts them.
        let shards = if w.shards == 0 { cv_worker::cores::allowed_cpus().len() } else { usize::from(w.shards) };
        for i in 0..shards {
            let port = if w.base_port == 0 { 0 } else { w.base_port.saturating_add(i as u16) };
            udp.push((SocketAddr::new(w.bind, port), format!("worker shard {i}")));
        }
    }
    let prober = Prober::new(cfg);
    for (addr, what) in udp {
        out.push(udp_finding(addr, &what, &prober).await);
    }
    prober.close().await;
    if let Some(g) = &cfg.gateway {
        out.push(tcp_finding(g.bind, "gateway"));
    }
    // The /metrics listeners (HTTP), where configured.
    let metrics = [
        cfg.master.as_ref().and_then(|m| m.metrics.0).map(|a| (a, "master metrics")),
        cfg.worker.as_ref().and_then(|w| w.metrics.0).map(|a| (a, "worker metrics")),
        cfg.gateway.as_ref().and_then(|g| g.metrics.0).map(|a| (a, "gateway metrics")),
    ];
    out.extend(metrics.into_iter().flatten().map(|(a, what)| metrics_finding(a, what)));
    if let Some(path) = cfg.worker.as_ref().filter(|w| w.local_reads).and_then(|w| w.local_socket_path()) {
        out.push(socket_finding(&path));
    }
    out
}

fn udp_finding(addr: SocketAddr, what: &str, prober: &Prober) -> impl Future<Output = Finding> {
    let subject = format!("udp {addr} ({what})");
    async move {
        if addr.port() == 0 {
            return Finding::ok(Check::Port, subject, "port 0: an ephemeral port is chosen at start");
        }
        match std::net::UdpSocket::bind(addr) {
            Ok(_) => Finding::ok(Check::Port, subject, "free"),
            Err(e) if e.kind() == ErrorKind::AddrInUse => match prober.hello(addr).await {
                Some(role) => Finding::warn(
                    Check::Port,
                    subject,
                    Problem::InUse,
                    format!(
                        "in use by a running cv {role} of this cluster: this server is up already, or another took its port"
                    ),
                ),
                None => Finding::fail(
                    Check::Port,
                    subject,
                    Problem::InUse,
                    "in use by another program (it does not answer as a cv server of this cluster)",
                ),
            },
            Err(e) => Finding::fail(Check::Port, subject, Problem::Unbindable, unbindable(&e)),
        }
    }
}

fn tcp_finding(addr: SocketAddr, what: &str) -> Finding {
    let subject = format!("tcp {addr} ({what})");
    if addr.port() == 0 {
        return Finding::ok(Check::Port, subject, "port 0: an ephemeral port is chosen at start");
    }
    match std::net::TcpListener::bind(addr) {
        Ok(_) => Finding::ok(Check::Port, subject, "free"),
        Err(e) if e.kind() == ErrorKind::AddrInUse => {
            Finding::fail(Check::Port, subject, Problem::InUse, "something is already listening there")
        }
        Err(e) => Finding::fail(Check::Port, subject, Problem::Unbindable, unbindable(&e)),
    }
}

/// A /metrics listener: taken by an HTTP server that answers `GET /metrics` is a running cv
/// server of this config (a warning, as for its QUIC port); taken by anything else fails.
fn metrics_finding(addr: SocketAddr, what: &str) -> Finding {
    let finding = tcp_finding(addr, what);
    if finding.problem != Some(Problem::InUse) || !answers_metrics(addr) {
        return finding;
    }
    Finding::warn(
        Check::Port,
        finding.subject,
        Problem::InUse,
        "an HTTP server answers /metrics there: this server is up already, or another took its port",
    )
}

fn answers_metrics(addr: SocketAddr) -> bool {
    use std::io::{Read, Write};
    let target = match addr.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => SocketAddr::new(Ipv4Addr::LOCALHOST.into(), addr.port()),
        IpAddr::V6(ip) if ip.is_unspecified() => SocketAddr::new(Ipv6Addr::LOCALHOST.into(), addr.port()),
        _ => addr,
    };
    let wait = std::time::Duration::from_secs(1);
    let Ok(mut s) = std::net::TcpStream::connect_timeout(&target, wait) else { return false };
    let _ = s.set_read_timeout(Some(wait));
    let _ = s.set_write_timeout(Some(wait));
    let mut head = [0u8; 12];
    s.write_all(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n").is_ok()
        && s.read_exact(&mut head).is_ok()
        && (head.starts_with(b"HTTP/1.0 200") || head.starts_with(b"HTTP/1.1 200"))
}

/// The short-circuit socket: a worker starting on this config removes whatever is there, so a
/// live one means two workers would share it.
fn socket_finding(path: &std::path::Path) -> Finding {
    let subject = format!("unix {} (short-circuit reads)", path.display());
    if std::os::unix::net::UnixStream::connect(path).is_ok() {
        return Finding::warn(
            Check::Port,
            subject,
            Problem::InUse,
            "a running worker serves it; another worker on this config would take it over",
        );
    }
    let note = if path.exists() { "a stale socket file, replaced at start" } else { "free" };
    Finding::ok(Check::Port, subject, note)
}

fn unbindable(e: &std::io::Error) -> String {
    match e.kind() {
        ErrorKind::AddrNotAvailable => format!("not an address of this host: {e}"),
        ErrorKind::PermissionDenied => format!("not allowed (a port below 1024 needs CAP_NET_BIND_SERVICE): {e}"),
        _ => format!("cannot bind: {e}"),
    }
}

/// Asks a taken port for a cv hello with the config's identity.
struct Prober {
    endpoint: Option<quinn::Endpoint>,
    within: std::time::Duration,
}

impl Prober {
    fn new(cfg: &CvConfig) -> Prober {
        let endpoint =
            Identity::load(&cfg.common.tls).ok().and_then(|id| client_endpoint(&id, &cfg.common.transport).ok());
        Prober { endpoint, within: cfg.common.transport.idle_timeout.get() }
    }

    /// The role of the cv server answering at `addr` (a wildcard address is asked on loopback).
    async fn hello(&self, addr: SocketAddr) -> Option<String> {
        let ep = self.endpoint.as_ref()?;
        let target = match addr.ip() {
            IpAddr::V4(ip) if ip.is_unspecified() => SocketAddr::new(Ipv4Addr::LOCALHOST.into(), addr.port()),
            IpAddr::V6(ip) if ip.is_unspecified() => SocketAddr::new(Ipv6Addr::LOCALHOST.into(), addr.port()),
            _ => addr,
        };
        let connect = Conn::connect(ep, target, cv_wire::msg::Role::Client, "cvctl doctor", cv_wire::Limits::DEFAULT);
        let conn = tokio::time::timeout(self.within, connect).await.ok()?.ok()?;
        conn.quinn().close(0u32.into(), b"doctor");
        Some(format!("{:?}", conn.peer_role()).to_lowercase())
    }

    async fn close(self) {
        if let Some(ep) = self.endpoint {
            ep.close(0u32.into(), b"doctor");
            let _ = tokio::time::timeout(self.within, ep.wait_idle()).await;
        }
    }
}
