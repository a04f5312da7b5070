//! Request/response over quinn on tokio: one frame per direction per
//! bidirectional stream, a hello on the first stream of every connection.
//! Used by the client and the master; worker shards use their own
//! quinn-proto driver with the same framing.

use crate::config::ByteSize;
use crate::error::{NetError, NetErrorKind};
use crate::identity::PeerCert;
use crate::quic::{TransportSettings, bind_udp, client_config, server_config};
use crate::tls::{Identity, SERVER_NAME};
use cv_wire::hello;
use cv_wire::msg::{ErrorReply, Hello, HelloOk, Role};
use cv_wire::{
    EncodedFrame, ErrorCode, Frame, HEADER_LEN, Held, Inbound, Limits, Message, PROTOCOL_VERSION, RequestBudget,
};
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// A connection failure; one the TLS handshake refused (a certificate not issued by the
/// cluster's CA, on either side) is `Tls`, which no retry mends, the rest `Connect`.
pub(crate) fn conn_err(what: &str, e: impl std::error::Error + Send + Sync + 'static) -> NetError {
    if let Some(alert) = tls_alert(&e) {
        let why = match alert {
            // The TLS alerts a certificate check sends (RFC 8446, 6.2).
            45 => "a certificate has expired (`cvctl doctor` shows which; issue a new one)",
            44 => "a certificate was revoked",
            48 => "a certificate of another CA",
            _ => "a certificate of another CA, expired, or of the wrong kind",
        };
        let msg = format!("{what}: the TLS handshake was refused ({why})");
        return NetError::new(NetErrorKind::Tls, msg).with_source(e);
    }
    NetError::new(NetErrorKind::Connect, what.to_string()).with_source(e)
}

