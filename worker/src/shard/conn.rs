//! Connections of one shard: the hello on the first stream, then one task per stream.

use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use cv_net::identity::{PeerCert, hello_allowed};
use cv_net::timeline;
use cv_rt::Gate;
use cv_wire::msg::{Hello, HelloOk, Role};
use cv_wire::{ErrorCode, Held, Inbound, Limits, PROTOCOL_VERSION, RequestBudget};

use super::fill::Fills;
use super::frame_io::{ReadFail, read_body, read_frame, read_header};
use super::handler;
use super::reply::Reply;
use crate::store::BlockStore;
use cv_rt::quic::{Connection, Endpoint, RecvStream, SendStream, VarInt};

/// A refused peer gets this long to read why before its connection is closed.
const LINGER: Duration = Duration::from_secs(2);
/// Application close code for a failed hello.
const CODE_HELLO_FAILED: u32 = 1;

/// What every request handler of a shard sees.
#[derive(Debug)]
pub(crate) struct ShardCtx {
    pub(crate) index: u16,
    /// The UDP port this shard serves on (names requests in timeline marks).
    pub(crate) port: u16,
    pub(crate) store: BlockStore,
    /// `host:port` of every shard of this worker, by shard index (for redirects).
    pub(crate) routes: Arc<[String]>,
    pub(crate) node: String,
    pub(crate) limits: Limits,
    /// Every connection and stream task runs inside it, so shutdown can wait for them.
    pub(crate) gate: Gate,
    /// Blocks being fetched from object storage (one fetch per block).
    pub(crate) fills: Rc<Fills>,
    /// Short-circuit reads, when served.
    pub(crate) local: Option<Arc<crate::local::LocalServe>>,
    /// Connections and requests, for `/metrics`.
    pub(crate) counters: super::counters::ShardCounters,
    /// Asks the control thread for a heartbeat now: the master places blocks by the space
    /// its last heartbeat reported, so space freed by a delete, or found lacking by a write,
    /// must not wait for the next one.
    pub(crate) report_soon: flume::Sender<()>,
    /// The master's capability keys (`handler.rs` checks every block request's).
    pub(crate) keys: crate::Keys,
    /// Connected peers by certificate: revoked ones refused and cut off, connections per
    /// identity capped.
    pub(crate) peers: super::peers::ShardPeers,
    /// Where block requests are recorded, when `[worker] trace` is on.
    pub(crate) trace: Option<crate::trace::TraceSink>,
}

impl ShardCtx {
    /// Records a block request in the trace, if one is kept.
    pub(crate) fn traced(&self, block: u64, range: (u64, u64), block_len: u64, access: crate::trace::format::Access) {
        if let Some(t) = &self.trace {
            t.record(self.index, block, range, block_len, access);
        }
    }
}

impl ShardCtx {
    /// Asks for a heartbeat now (one pending request is enough).
    pub(crate) fn space_changed(&self) {
        let _ = self.report_soon.try_send(());
    }
}

/// Accepts connections until the endpoint closes.
pub(crate) async fn accept_loop(ep: Endpoint, ctx: Rc<ShardCtx>) {
    while let Some(conn) = ep.accept().await {
        match ctx.gate.spawn(serve_conn(conn, ctx.clone())) {
            Ok(task) => {
                task.detach();
            }
            Err(_) => return, // shutting down
        }
    }
}

async fn serve_conn(conn: Connection, ctx: Rc<ShardCtx>) {
    let (peer, _admitted) = match cv_rt::timeout(cv_net::quic::HELLO_WITHIN, hello(&conn, &ctx)).await {
        Ok(Ok(admitted)) => admitted,
        Err(_) => {
            tracing::info!(shard = ctx.index, peer = %conn.remote_address(), "no hello in time; closing");
            conn.close(VarInt::from_u32(CODE_HELLO_FAILED), b"no hello in time");
            return;
        }
        Ok(Err(why)) => {
            tracing::info!(shard = ctx.index, peer = %conn.remote_address(), %why, "hello refused");
            let _ = cv_rt::timeout(LINGER, conn.closed()).await;
            conn.close(VarInt::from_u32(CODE_HELLO_FAILED), b"hello failed");
            return;
        }
    };
    let budget = RequestBudget::for_limits(&ctx.limits);
    ctx.counters.conn_opened(&conn);
    loop {
        let (send, recv) = match conn.accept_bi().await {
            Ok(s) => s,
            Err(e) => {
                tracing::debug!(shard = ctx.index, peer = %conn.remote_address(), error = %e, "connection ended");
                break;
            }
        };
        match ctx.gate.spawn(serve_stream(send, recv, ctx.clone(), peer.clone(), budget.clone())) {
            Ok(task) => {
                task.detach();
            }
            Err(_) => break,
        }
    }
    ctx.counters.conn_closed(&conn);
}

