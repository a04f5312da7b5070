//! The public [`Endpoint`]: binds a shard's UDP port and hands established connections out.

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::rc::{Rc, Weak};
use std::sync::Arc;
use std::task::{Poll, Waker};

use bytes::Bytes;
use quinn_proto::{ConnectionHandle, EndpointConfig, ServerConfig, VarInt};

use super::config::EndpointOptions;
use super::conn::{ConnShared, Connection};
use super::driver;
use super::error::QuicError;
use super::notify::{Notify, WakerList};
use super::readiness::Readiness;
use super::timers::Timers;
use super::udp::{self, Datagram, OwnedTransmit, UdpIo};

/// Endpoint state owned by the driver; borrowed only for synchronous steps.
#[derive(Debug)]
pub(crate) struct EndpointState {
    pub(crate) proto: quinn_proto::Endpoint,
    pub(crate) conns: HashMap<ConnectionHandle, Rc<ConnShared>>,
    pub(crate) timers: Timers,
    pub(crate) io: UdpIo,
    pub(crate) opts: EndpointOptions,
    /// Established connections not yet taken by `accept`.
    pub(crate) incoming: VecDeque<Connection>,
    pub(crate) acceptors: WakerList,
    pub(crate) closing: bool,
    /// Datagrams the socket refused (send buffer full), sent before anything else.
    pub(crate) unsent: VecDeque<OwnedTransmit>,
    pub(crate) tx_buf: Vec<u8>,
    pub(crate) rx: Vec<Datagram>,
    /// QUIC Retry packets sent to new peers (`EndpointOptions::retry_above`).
    pub(crate) retries: u64,
}

/// Everything the driver, the reader and the handles share (one executor, so `Rc`).
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) me: Weak<Shared>,
    pub(crate) state: RefCell<EndpointState>,
    /// Wakes the driver: new datagrams, stream I/O, a close, a dropped handle.
    pub(crate) wake: Notify,
    /// Lets the reader wait for readability again once the driver drained the socket.
    pub(crate) rearm: Notify,
    /// Datagrams may be queued on the socket: set by the reader, cleared by the driver once
    /// a receive drained it. Passes woken by stream I/O skip the (empty) `recvmmsg`.
    pub(crate) readable: Cell<bool>,
    /// Connections a driver pass must visit.
    pub(crate) dirty: RefCell<Vec<Rc<ConnShared>>>,
    pub(crate) local_addr: SocketAddr,
    /// The driver has exited: every connection is drained.
    pub(crate) stopped: Cell<bool>,
    pub(crate) idle_waiters: RefCell<WakerList>,
}

impl Shared {
    /// Queues a connection for the next driver pass without waking the driver.
    pub(crate) fn queue_dirty(&self, conn: &Rc<ConnShared>) {
        if !conn.dirty.replace(true) {
            self.dirty.borrow_mut().push(conn.clone());
        }
    }

    pub(crate) fn mark_dirty(&self, conn: &Rc<ConnShared>) {
        self.queue_dirty(conn);
        self.wake.notify();
    }

    pub(crate) fn close(&self, code: VarInt, reason: &[u8]) {
        let reason = Bytes::copy_from_slice(reason);
        let mut wake: Vec<Waker> = Vec::new();
        let unaccepted = {
            let mut st = self.state.borrow_mut();
            if st.closing {
                return;
            }
            st.closing = true;
            for conn in st.conns.values() {
                conn.state.borrow_mut().close_locally(code, reason.clone(), &mut wake);
                self.queue_dirty(conn);
            }
            st.acceptors.drain_into(&mut wake);
            std::mem::take(&mut st.incoming)
        };
        // Dropped outside the borrow: a dropped handle may call back into `mark_dirty`.
        drop(unaccepted);
        wake.into_iter().for_each(Waker::wake);
        self.wake.notify();
    }
}

/// Closes the endpoint when the last user handle goes away.
#[derive(Debug)]
struct Owner(Rc<Shared>);

impl Drop for Owner {
    fn drop(&mut self) {
        self.0.close(VarInt::from_u32(0), b"endpoint dropped");
    }
}

/// One shard's QUIC server endpoint, driven by tasks on the current shard runtime ([`crate::Runtime`]).
///
/// Cheap to clone; not `Send`. Dropping the last clone closes the endpoint.
#[derive(Debug, Clone)]
pub struct Endpoint {
    owner: Rc<Owner>,
}