/// The TLS alert of a connection closed with a QUIC crypto error (0x100–0x1ff), raised here or
/// sent by the peer.
fn tls_alert(e: &(dyn std::error::Error + 'static)) -> Option<u8> {
    let conn = if let Some(c) = e.downcast_ref::<quinn::ConnectionError>() {
        c
    } else if let Some(quinn::ReadError::ConnectionLost(c)) = e.downcast_ref::<quinn::ReadError>() {
        c
    } else if let Some(quinn::WriteError::ConnectionLost(c)) = e.downcast_ref::<quinn::WriteError>() {
        c
    } else {
        return None;
    };
    let code = match conn {
        quinn::ConnectionError::TransportError(t) => u64::from(t.code),
        quinn::ConnectionError::ConnectionClosed(c) => u64::from(c.error_code),
        _ => return None,
    };
    (0x100..0x200).contains(&code).then(|| (code - 0x100) as u8)
}

fn read_err(e: quinn::ReadExactError) -> NetError {
    match e {
        quinn::ReadExactError::FinishedEarly(n) => {
            NetError::new(NetErrorKind::Protocol, format!("stream ended {n} bytes into a frame part"))
        }
        quinn::ReadExactError::ReadError(e) => conn_err("read", e),
    }
}

/// A quinn endpoint on tokio over `socket`, with GSO batches that fit one send.
fn endpoint(
    settings: &TransportSettings,
    server: Option<quinn::ServerConfig>,
    socket: std::net::UdpSocket,
) -> std::io::Result<quinn::Endpoint> {
    use quinn::Runtime;
    let runtime = Arc::new(quinn::TokioRuntime);
    let socket = crate::udp::CappedGso::new(runtime.wrap_udp_socket(socket)?, settings.udp_payload());
    quinn::Endpoint::new_with_abstract_socket(settings.endpoint_config(), server, socket, runtime)
}

/// Builds a server endpoint on `addr` with mutual TLS.
pub fn server_endpoint(
    addr: SocketAddr,
    identity: &Identity,
    settings: &TransportSettings,
) -> Result<quinn::Endpoint, NetError> {
    let socket = bind_udp(addr, settings.socket_buffer)?;
    let cfg = server_config(identity, settings)?;
    endpoint(settings, Some(cfg), socket)
        .map_err(|e| NetError::new(NetErrorKind::Io, format!("server endpoint on {addr}")).with_source(e))
}

/// Builds a client endpoint (ephemeral port) presenting `identity`.
pub fn client_endpoint(identity: &Identity, settings: &TransportSettings) -> Result<quinn::Endpoint, NetError> {
    let socket = bind_udp("[::]:0".parse().expect("literal address"), settings.socket_buffer)
        .or_else(|_| bind_udp("0.0.0.0:0".parse().expect("literal address"), settings.socket_buffer))?;
    client_on(socket, identity, settings)
}

/// [`client_endpoint`] with its socket bound to `local` (the port the system's choice), so a
/// node's outbound traffic leaves from the address it was told to serve on; an unspecified
/// address (`0.0.0.0`, `::`) binds every interface, as `client_endpoint` does.
pub fn client_endpoint_at(
    identity: &Identity,
    settings: &TransportSettings,
    local: std::net::IpAddr,
) -> Result<quinn::Endpoint, NetError> {
    if local.is_unspecified() {
        return client_endpoint(identity, settings);
    }
    client_on(bind_udp(SocketAddr::new(local, 0), settings.socket_buffer)?, identity, settings)
}

fn client_on(
    socket: std::net::UdpSocket,
    identity: &Identity,
    settings: &TransportSettings,
) -> Result<quinn::Endpoint, NetError> {
    let mut ep = endpoint(settings, None, socket)
        .map_err(|e| NetError::new(NetErrorKind::Io, "client endpoint").with_source(e))?;
    ep.set_default_client_config(client_config(identity, settings)?);
    Ok(ep)
}

/// Reads a frame's header, checked against `limits` before anything is allocated, then
/// its body; the payload is still on the stream.
pub async fn read_head(recv: &mut quinn::RecvStream, limits: &Limits) -> Result<Inbound, NetError> {
    let inbound = read_header(recv, limits).await?;
    read_body(recv, inbound).await
}

/// Reads and parses a frame's header alone.
async fn read_header(recv: &mut quinn::RecvStream, limits: &Limits) -> Result<Inbound, NetError> {
    let mut raw = [0u8; HEADER_LEN];
    recv.read_exact(&mut raw).await.map_err(read_err)?;
    Ok(Inbound::parse(raw, limits)?)
}

/// Reads the body that the header announces.
async fn read_body(recv: &mut quinn::RecvStream, mut inbound: Inbound) -> Result<Inbound, NetError> {
    recv.read_exact(inbound.body_mut()).await.map_err(read_err)?;
    Ok(inbound)
}

/// Reads one frame: header first (checked against `limits` before anything
/// is allocated), then body and payload, then the checksum.
pub async fn read_frame(recv: &mut quinn::RecvStream, limits: &Limits) -> Result<Frame, NetError> {
    let head = read_head(recv, limits).await?;
    read_rest(recv, head, limits).await
}

/// Reads a request frame on a server: like [`read_frame`], but the bytes the frame will hold
/// are reserved from its connection's `budget` before any is allocated, and given back when
/// the returned reservation drops; a frame that does not fit is refused at once with
/// `Unavailable` (see [`RequestBudget`]).
async fn read_request(
    recv: &mut quinn::RecvStream,
    limits: &Limits,
    budget: &RequestBudget,
) -> Result<(Frame, Held), NetError> {
    let inbound = read_header(recv, limits).await?;
    let held = budget.hold(inbound.header())?;
    let head = read_body(recv, inbound).await?;
    Ok((read_rest(recv, head, limits).await?, held))
}

/// Reads the payload that follows `head` and checks the whole frame.
pub async fn read_rest(recv: &mut quinn::RecvStream, inbound: Inbound, limits: &Limits) -> Result<Frame, NetError> {
    // Chunks appended as they come: no zero-filling of a buffer the stream then overwrites.
    let want = inbound.header().after_body_len();
    let mut payload = Vec::with_capacity(want);
    while payload.len() < want {
        match recv.read_chunk(want - payload.len(), true).await.map_err(|e| conn_err("read", e))? {
            Some(chunk) => payload.extend_from_slice(&chunk.bytes),
            None => return Err(read_err(quinn::ReadExactError::FinishedEarly(payload.len()))),
        }
    }
    Ok(inbound.finish(payload, limits)?)
}

/// How long [`end_read`] lets a stream's end be late before it gives up on it.
const END_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Closes the receiving side of a stream whose one frame has been read. A quinn
/// `RecvStream` dropped before its end sends the peer STOP_SENDING: an extra packet per
/// call that wakes the server. So the end is read here if it has arrived (and bytes after
/// the frame, if they have arrived, are refused); if it has not (the peer sent it in a
/// later packet), a task waits for it (up to [`END_WAIT`]) so the caller is not delayed.
pub fn end_read(mut recv: quinn::RecvStream) -> Result<(), NetError> {
    let polled = {
        let mut read = std::pin::pin!(recv.read_chunk(usize::MAX, true));
        read.as_mut().poll(&mut std::task::Context::from_waker(std::task::Waker::noop()))
    };
    match polled {
        // The end, or an error after a complete frame (a reset, a lost connection): done.
        std::task::Poll::Ready(Ok(None) | Err(_)) => Ok(()),
        std::task::Poll::Ready(Ok(Some(c))) => {
            Err(NetError::new(NetErrorKind::Protocol, format!("{} bytes after the frame", c.bytes.len())))
        }
        std::task::Poll::Pending => {
            tokio::spawn(async move {
                let _ = tokio::time::timeout(END_WAIT, recv.read_chunk(usize::MAX, true)).await;
            });
            Ok(())
        }
    }
}

/// Writes an encoded frame and its payload slices, then finishes the stream.
pub async fn write_frame(
    send: &mut quinn::SendStream,
    frame: &EncodedFrame,
    payload: &[&[u8]],
) -> Result<(), NetError> {
    send.write_all(frame.head()).await.map_err(|e| conn_err("write", e))?;
    for p in payload {
        send.write_all(p).await.map_err(|e| conn_err("write", e))?;
    }
    send.finish().map_err(|e| conn_err("finish", e))
}

/// Writes a reply: the head is copied into quinn's buffer, the payload is
/// handed over as a shared chunk without a copy.
async fn write_reply(send: &mut quinn::SendStream, reply: Reply) -> Result<(), NetError> {
    send.write_all(reply.frame.head()).await.map_err(|e| conn_err("write", e))?;
    if !reply.payload.is_empty() {
        send.write_chunk(reply.payload).await.map_err(|e| conn_err("write", e))?;
    }
    send.finish().map_err(|e| conn_err("finish", e))
}

/// Turns an `Error` frame into a [`NetError`]; other frames pass through.
pub fn check_reply(frame: Frame) -> Result<Frame, NetError> {
    if frame.kind() != cv_wire::Kind::Error {
        return Ok(frame);
    }
    let e = frame.access::<ErrorReply>()?;
    Err(NetError::remote(
        ErrorCode::from_u16(e.code.to_native()),
        e.message.as_str(),
        e.redirect.as_ref().map(|r| r.as_str().to_string()),
    ))
}

/// A request id to count on from: random, so that the ids of different connections and
/// processes do not meet within the time a server remembers them (see [`Conn::call_as`]).
pub fn random_request_id() -> u64 {
    rand::random()
}

/// A connection to a cv server after a successful hello. Cheap to clone;
/// many concurrent calls share it, one stream each.
#[derive(Clone, Debug)]
pub struct Conn {
    inner: quinn::Connection,
    limits: Limits,
    next_id: Arc<AtomicU64>,
    peer_role: Role,
}

impl Conn {
    /// Connects, completes the TLS handshake and the hello exchange.
    pub async fn connect(
        endpoint: &quinn::Endpoint,
        addr: SocketAddr,
        role: Role,
        node: &str,
        limits: Limits,
    ) -> Result<Conn, NetError> {
        let connecting = endpoint.connect(addr, SERVER_NAME).map_err(|e| conn_err("connect", e))?;
        Conn::finish(connecting, addr, role, node, limits).await
    }

    /// Completes a handshake under way to `addr` and the hello exchange.
    pub(crate) async fn finish(
        connecting: quinn::Connecting,
        addr: SocketAddr,
        role: Role,
        node: &str,
        limits: Limits,
    ) -> Result<Conn, NetError> {
        let inner = connecting.await.map_err(|e| conn_err(&format!("handshake with {addr}"), e))?;
        let next_id = Arc::new(AtomicU64::new(random_request_id()));
        let mut conn = Conn { inner, limits, next_id, peer_role: Role::Client };
        let hello = Hello { min_version: PROTOCOL_VERSION, max_version: PROTOCOL_VERSION, role, node: node.into() };
        let reply = conn.call(&hello, &[]).await.map_err(|e| hello_refused(addr, e))?;
        let ok = reply.access::<HelloOk>()?;
        conn.peer_role = cv_wire::rkyv::deserialize::<Role, cv_wire::rkyv::rancor::Error>(&ok.role)
            .map_err(|e| NetError::new(NetErrorKind::Protocol, format!("hello role: {e}")))?;
        Ok(conn)
    }

    /// Sends one request and waits for its reply. An `Error` reply becomes
    /// `Err(NetError::remote(..))`.
    pub async fn call<M: Message>(&self, msg: &M, payload: &[&[u8]]) -> Result<Frame, NetError> {
        self.call_as(self.next_request_id(), msg, payload).await
    }

    /// [`Conn::call`] with the caller's request id. A caller that retries a call sends every
    /// attempt with the same id (on any connection to the server): the master answers a
    /// repeated mutation from what it answered the first time instead of applying it again.
    pub async fn call_as<M: Message>(&self, request_id: u64, msg: &M, payload: &[&[u8]]) -> Result<Frame, NetError> {
        let frame = cv_wire::encode_with(msg, request_id, payload)?;
        let (mut send, mut recv) = self.inner.open_bi().await.map_err(|e| conn_err("open stream", e))?;
        write_frame(&mut send, &frame, payload).await?;
        let reply = read_frame(&mut recv, &self.limits).await?;
        end_read(recv)?;
        check_reply(reply)
    }

    /// A request id for a frame sent on this connection outside [`Conn::call`].
    pub fn next_request_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed) // wraps
    }

    /// The role the server announced.
    pub fn peer_role(&self) -> Role {
        self.peer_role
    }

    /// The underlying quinn connection.
    pub fn quinn(&self) -> &quinn::Connection {
        &self.inner
    }

    /// Whether the connection has been closed (idle, peer gone, error).
    pub fn is_closed(&self) -> bool {
        self.inner.close_reason().is_some()
    }
}

