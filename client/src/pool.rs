//! One connection per endpoint, made on first use, replaced when it closes.

use crate::error::{Error, ErrorKind, Result};
use cv_net::dial::{Dial, Persist};
use cv_net::rpc::Conn;
use cv_wire::Limits;
use cv_wire::msg::Role;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::OnceCell;

type Slot = Arc<OnceCell<Conn>>;

/// Frame limits of every connection the client makes.
pub(crate) const LIMITS: Limits = Limits::DEFAULT;

/// How long a worker address that could not be reached is not dialed again at all: reads of
/// it fail at once and ask the master where to go, instead of each waiting out the idle
/// timeout. About the time the master takes to notice the worker is gone (the same timeout).
pub(crate) const DOWN_FOR: Duration = Duration::from_millis(1500);
/// After that, and until this long, it is dialed only when the master, asked again, still
/// names it (it may be back): a block map from before the failure does not send a read to
/// a dead address.
pub(crate) const SUSPECT_FOR: Duration = Duration::from_secs(30);

/// How a caller wants a connection made: whom it dials (for errors) and for how long.
#[derive(Clone, Copy)]
pub(crate) struct Dialing<'a> {
    /// `master`, `worker 3 shard 1`.
    pub(crate) peer: &'a (dyn std::fmt::Display + Sync),
    pub(crate) persist: Persist,
    pub(crate) deadline: tokio::time::Instant,
}

/// Connections keyed by address.
#[derive(Debug)]
pub(crate) struct Pool {
    endpoint: quinn::Endpoint,
    node: String,
    /// How long a dial's first attempt waits for the server's first answer: the transport's
    /// idle timeout (see `cv_net::dial`).
    connect_timeout: Duration,
    slots: Mutex<HashMap<SocketAddr, Slot>>,
    /// Worker addresses found unreachable, and when.
    down: Mutex<HashMap<SocketAddr, Instant>>,
    /// Whether `down` may hold anything: every block read asks, and the answer is almost
    /// always no, so it is given without the lock.
    any_down: AtomicBool,
}

impl Pool {
    pub(crate) fn new(endpoint: quinn::Endpoint, node: String, connect_timeout: Duration) -> Self {
        let (slots, down) = (Mutex::new(HashMap::new()), Mutex::new(HashMap::new()));
        Pool { endpoint, node, connect_timeout, slots, down, any_down: AtomicBool::new(false) }
    }

    /// QUIC connections open now (to masters and workers), for metrics.
    pub(crate) fn open_connections(&self) -> usize {
        self.endpoint.open_connections()
    }

    /// The live connection to `addr`, connecting (once, however many callers ask at the same
    /// time) if there is none, as `how` says.
    pub(crate) async fn get(&self, addr: SocketAddr, how: Dialing<'_>) -> Result<Conn> {
        let asked = Instant::now();
        loop {
            let slot = {
                let mut slots = self.slots.lock().expect("pool lock");
                slots.entry(addr).or_default().clone()
            };
            let connect = || async {
                // Callers waiting on one slot dial one after another when a dial fails, so a
                // dead address would cost each of them a whole attempt in turn: a dial that
                // fails marks the address down, and callers that would give up after one
                // attempt anyway, and were waiting on it, fail at once. Callers that persist
                // dial again within their own deadline.
                if how.persist == Persist::Once
                    && let Some(since) = self.down_since(addr).filter(|s| *s < asked.elapsed())
                {
                    let msg = format!(
                        "connecting to {} at {addr}: a dial failed {} ms ago while this one waited",
                        how.peer,
                        since.as_millis()
                    );
                    return Err(cv_net::NetError::new(cv_net::NetErrorKind::Timeout, msg));
                }
                let dial = Dial {
                    endpoint: &self.endpoint,
                    addr,
                    peer: how.peer,
                    role: Role::Client,
                    node: &self.node,
                    limits: LIMITS,
                    answer_within: self.connect_timeout,
                    deadline: how.deadline,
                    persist: how.persist,
                };
                let result = dial.connect().await;
                if result.is_err() {
                    self.mark(addr);
                }
                result
            };
            let conn = slot.get_or_try_init(connect).await?.clone();
            if !conn.is_closed() {
                return Ok(conn);
            }
            // Closed (idle timeout, peer restart): forget it and connect anew.
            let mut slots = self.slots.lock().expect("pool lock");
            if slots.get(&addr).is_some_and(|s| Arc::ptr_eq(s, &slot)) {
                slots.remove(&addr);
            }
        }
    }

