//! Per-connection state shared by the driver and the handlers, and the public [`Connection`].

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::rc::{Rc, Weak};
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};

use bytes::Bytes;
use quinn_proto::{ConnectionError, ConnectionHandle, ConnectionStats, Dir, Event, StreamEvent, StreamId, VarInt};
use rustls::pki_types::CertificateDer;

use super::endpoint::Shared;
use super::error::QuicError;
use super::notify::WakerList;
use super::stream::{RecvStream, SendStream};

/// Connection state; only borrowed briefly, never across an `.await`.
#[derive(Debug)]
pub(crate) struct ConnState {
    pub(crate) inner: quinn_proto::Connection,
    /// Set once, when quinn-proto reports the connection lost (or closed by us).
    pub(crate) error: Option<ConnectionError>,
    pub(crate) readers: HashMap<StreamId, Waker>,
    pub(crate) writers: HashMap<StreamId, Waker>,
    pub(crate) accept_bi: WakerList,
    pub(crate) closed: WakerList,
}

/// One connection as the driver and every handle see it.
#[derive(Debug)]
pub(crate) struct ConnShared {
    pub(crate) handle: ConnectionHandle,
    pub(crate) endpoint: Weak<Shared>,
    pub(crate) state: RefCell<ConnState>,
    /// User-facing handles (connection and streams); at zero the connection is closed.
    handles: Cell<usize>,
    /// Queued in the endpoint's dirty list, awaiting a driver pass.
    pub(crate) dirty: Cell<bool>,
    /// The deadline registered in the endpoint's timer set.
    pub(crate) timer: Cell<Option<Instant>>,
}

/// Application error code used when the last handle is dropped or a stream is abandoned.
pub(crate) const CODE_DROPPED: VarInt = VarInt::from_u32(0);

impl ConnShared {
    pub(crate) fn new(handle: ConnectionHandle, endpoint: Weak<Shared>, inner: quinn_proto::Connection) -> Rc<Self> {
        Rc::new(Self {
            handle,
            endpoint,
            state: RefCell::new(ConnState {
                inner,
                error: None,
                readers: HashMap::new(),
                writers: HashMap::new(),
                accept_bi: WakerList::default(),
                closed: WakerList::default(),
            }),
            handles: Cell::new(0),
            dirty: Cell::new(false),
            timer: Cell::new(None),
        })
    }

    /// Asks the driver to poll this connection (after a read, write, finish, close...).
    pub(crate) fn wake_driver(self: &Rc<Self>) {
        if let Some(ep) = self.endpoint.upgrade() {
            ep.mark_dirty(self);
        }
    }

    /// The error to return to a handler once the connection is gone.
    pub(crate) fn lost_error(state: &ConnState, context: &'static str) -> Option<QuicError> {
        state.error.as_ref().map(|e| QuicError::lost(context, e.clone()))
    }
}

impl ConnState {
    /// Records `reason` as the end of the connection and collects every waiter.
    pub(crate) fn fail(&mut self, reason: ConnectionError, wake: &mut Vec<Waker>) {
        self.error.get_or_insert(reason);
        wake.extend(self.readers.drain().map(|(_, w)| w));
        wake.extend(self.writers.drain().map(|(_, w)| w));
        self.accept_bi.drain_into(wake);
        self.closed.drain_into(wake);
    }

    /// Closes from our side; local waiters see `LocallyClosed` at once, as in quinn.
    pub(crate) fn close_locally(&mut self, code: VarInt, reason: Bytes, wake: &mut Vec<Waker>) {
        if !self.inner.is_closed() {
            self.inner.close(Instant::now(), code, reason);
        }
        self.fail(ConnectionError::LocallyClosed, wake);
    }

    /// Applies one application event; returns true on `Connected`.
    pub(crate) fn on_event(&mut self, event: Event, wake: &mut Vec<Waker>) -> bool {
        match event {
            Event::Connected => return true,
            Event::ConnectionLost { reason } => self.fail(reason, wake),
            Event::Stream(StreamEvent::Opened { dir: Dir::Bi }) => self.accept_bi.drain_into(wake),
            Event::Stream(StreamEvent::Opened { dir: Dir::Uni }) => {
                // Handlers only serve bidirectional streams: refuse unidirectional ones at once
                // so they cannot pin stream credit.
                while let Some(id) = self.inner.streams().accept(Dir::Uni) {
                    let _ = self.inner.recv_stream(id).stop(CODE_DROPPED);
                }
            }
            Event::Stream(StreamEvent::Readable { id }) => wake.extend(self.readers.remove(&id)),
            Event::Stream(
                StreamEvent::Writable { id } | StreamEvent::Finished { id } | StreamEvent::Stopped { id, .. },
            ) => wake.extend(self.writers.remove(&id)),
            Event::Stream(StreamEvent::Available { .. })
            | Event::HandshakeDataReady
            | Event::DatagramReceived
            | Event::DatagramsUnblocked => {}
        }
        false
    }
}