/// Runs `close` (which closes `conns`, or their endpoint) and waits, at most `limit`, until
/// each of them has sent its peer the close, so a process that exits next leaves nothing open
/// there. Not the endpoint's `wait_idle`: that also waits out the draining of handshakes that
/// were never answered (a dial of a dead server, ~3 s), which told nobody anything.
pub async fn close_and_tell(conns: &[Conn], close: impl FnOnce(), limit: std::time::Duration) {
    // quinn counts no CONNECTION_CLOSE sent, but after the close nothing else is sent: one
    // datagram more than before is the close going out.
    let sent = |c: &Conn| c.inner.stats().udp_tx.datagrams;
    let open: Vec<(&Conn, u64)> = conns.iter().filter(|c| !c.is_closed()).map(|c| (c, sent(c))).collect();
    close();
    let end = tokio::time::Instant::now() + limit;
    while open.iter().any(|(c, before)| sent(c) <= *before) && tokio::time::Instant::now() < end {
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }
}

/// A reply to send: an encoded frame and its payload.
#[derive(Clone, Debug)]
pub struct Reply {
    frame: EncodedFrame,
    // Shared, not copied: an open reply's tail is the tail cache's own bytes.
    payload: bytes::Bytes,
}

impl Reply {
    /// A successful reply.
    pub fn ok<M: Message>(request_id: u64, msg: &M, payload: impl Into<bytes::Bytes>) -> Reply {
        let payload = payload.into();
        match cv_wire::encode(msg, request_id, &payload) {
            Ok(frame) => Reply { frame, payload },
            Err(e) => Reply::error(request_id, ErrorCode::Internal, &format!("encode reply: {e}"), None),
        }
    }