    /// The connection to the master at `addr`, dialed as `how` says; an address where
    /// something else answers (a worker's shard) is a configuration error, not retried.
    pub(crate) async fn master(&self, addr: SocketAddr, how: Dialing<'_>) -> Result<Conn> {
        let conn = self.get(addr, how).await?;
        if conn.peer_role() != Role::Master {
            let role = conn.peer_role();
            return Err(Error::new(ErrorKind::Config, format!("{addr} answered as {role:?}, not as a master")));
        }
        Ok(conn)
    }

    /// Whether the master at `addr` is to be passed over while another may serve: its
    /// connection just closed, or it could not be reached a moment ago.
    pub(crate) fn master_down(&self, addr: SocketAddr) -> bool {
        self.closed(addr) || self.down_since(addr).is_some_and(|d| d < DOWN_FOR)
    }

    /// Marks `addr` unreachable (and drops its connection) for [`DOWN_FOR`].
    pub(crate) fn mark_down(&self, addr: SocketAddr) {
        self.forget(addr);
        self.mark(addr);
    }

    fn mark(&self, addr: SocketAddr) {
        self.down.lock().expect("pool lock").insert(addr, Instant::now());
        self.any_down.store(true, Ordering::Release);
    }

    /// How long ago `addr` was marked unreachable, if within [`SUSPECT_FOR`].
    pub(crate) fn down_since(&self, addr: SocketAddr) -> Option<Duration> {
        if !self.any_down.load(Ordering::Acquire) {
            return None;
        }
        let mut down = self.down.lock().expect("pool lock");
        let since = down.get(&addr)?.elapsed();
        if since < SUSPECT_FOR {
            return Some(since);
        }
        self.unmark(&mut down, addr);
        None
    }

    /// `addr` answered: it is not down.
    pub(crate) fn mark_up(&self, addr: SocketAddr) {
        if self.any_down.load(Ordering::Acquire) {
            self.unmark(&mut self.down.lock().expect("pool lock"), addr);
        }
    }

    fn unmark(&self, down: &mut HashMap<SocketAddr, Instant>, addr: SocketAddr) {
        down.remove(&addr);
        if down.is_empty() {
            self.any_down.store(false, Ordering::Release);
        }
    }

    /// Whether the connection to `addr` was made and has closed since (the peer went away or
    /// went silent past the idle timeout): a caller with somewhere else to go need not dial it.
    pub(crate) fn closed(&self, addr: SocketAddr) -> bool {
        let slots = self.slots.lock().expect("pool lock");
        slots.get(&addr).and_then(|s| s.get()).is_some_and(Conn::is_closed)
    }

    /// Drops the connection to `addr` so the next call reconnects.
    pub(crate) fn forget(&self, addr: SocketAddr) {
        self.slots.lock().expect("pool lock").remove(&addr);
    }

    pub(crate) fn close(&self) {
        self.endpoint.close(0u32.into(), b"client closed");
    }

    /// Closes every connection and waits, at most `limit`, until each one that was made has
    /// sent its peer the close (`rpc::close_and_tell`: not for dials never answered).
    pub(crate) async fn close_and_tell(&self, limit: Duration) {
        let made: Vec<Conn> = {
            let slots = self.slots.lock().expect("pool lock");
            slots.values().filter_map(|s| s.get()).cloned().collect()
        };
        cv_net::rpc::close_and_tell(&made, || self.close(), limit).await;
    }
}
