//! The transport ceiling: quinn on tokio in this process, with cv's TLS and
//! transport settings, one server endpoint per worker shard and one client
//! connection to each. A request is an 8-byte length on a new bidirectional
//! stream; the server answers with that many bytes and finishes the stream,
//! as a cv read does, but with no framing, checksum or disk.

use super::series::{Series, Source, Workload};
use super::{ReadBenchError, ReadBenchErrorKind, Result};
use crate::report::histogram;
use cv_net::identity::CertRole;
use cv_net::quic::TransportSettings;
use cv_net::rpc;
use cv_net::tls::{ClusterCa, Identity, SERVER_NAME};
use hdrhistogram::Histogram;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::task::JoinSet;

/// Largest response the server sends.
const MAX_RESPONSE: usize = 16 << 20;

fn quic_err(m: impl Into<String>) -> ReadBenchError {
    ReadBenchError::new(ReadBenchErrorKind::Quic, m)
}

/// Servers on a runtime of their own plus connected clients.
#[derive(Debug)]
pub struct QuicBaseline {
    /// Always `Some` until dropped.
    server_rt: Option<tokio::runtime::Runtime>,
    client: quinn::Endpoint,
    conns: Vec<quinn::Connection>,
}

fn identities() -> Result<(Identity, Identity)> {
    let e = |e: cv_net::NetError| quic_err("bench identities").with_source(e);
    let ca = ClusterCa::generate("bench-read").map_err(e)?;
    let node = ca.issue("bench-node", &CertRole::Node, &[]).map_err(e)?;
    let client = ca.issue("bench-client", &CertRole::Client, &[]).map_err(e)?;
    Ok((
        Identity::from_pem(&ca.cert_pem(), &node.cert_pem, &node.key_pem).map_err(e)?,
        Identity::from_pem(&ca.cert_pem(), &client.cert_pem, &client.key_pem).map_err(e)?,
    ))
}

impl QuicBaseline {
    /// Starts `endpoints` servers (on as many threads) and connects to each.
    /// Must be called inside a tokio runtime: the clients run on it.
    pub async fn start(endpoints: usize) -> Result<QuicBaseline> {
        let (node, client_id) = identities()?;
        let settings = TransportSettings::default();
        let server_rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(endpoints)
            .enable_all()
            .thread_name("bench-quic-server")
            .build()
            .map_err(|e| quic_err("server runtime").with_source(e))?;
        let payload: Arc<[u8]> = vec![0x5a; MAX_RESPONSE].into();
        let mut addrs: Vec<SocketAddr> = Vec::with_capacity(endpoints);
        for _ in 0..endpoints {
            let (node, settings, payload) = (node.clone(), settings.clone(), payload.clone());
            // Built on the server runtime so that its driver runs there.
            let addr = server_rt
                .spawn(async move {
                    let ep = rpc::server_endpoint(SocketAddr::from(([127, 0, 0, 1], 0)), &node, &settings)?;
                    let addr = ep
                        .local_addr()
                        .map_err(|e| cv_net::NetError::new(cv_net::NetErrorKind::Io, "local address").with_source(e));
                    tokio::spawn(serve(ep, payload));
                    addr
                })
                .await
                .map_err(|e| quic_err(format!("server task: {e}")))?
                .map_err(|e| quic_err("server endpoint").with_source(e))?;
            addrs.push(addr);
        }
        let client =
            rpc::client_endpoint(&client_id, &settings).map_err(|e| quic_err("client endpoint").with_source(e))?;
        let mut conns = Vec::with_capacity(endpoints);
        for a in addrs {
            let connecting = client.connect(a, SERVER_NAME).map_err(|e| quic_err("connect").with_source(e))?;
            conns.push(connecting.await.map_err(|e| quic_err("handshake").with_source(e))?);
        }
        Ok(QuicBaseline { server_rt: Some(server_rt), client, conns })
    }

    /// `total` bytes in `block`-byte responses, `depth` requests in flight,
    /// spread over the connections.
    pub async fn sequential(&self, total: u64, block: u64, depth: u32) -> Result<Series> {
        let next = Arc::new(AtomicU64::new(0));
        let start = Instant::now();
        let (ops, bytes, _) = self
            .drive(depth, move |_| {
                let off = next.fetch_add(block, Ordering::Relaxed);
                (off < total).then(|| block.min(total - off))
            })
            .await?;
        let label = format!("quinn, {} conns, stream/request", self.conns.len());
        Ok(Series::new(Source::Quic, label, Workload::Sequential, block, depth, ops, bytes, start.elapsed(), None))
    }