    /// The reply frame's header and body (its payload follows them on the stream).
    pub fn head(&self) -> &[u8] {
        self.frame.head()
    }

    /// An error reply.
    pub fn error(request_id: u64, code: ErrorCode, message: &str, redirect: Option<String>) -> Reply {
        // Under the id the client's error names (`cv_client::Error::request_id`), so the two
        // can be matched.
        let request = format_args!("{request_id:016x}");
        if code.is_fault() {
            tracing::warn!(%request, code = code.name(), message, "request failed");
        } else {
            tracing::debug!(%request, code = code.name(), message, "request refused");
        }
        let msg = ErrorReply { code: code as u16, message: message.into(), redirect };
        let frame = cv_wire::encode(&msg, request_id, &[]).expect("an error reply always encodes");
        Reply { frame, payload: bytes::Bytes::new() }
    }
}

/// Answers a `Ping` with a `Pong` carrying the same nonce and payload: the
/// null RPC every cv server offers as its transport floor.
pub fn answer_ping(frame: &Frame) -> Reply {
    let id = frame.header().request_id;
    match frame.access::<cv_wire::msg::Ping>() {
        Ok(p) => Reply::ok(id, &cv_wire::msg::Pong { nonce: p.nonce.to_native() }, frame.payload().to_vec()),
        Err(e) => Reply::error(id, e.code(), &e.to_string(), None),
    }
}