/// Reads the peer's `Hello` on the first stream and answers `HelloOk`, or refuses versions
/// this build does not speak with `VersionMismatch` (`cv_wire::hello`), and roles the peer's
/// certificate does not allow with `PermissionDenied` (`cv_net::identity::hello_allowed`).
/// A revoked certificate, or one past its connection cap, is refused (`peers.rs`).
/// Returns what the certificate proves, which decides what the peer may ask.
async fn hello<'a>(conn: &Connection, ctx: &'a ShardCtx) -> Result<(Rc<PeerCert>, super::peers::Admitted<'a>), String> {
    let (mut send, mut recv) = conn.accept_bi().await.map_err(|e| format!("no hello stream: {e}"))?;
    let frame = match read_frame(&mut recv, &ctx.limits).await {
        Ok(f) => f,
        Err(ReadFail::Gone(e)) => return Err(format!("hello stream: {e}")),
        Err(ReadFail::Wire(bad)) => {
            // A frame of another version is answered in that version, so its sender reads why.
            let refusal = cv_wire::hello::refuse_unreadable(&bad, "worker");
            let _ = Reply::frame(refusal.frame).send(&mut send).await;
            return Err(refusal.message);
        }
        Err(bad) => {
            let msg = format!("{bad}; this worker speaks version {PROTOCOL_VERSION}");
            let _ = Reply::error(0, bad.code(), &msg, None).send(&mut send).await;
            return Err(msg);
        }
    };
    let id = frame.header().request_id;
    let hello: Hello = match frame.decode_body() {
        Ok(h) => h,
        Err(e) => {
            let _ = Reply::error(id, e.code(), &e.to_string(), None).send(&mut send).await;
            return Err(e.to_string());
        }
    };
    let version = match cv_wire::hello::negotiate(hello.min_version, hello.max_version, id, "worker") {
        Ok(v) => v,
        Err(refusal) => {
            let _ = Reply::frame(refusal.frame).send(&mut send).await;
            return Err(refusal.message);
        }
    };
    let leaf = conn.peer_certificates().and_then(|c| c.first());
    let cert = match leaf.ok_or_else(|| "peer presented no certificate".to_string()).and_then(|leaf| {
        let cert = PeerCert::parse(leaf).map_err(|e| e.message().to_string())?;
        hello_allowed(hello.role, &hello.node, &cert).map(|()| cert)
    }) {
        Ok(cert) => cert,
        Err(msg) => {
            let _ = Reply::error(id, ErrorCode::PermissionDenied, &msg, None).send(&mut send).await;
            return Err(msg);
        }
    };
    let cert = Rc::new(cert);
    let admitted = match ctx.peers.join(&cert, conn) {
        Ok(a) => a,
        Err((code, msg)) => {
            let _ = Reply::error(id, code, &msg, None).send(&mut send).await;
            return Err(msg);
        }
    };
    let ok = HelloOk { version, role: Role::Worker, node: ctx.node.clone() };
    Reply::ok(id, &ok).send(&mut send).await.map_err(|e| format!("hello reply: {e}"))?;
    tracing::debug!(shard = ctx.index, peer = %conn.remote_address(), role = ?hello.role, node = %hello.node, %cert, "hello");
    Ok((cert, admitted))
}

/// Reads a request's header, reserves from `budget` what the request will buffer, then reads
/// its body. The reservation lasts as long as the returned guard.
async fn read_request(
    recv: &mut RecvStream,
    limits: &Limits,
    budget: &RequestBudget,
) -> Result<(Inbound, Held), ReadFail> {
    let inbound = read_header(recv, limits).await?;
    let held = budget.hold(inbound.header()).map_err(ReadFail::Wire)?;
    Ok((read_body(recv, inbound).await?, held))
}

/// One request: read its frame, answer it. A malformed frame, or one that does not fit in
/// the connection's `budget`, gets an error reply; only a vanished stream or connection ends
/// the task without one.
async fn serve_stream(
    mut send: SendStream,
    mut recv: RecvStream,
    ctx: Rc<ShardCtx>,
    peer: Rc<PeerCert>,
    budget: RequestBudget,
) {
    let _in_flight = ctx.counters.request();
    // The reservation lasts until the reply is sent: a ping's reply carries its payload.
    let (reply, _held) = match read_request(&mut recv, &ctx.limits, &budget).await {
        Ok((head, held)) => {
            let id = head.header().request_id;
            cv_net::timeline_mark!(timeline::ARRIVED, ctx.port, id);
            let reply = handler::dispatch(&ctx, &peer, head, &mut recv).await;
            cv_net::timeline_mark!(timeline::READY, ctx.port, id);
            (reply, Some(held))
        }
        Err(ReadFail::Gone(e)) => {
            tracing::debug!(shard = ctx.index, error = %e, "request stream gone");
            return;
        }
        Err(bad) => {
            // Nothing more of this stream is read: give its credit back.
            let _ = recv.stop(VarInt::from_u32(0));
            (Reply::error(0, bad.code(), &bad.to_string(), None), None)
        }
    };
    if let Err(e) = reply.send(&mut send).await {
        tracing::debug!(shard = ctx.index, error = %e, "reply not delivered");
    }
}