    /// `block`-byte responses, `depth` in flight, for `duration`.
    pub async fn random(&self, block: u64, depth: u32, duration: Duration) -> Result<Series> {
        let start = Instant::now();
        let deadline = start + duration;
        let (ops, bytes, h) = self.drive(depth, move |_| (Instant::now() < deadline).then_some(block)).await?;
        let label = format!("quinn, {} conns, stream/request", self.conns.len());
        Ok(Series::new(Source::Quic, label, Workload::Random, block, depth, ops, bytes, start.elapsed(), Some(&h)))
    }

    /// `depth` tasks, each asking `next(request index)` for the size of its
    /// next request until it says `None`; request `i` of a task goes to
    /// connection `(task + i) % conns`. Returns (requests, bytes, latencies).
    async fn drive<F>(&self, depth: u32, next: F) -> Result<(u64, u64, Histogram<u64>)>
    where
        F: Fn(u64) -> Option<u64> + Send + Sync + 'static,
    {
        let next = Arc::new(next);
        let mut set = JoinSet::new();
        for t in 0..depth {
            let (conns, next) = (self.conns.clone(), next.clone());
            set.spawn(async move {
                let (mut h, mut ops, mut bytes) = (histogram(), 0u64, 0u64);
                while let Some(len) = next(ops) {
                    let conn = &conns[(t as usize + ops as usize) % conns.len()];
                    let t0 = Instant::now();
                    let got = request(conn, len).await?;
                    h.saturating_record(t0.elapsed().as_nanos() as u64);
                    if got != len {
                        return Err(quic_err(format!("asked {len} bytes, got {got}")));
                    }
                    ops += 1;
                    bytes += got;
                }
                Ok((h, ops, bytes))
            });
        }
        let (mut h, mut ops, mut bytes) = (histogram(), 0, 0);
        while let Some(r) = set.join_next().await {
            let (th, to, tb) = r.map_err(|e| quic_err(format!("client task: {e}")))??;
            h.add(&th).map_err(|e| quic_err(format!("merge histograms: {e}")))?;
            (ops, bytes) = (ops + to, bytes + tb);
        }
        Ok((ops, bytes, h))
    }

    /// Closes the connections and stops the servers (as dropping does).
    pub fn shutdown(self) {}
}

impl Drop for QuicBaseline {
    fn drop(&mut self) {
        self.client.close(0u32.into(), b"done");
        // Not a plain drop: a runtime may not be dropped inside another's async context.
        if let Some(rt) = self.server_rt.take() {
            rt.shutdown_background();
        }
    }
}

/// One request: returns the bytes received.
async fn request(conn: &quinn::Connection, len: u64) -> Result<u64> {
    let (mut send, mut recv) = conn.open_bi().await.map_err(|e| quic_err("open stream").with_source(e))?;
    send.write_all(&len.to_le_bytes()).await.map_err(|e| quic_err("send request").with_source(e))?;
    send.finish().map_err(|e| quic_err("finish request").with_source(e))?;
    let body = recv.read_to_end(len as usize + 1).await.map_err(|e| quic_err("read response").with_source(e))?;
    Ok(body.len() as u64)
}

async fn serve(ep: quinn::Endpoint, payload: Arc<[u8]>) {
    while let Some(incoming) = ep.accept().await {
        let payload = payload.clone();
        tokio::spawn(async move {
            let Ok(conn) = incoming.await else { return };
            while let Ok((mut send, mut recv)) = conn.accept_bi().await {
                let payload = payload.clone();
                tokio::spawn(async move {
                    // Read to FIN so the stream's credit returns to the client.
                    let Ok(req) = recv.read_to_end(8).await else { return };
                    let Ok(req) = <[u8; 8]>::try_from(req.as_slice()) else { return };
                    let n = (u64::from_le_bytes(req) as usize).min(payload.len());
                    if send.write_all(&payload[..n]).await.is_ok() {
                        let _ = send.finish();
                    }
                });
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn bare_quic_moves_the_asked_byte_counts() {
        let q = QuicBaseline::start(2).await.unwrap();
        let s = q.sequential(5 << 20, 1 << 20, 3).await.unwrap();
        assert_eq!((s.ops, s.bytes), (5, 5 << 20));
        let r = q.random(64 << 10, 4, Duration::from_millis(200)).await.unwrap();
        assert!(r.ops > 0 && r.bytes == r.ops * (64 << 10) && r.p50_us.is_some(), "{r:?}");
        q.shutdown();
    }
}