/// The peer of a served connection.
#[derive(Clone, Debug)]
pub struct Peer {
    /// Remote address.
    pub addr: SocketAddr,
    /// Role announced in the hello, one its certificate allows
    /// ([`crate::identity::hello_allowed`]).
    pub role: Role,
    /// Node name announced in the hello (the certificate's, for a worker or master certificate
    /// that names one).
    pub node: String,
    /// This connection's id, unique among the endpoint's connections (quinn's `stable_id`):
    /// what [`Service::closed`] names.
    pub conn: usize,
    /// What the peer's certificate proves: rights are decided from this, not from `role`.
    pub cert: PeerCert,
}

/// Boxed future returned by a [`Service`].
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Something that answers requests.
pub trait Service: Send + Sync + 'static {
    /// Answers one frame whose header and checksum are verified. Its body is not yet
    /// validated: the service reads it, once, through [`Frame::access`] as the message the
    /// kind names (an invalid body is its `Malformed` reply).
    fn handle<'a>(&'a self, peer: &'a Peer, frame: Frame) -> BoxFuture<'a, Reply>;

    /// The connection to `peer` is gone: closed by either side, or silent past the idle
    /// timeout (a dead or cut-off peer). `by_peer`: the peer closed it itself (a process that
    /// stops cleanly), not a timeout, a reset or this side. Called once per served
    /// connection, after its last request was taken.
    fn closed(&self, _peer: &Peer, _by_peer: bool) {}
}

/// Accepts connections on `endpoint` until it is closed, serving each with
/// `service` after the hello exchange.
pub async fn serve<S: Service>(endpoint: quinn::Endpoint, service: Arc<S>, role: Role, node: String, limits: Limits) {
    serve_counted(endpoint, service, role, node, limits, Arc::default()).await
}

/// As [`serve`], counting connections and streams into `stats` (for metrics).
pub async fn serve_counted<S: Service>(
    endpoint: quinn::Endpoint,
    service: Arc<S>,
    role: Role,
    node: String,
    limits: Limits,
    stats: Arc<crate::conn_stats::ConnStats>,
) {
    serve_admitting(endpoint, service, (role, node), limits, (stats, Arc::default()), crate::quic::RETRY_ABOVE).await
}