/// A counted reference to a connection; the last one dropped closes the connection.
#[derive(Debug)]
pub(crate) struct ConnRef(pub(crate) Rc<ConnShared>);

impl ConnRef {
    pub(crate) fn new(conn: &Rc<ConnShared>) -> Self {
        conn.handles.set(conn.handles.get() + 1);
        Self(conn.clone())
    }
}

impl Clone for ConnRef {
    fn clone(&self) -> Self {
        Self::new(&self.0)
    }
}

impl Drop for ConnRef {
    fn drop(&mut self) {
        let left = self.0.handles.get().saturating_sub(1);
        self.0.handles.set(left);
        if left > 0 {
            return;
        }
        {
            let Ok(mut st) = self.0.state.try_borrow_mut() else {
                return; // Only the driver borrows across drops; it closes on its own.
            };
            if st.error.is_some() {
                return;
            }
            // Nobody is left to wait on this connection, so there is nothing to wake.
            let mut none = Vec::new();
            st.close_locally(CODE_DROPPED, Bytes::new(), &mut none);
        }
        self.0.wake_driver();
    }
}

/// An established connection handed to the shard's handlers. Cheap to clone; not `Send`.
#[derive(Debug, Clone)]
pub struct Connection {
    conn: ConnRef,
    remote: SocketAddr,
    peer_certs: Option<Rc<[CertificateDer<'static>]>>,
}

impl Connection {
    pub(crate) fn new(conn: &Rc<ConnShared>) -> Self {
        let st = conn.state.borrow();
        let remote = st.inner.remote_address();
        let peer_certs = st
            .inner
            .crypto_session()
            .peer_identity()
            .and_then(|id| id.downcast::<Vec<CertificateDer<'static>>>().ok())
            .map(|certs| Rc::from(certs.into_boxed_slice()));
        drop(st);
        Self { conn: ConnRef::new(conn), remote, peer_certs }
    }

    /// The peer's UDP address at handshake time.
    pub fn remote_address(&self) -> SocketAddr {
        self.remote
    }

    /// The certificate chain the peer presented (leaf first), if it presented one.
    pub fn peer_certificates(&self) -> Option<&[CertificateDer<'static>]> {
        self.peer_certs.as_deref()
    }

    /// A number that identifies this connection among the endpoint's live connections.
    pub fn stable_id(&self) -> usize {
        self.conn.0.handle.0
    }

    /// Waits for the peer to open a bidirectional stream.
    pub async fn accept_bi(&self) -> Result<(SendStream, RecvStream), QuicError> {
        let conn = &self.conn.0;
        std::future::poll_fn(|cx| {
            let mut st = conn.state.borrow_mut();
            if let Some(e) = ConnShared::lost_error(&st, "accept_bi") {
                return Poll::Ready(Err(e));
            }
            match st.inner.streams().accept(Dir::Bi) {
                Some(id) => Poll::Ready(Ok(id)),
                None => {
                    st.accept_bi.register(cx.waker());
                    Poll::Pending
                }
            }
        })
        .await
        .map(|id| {
            // Accepting may let quinn-proto issue more stream credit (MAX_STREAMS).
            conn.wake_driver();
            (SendStream::new(ConnRef::new(conn), id), RecvStream::new(ConnRef::new(conn), id))
        })
    }

    /// Closes the connection at once; open streams fail with `ConnectionLost`.
    pub fn close(&self, code: VarInt, reason: &[u8]) {
        let conn = &self.conn.0;
        let mut wake = Vec::new();
        conn.state.borrow_mut().close_locally(code, Bytes::copy_from_slice(reason), &mut wake);
        wake.into_iter().for_each(Waker::wake);
        conn.wake_driver();
    }

    /// Waits until the connection is lost or closed, and says why.
    pub async fn closed(&self) -> ConnectionError {
        let conn = &self.conn.0;
        std::future::poll_fn(|cx| {
            let mut st = conn.state.borrow_mut();
            match &st.error {
                Some(e) => Poll::Ready(e.clone()),
                None => {
                    st.closed.register(cx.waker());
                    Poll::Pending
                }
            }
        })
        .await
    }

    /// Why the connection ended, if it has.
    pub fn close_reason(&self) -> Option<ConnectionError> {
        self.conn.0.state.borrow().error.clone()
    }

    /// The current smoothed round-trip time estimate.
    pub fn rtt(&self) -> Duration {
        self.conn.0.state.borrow().inner.rtt()
    }

    /// Transport counters (packets, bytes, losses).
    pub fn stats(&self) -> ConnectionStats {
        self.conn.0.state.borrow().inner.stats()
    }
}