impl Endpoint {
    /// Binds `addr` and starts the driver on the current shard runtime.
    ///
    /// TLS, idle timeout, keep-alive and per-connection stream limits come from
    /// `server_config`; socket buffers and the connection cap from `opts`.
    ///
    /// # Panics
    /// When called outside a shard runtime (the driver tasks need one).
    pub fn bind(addr: SocketAddr, server_config: Arc<ServerConfig>, opts: EndpointOptions) -> Result<Self, QuicError> {
        let socket =
            Rc::new(udp::bind(addr, opts.socket_buffer_bytes).map_err(|e| QuicError::io("bind udp socket", e))?);
        let readiness = Readiness::new(socket.clone());
        let mut endpoint_config = EndpointConfig::default();
        endpoint_config
            .max_udp_payload_size(opts.max_udp_payload)
            .map_err(|e| QuicError::io("max udp payload", std::io::Error::new(std::io::ErrorKind::InvalidInput, e)))?;
        let max_payload = endpoint_config.get_max_udp_payload_size() as usize;
        let endpoint_config = Arc::new(endpoint_config);
        let io = UdpIo::new(socket, max_payload).map_err(|e| QuicError::io("udp socket state", e))?;
        let local_addr = io.local_addr().map_err(|e| QuicError::io("udp local address", e))?;
        let allow_mtud = !io.may_fragment();
        let proto = quinn_proto::Endpoint::new(endpoint_config, Some(server_config), allow_mtud, None);
        let shared = Rc::new_cyclic(|me| Shared {
            me: me.clone(),
            state: RefCell::new(EndpointState {
                proto,
                conns: HashMap::new(),
                timers: Timers::default(),
                io,
                opts,
                incoming: VecDeque::new(),
                acceptors: WakerList::default(),
                closing: false,
                unsent: VecDeque::new(),
                tx_buf: Vec::new(),
                rx: Vec::new(),
                retries: 0,
            }),
            wake: Notify::default(),
            rearm: Notify::default(),
            readable: Cell::new(false),
            dirty: RefCell::new(Vec::new()),
            local_addr,
            stopped: Cell::new(false),
            idle_waiters: RefCell::new(WakerList::default()),
        });
        driver::spawn(&shared, readiness);
        Ok(Self { owner: Rc::new(Owner(shared)) })
    }

    fn shared(&self) -> &Rc<Shared> {
        &self.owner.0
    }

    /// The bound UDP address (with the real port when bound to port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.shared().local_addr
    }

    /// Waits for the next established connection; `None` once the endpoint is closing.
    pub async fn accept(&self) -> Option<Connection> {
        let shared = self.shared();
        std::future::poll_fn(|cx| {
            let mut st = shared.state.borrow_mut();
            if let Some(conn) = st.incoming.pop_front() {
                return Poll::Ready(Some(conn));
            }
            if st.closing {
                return Poll::Ready(None);
            }
            st.acceptors.register(cx.waker());
            Poll::Pending
        })
        .await
    }

    /// Closes every connection with `code`/`reason` and refuses new ones. Idempotent.
    pub fn close(&self, code: VarInt, reason: &[u8]) {
        self.shared().close(code, reason);
    }

    /// Waits until the endpoint is closed and every connection has drained.
    pub async fn wait_idle(&self) {
        let shared = self.shared();
        std::future::poll_fn(|cx| {
            if shared.stopped.get() {
                return Poll::Ready(());
            }
            shared.idle_waiters.borrow_mut().register(cx.waker());
            Poll::Pending
        })
        .await
    }

    /// QUIC Retry packets sent to new peers, handshakes being many (`retry_above`).
    pub fn retries_sent(&self) -> u64 {
        self.shared().state.borrow().retries
    }

    /// Connections currently held (handshaking, established or draining).
    pub fn connection_count(&self) -> usize {
        self.shared().state.borrow().conns.len()
    }

    /// Replaces the TLS/transport config for new connections (e.g. certificate rotation).
    pub fn set_server_config(&self, server_config: Arc<ServerConfig>) {
        self.shared().state.borrow_mut().proto.set_server_config(Some(server_config));
    }
}