/// As [`serve_counted`], admitting peers through `peers` (revoked certificates refused and
/// cut off, connections per identity capped), and sending a QUIC Retry to new peers once
/// `retry_above` handshakes are in flight (tests choose a low one).
pub async fn serve_admitting<S: Service>(
    endpoint: quinn::Endpoint,
    service: Arc<S>,
    (role, node): (Role, String),
    limits: Limits,
    (stats, peers): (Arc<crate::conn_stats::ConnStats>, Arc<crate::peers::Peers>),
    retry_above: usize,
) {
    let handshaking = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    while let Some(incoming) = endpoint.accept().await {
        if incoming.may_retry() && handshaking.load(std::sync::atomic::Ordering::Relaxed) >= retry_above {
            // `retry` fails only for a peer that has proved its address: `may_retry` said not.
            let _ = incoming.retry();
            stats.retried();
            continue;
        }
        let service = service.clone();
        let node = node.clone();
        let stats = stats.clone();
        let peers = peers.clone();
        let handshake = Handshaking::new(&handshaking);
        tokio::spawn(async move {
            let addr = incoming.remote_address();
            let handshaken = incoming.await;
            drop(handshake);
            let conn = match handshaken {
                Ok(c) => c,
                Err(e) => {
                    tracing::info!(%addr, error = %e, "handshake refused");
                    return;
                }
            };
            let hello = hello_as(&conn, role, &node, &limits, Some(&peers));
            let hello = tokio::time::timeout(crate::quic::HELLO_WITHIN, hello);
            let (peer, _admitted) = match hello.await {
                Ok(Ok((p, admitted))) => (Arc::new(p), admitted),
                Err(_) => {
                    tracing::info!(%addr, within = ?crate::quic::HELLO_WITHIN, "no hello in time; closing");
                    conn.close(quinn::VarInt::from_u32(1), b"no hello in time");
                    return;
                }
                Ok(Err(e)) => {
                    tracing::info!(%addr, error = %e, "hello failed");
                    // Let the peer read why before the connection goes.
                    let _ = tokio::time::timeout(std::time::Duration::from_secs(2), conn.closed()).await;
                    conn.close(quinn::VarInt::from_u32(1), b"hello failed");
                    return;
                }
            };
            stats.opened(&conn);
            serve_connection(&conn, peer, service, limits, &stats).await;
            stats.closed(&conn);
        });
    }
}

/// One handshake in flight at [`serve_counted`], counted until dropped.
struct Handshaking(Arc<std::sync::atomic::AtomicUsize>);

impl Handshaking {
    fn new(count: &Arc<std::sync::atomic::AtomicUsize>) -> Self {
        count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Self(count.clone())
    }
}

impl Drop for Handshaking {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Serves the streams of one connection whose hello is done.
async fn serve_connection<S: Service>(
    conn: &quinn::Connection,
    peer: Arc<Peer>,
    service: Arc<S>,
    limits: Limits,
    stats: &crate::conn_stats::ConnStats,
) {
    let budget = RequestBudget::for_limits(&limits);
    loop {
        let (mut send, mut recv) = match conn.accept_bi().await {
            Ok(s) => s,
            Err(e) => {
                tracing::debug!(addr = %peer.addr, error = %e, "connection ended");
                service.closed(&peer, matches!(e, quinn::ConnectionError::ApplicationClosed(_)));
                return;
            }
        };
        stats.stream();
        let service = service.clone();
        let peer = peer.clone();
        let budget = budget.clone();
        tokio::spawn(async move {
            // The reservation is held until the reply is written (a reply may carry the
            // request's bytes).
            let (reply, _held) = match read_request(&mut recv, &limits, &budget).await {
                // The request's end is read too: dropped unread, the stream would send the
                // client STOP_SENDING, one more packet per call. The body is validated once,
                // by the service, as the message its kind names.
                Ok((frame, held)) => match end_read(recv) {
                    Ok(()) => (service.handle(&peer, frame).await, Some(held)),
                    Err(e) => {
                        let code = e.code().unwrap_or(ErrorCode::Malformed);
                        (Reply::error(frame.header().request_id, code, e.message(), None), Some(held))
                    }
                },
                Err(e) => {
                    tracing::debug!(addr = %peer.addr, error = %e, "bad request frame");
                    // A stream or connection that went away gets no answer; a bad frame, or
                    // one refused for the budget, does.
                    if !matches!(e.kind(), NetErrorKind::Protocol | NetErrorKind::Remote) {
                        return;
                    }
                    let code = e.code().unwrap_or(ErrorCode::Malformed);
                    // Nothing more of this stream is read: give its credit back.
                    let _ = recv.stop(quinn::VarInt::from_u32(0));
                    (Reply::error(0, code, e.message(), None), None)
                }
            };
            if let Err(e) = write_reply(&mut send, reply).await {
                tracing::debug!(addr = %peer.addr, error = %e, "reply not delivered");
            }
        });
    }
}

/// Server side of the hello: reads `Hello` on the first stream, answers
/// `HelloOk` or a `VersionMismatch` error.
pub async fn accept_hello(conn: &quinn::Connection, role: Role, node: &str, limits: &Limits) -> Result<Peer, NetError> {
    hello_as(conn, role, node, limits, None).await.map(|(peer, _)| peer)
}

/// [`accept_hello`], admitting the peer through `peers` when given: a revoked certificate is
/// refused `PermissionDenied`, one past its connection cap `LimitExceeded`. An admitted
/// connection is registered there until the returned guard drops.
async fn hello_as(
    conn: &quinn::Connection,
    role: Role,
    node: &str,
    limits: &Limits,
    peers: Option<&Arc<crate::peers::Peers>>,
) -> Result<(Peer, Option<crate::peers::Admitted>), NetError> {
    let (mut send, mut recv) = conn.accept_bi().await.map_err(|e| conn_err("accept hello stream", e))?;
    let server = role_name(role);
    let frame = match read_frame(&mut recv, limits).await.and_then(|f| end_read(recv).map(|()| f)) {
        Ok(f) => f,
        Err(e) => {
            // A frame of another version is answered in that version, so its sender reads why.
            let Some(wire) = std::error::Error::source(&e).and_then(|s| s.downcast_ref::<cv_wire::WireError>()) else {
                let code = e.code().unwrap_or(ErrorCode::Malformed);
                let reply =
                    Reply::error(0, code, &format!("{e}; this {server} speaks version {PROTOCOL_VERSION}"), None);
                let _ = write_reply(&mut send, reply).await;
                return Err(e);
            };
            let refusal = hello::refuse_unreadable(wire, server);
            let _ = write_reply(&mut send, Reply { frame: refusal.frame, payload: bytes::Bytes::new() }).await;
            return Err(NetError::remote(wire.code(), refusal.message, None));
        }
    };
    let id = frame.header().request_id;
    let hello: Hello = frame.decode_body()?;
    let version = match hello::negotiate(hello.min_version, hello.max_version, id, server) {
        Ok(v) => v,
        Err(refusal) => {
            let _ = write_reply(&mut send, Reply { frame: refusal.frame, payload: bytes::Bytes::new() }).await;
            return Err(NetError::remote(ErrorCode::VersionMismatch, refusal.message, None));
        }
    };
    // What the peer may be is what its certificate proves: the hello only picks among that.
    let cert = match PeerCert::of_identity(conn.peer_identity())
        .map_err(|e| e.message().to_string())
        .and_then(|cert| crate::identity::hello_allowed(hello.role, &hello.node, &cert).map(|()| cert))
    {
        Ok(cert) => cert,
        Err(msg) => {
            let reply = Reply::error(id, ErrorCode::PermissionDenied, &msg, None);
            let _ = write_reply(&mut send, reply).await;
            return Err(NetError::remote(ErrorCode::PermissionDenied, msg, None));
        }
    };
    let admitted = match peers.map(|p| p.join(&cert, conn)).transpose() {
        Ok(a) => a,
        Err((code, msg)) => {
            let _ = write_reply(&mut send, Reply::error(id, code, &msg, None)).await;
            return Err(NetError::remote(code, msg, None));
        }
    };
    let ok = HelloOk { version, role, node: node.into() };
    let reply = Reply::ok(id, &ok, Vec::new());
    write_reply(&mut send, reply).await?;
    let peer = Peer { addr: conn.remote_address(), role: hello.role, node: hello.node, conn: conn.stable_id(), cert };
    Ok((peer, admitted))
}

/// A hello refused for its version names the server and both versions: an operator reads
/// which process to upgrade. Not retryable, like every `VersionMismatch`.
fn hello_refused(addr: SocketAddr, e: NetError) -> NetError {
    if e.code() != Some(ErrorCode::VersionMismatch) {
        return e;
    }
    let msg = format!("hello to {addr}: {}; this build speaks protocol version {PROTOCOL_VERSION}", e.message());
    NetError::remote(ErrorCode::VersionMismatch, msg, None)
}

/// What a server is, as a refusal names it.
fn role_name(role: Role) -> &'static str {
    match role {
        Role::Master => "master",
        Role::Worker => "worker",
        Role::Client => "client",
        Role::Admin => "admin tool",
    }
}

/// Default stream and payload budget for a block-sized transfer, to size
/// windows in callers.
pub const DEFAULT_BLOCK: ByteSize = ByteSize::mib(4);
