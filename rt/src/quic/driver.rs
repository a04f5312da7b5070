//! The driver: moves datagrams between the socket and quinn-proto, fires timers, wakes tasks.
//!
//! Two tasks on the shard's executor: the reader only waits for readability (see
//! `readiness`) and wakes the driver; the driver does all the work in synchronous passes,
//! each under one short borrow of the endpoint state, and wakes handler tasks after it.

use std::future::poll_fn;
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};

use quinn_proto::{AcceptError, DatagramEvent, Incoming};
use tracing::{debug, warn};

use super::conn::{ConnShared, Connection};
use super::endpoint::{EndpointState, Shared};
use super::readiness::Readiness;
use super::udp::OwnedTransmit;

/// Batched receives per pass before other work gets a turn.
const RECV_BATCHES_PER_PASS: usize = 8;
/// Largest UDP payload a GSO send may carry (below the 65,507-byte IPv4 UDP limit).
const MAX_GSO_BYTES: usize = 64_000;
/// Deadlines closer than this are not worth sleeping for: the driver yields and re-checks
/// instead. Pacing produces such deadlines.
const SPIN_BELOW: Duration = Duration::from_micros(50);
/// Stateless responses kept while the socket is full; beyond this they are dropped (the
/// peer retransmits its Initial).
const MAX_UNSENT: usize = 1024;

/// What the driver does after a pass.
enum Next {
    /// Nothing to do until woken or until the deadline.
    Idle(Option<Instant>),
    /// Work left (budget exhausted): let the reactor and other tasks run, then continue.
    Busy,
    /// The socket's send buffer is full: back off briefly.
    SendBlocked,
    /// Closed and every connection drained.
    Finished,
}

/// Starts the reader and the driver as detached tasks.
pub(crate) fn spawn(shared: &Rc<Shared>, readiness: Readiness) {
    let reader = crate::spawn_local(read_loop(Rc::downgrade(shared), readiness));
    let shared = shared.clone();
    crate::spawn_local(async move {
        drive_loop(&shared).await;
        drop(reader); // cancels it
        shared.stopped.set(true);
        shared.dirty.borrow_mut().clear();
        let mut wake = Vec::new();
        shared.idle_waiters.borrow_mut().drain_into(&mut wake);
        wake.into_iter().for_each(Waker::wake);
    })
    .detach();
}

async fn read_loop(shared: std::rc::Weak<Shared>, readiness: Readiness) {
    loop {
        if let Err(e) = readiness.readable().await {
            warn!(error = %e, "quic: waiting for readability failed");
            crate::sleep(Duration::from_millis(1)).await;
        }
        let Some(shared) = shared.upgrade() else {
            return;
        };
        shared.readable.set(true);
        shared.wake.notify();
        // Polling again before the driver drained the socket would spin.
        shared.rearm.wait().await;
    }
}

async fn drive_loop(shared: &Rc<Shared>) {
    loop {
        let next = pass(shared, Instant::now());
        let next = match next {
            Next::Idle(Some(d)) if d.saturating_duration_since(Instant::now()) < SPIN_BELOW => Next::Busy,
            other => other,
        };
        match next {
            Next::Finished => return,
            // The runtime reaps its ring (disk completions) between batches of tasks, so a
            // yield lets both the handlers and the disk make progress.
            Next::Busy => crate::yield_now().await,
            Next::SendBlocked => {
                let backoff = shared.state.borrow().opts.send_backoff;
                crate::sleep(backoff).await;
            }
            Next::Idle(deadline) => wait(shared, deadline).await,
        }
    }
}

/// Waits for a wake-up or the deadline, whichever is first.
async fn wait(shared: &Shared, deadline: Option<Instant>) {
    let mut timer = deadline.map(crate::Sleep::until);
    poll_fn(|cx| {
        if shared.wake.poll_wait(cx).is_ready() {
            return Poll::Ready(());
        }
        match timer.as_mut() {
            Some(t) => Pin::new(t).poll(cx),
            None => Poll::Pending,
        }
    })
    .await
}

/// One synchronous pass. Wakers are collected and woken after the borrows end.
fn pass(shared: &Rc<Shared>, now: Instant) -> Next {
    let mut wake: Vec<Waker> = Vec::new();
    let mut established: Vec<Rc<ConnShared>> = Vec::new();
    let next = {
        let mut guard = shared.state.borrow_mut();
        let st = &mut *guard;
        if !flush_unsent(st) {
            return Next::SendBlocked;
        }
        let rx_more = shared.readable.get() && receive(shared, st, now);
        for handle in st.timers.pop_due(now) {
            if let Some(conn) = st.conns.get(&handle) {
                conn.timer.set(None);
                conn.state.borrow_mut().inner.handle_timeout(now);
                shared.queue_dirty(conn);
            }
        }
        let dirty = std::mem::take(&mut *shared.dirty.borrow_mut());
        let mut blocked = false;
        for conn in dirty {
            conn.dirty.set(false);
            if blocked {
                shared.queue_dirty(&conn);
                continue;
            }
            let out = drive_conn(st, &conn, now, &mut wake);
            if out.connected {
                established.push(conn.clone());
            }
            match out.progress {
                Progress::Idle => {}
                Progress::More => shared.queue_dirty(&conn),
                Progress::Blocked => {
                    blocked = true;
                    shared.queue_dirty(&conn);
                }
                Progress::Drained => {
                    st.timers.update(&conn, None);
                    st.conns.remove(&conn.handle);
                }
            }
        }
        if st.closing && st.conns.is_empty() && st.unsent.is_empty() {
            Next::Finished
        } else if blocked {
            Next::SendBlocked
        } else if rx_more || !shared.dirty.borrow().is_empty() {
            Next::Busy
        } else {
            Next::Idle(st.timers.next())
        }
    };
    hand_out(shared, established, &mut wake);
    wake.into_iter().for_each(Waker::wake);
    next
}

/// Queues newly established connections for `accept` (or closes them while shutting down).
fn hand_out(shared: &Rc<Shared>, established: Vec<Rc<ConnShared>>, wake: &mut Vec<Waker>) {
    for conn in established {
        // Built outside the endpoint borrow: creating the handle borrows the connection.
        let handle = Connection::new(&conn);
        let mut st = shared.state.borrow_mut();
        if st.closing {
            drop(st);
            drop(handle); // the last handle: closes the connection
            continue;
        }
        st.incoming.push_back(handle);
        st.acceptors.drain_into(wake);
    }
}

/// Sends datagrams the socket refused earlier; false while it still refuses.
fn flush_unsent(st: &mut EndpointState) -> bool {
    while let Some(tx) = st.unsent.front() {
        match st.io.send(&tx.meta, &tx.data) {
            Ok(()) => {
                st.unsent.pop_front();
            }
            Err(_) => return false,
        }
    }
    true
}

/// Sends now, or keeps the datagram for `flush_unsent` when the socket is full.
fn send_or_keep(st: &mut EndpointState, meta: quinn_proto::Transmit, data: Vec<u8>) {
    if st.unsent.is_empty() && st.io.send(&meta, &data).is_ok() {
        return;
    }
    if st.unsent.len() < MAX_UNSENT {
        st.unsent.push_back(OwnedTransmit { meta, data });
    }
}

/// Drains the socket (bounded); returns true if datagrams may remain. Once drained, the
/// socket is not read again until the reader sees a datagram queued.
fn receive(shared: &Rc<Shared>, st: &mut EndpointState, now: Instant) -> bool {
    for _ in 0..RECV_BATCHES_PER_PASS {
        let mut rx = std::mem::take(&mut st.rx);
        let res = st.io.recv_batch(&mut rx);
        for d in rx.drain(..) {
            let mut buf = Vec::new();
            match st.proto.handle(now, d.remote, d.local_ip, d.ecn, d.data, &mut buf) {
                Some(DatagramEvent::ConnectionEvent(handle, event)) => {
                    if let Some(conn) = st.conns.get(&handle) {
                        conn.state.borrow_mut().inner.handle_event(event);
                        shared.queue_dirty(conn);
                    }
                }
                Some(DatagramEvent::NewConnection(incoming)) => admit(shared, st, incoming, now),
                Some(DatagramEvent::Response(tx)) => send_or_keep(st, tx, buf),
                None => {}
            }
        }
        st.rx = rx;
        match res {
            Ok(true) => continue,
            // Drained without another (empty) recvmmsg: the reader's peek sees any later arrival.
            Ok(false) => {
                shared.readable.set(false);
                shared.rearm.notify();
                return false;
            }
            Err(e) => {
                if e.kind() != io::ErrorKind::WouldBlock {
                    debug!(error = %e, "quic: udp receive failed");
                }
                shared.readable.set(false);
                shared.rearm.notify();
                return false;
            }
        }
    }
    true
}

/// Accepts a new connection attempt, or refuses it when closing or at the connection cap.
fn admit(shared: &Rc<Shared>, st: &mut EndpointState, incoming: Incoming, now: Instant) {
    let mut buf = Vec::new();
    if st.closing || st.conns.len() >= st.opts.max_connections {
        let tx = st.proto.refuse(incoming, &mut buf);
        send_or_keep(st, tx, buf);
        return;
    }
    if incoming.may_retry() && handshaking(st) >= st.opts.retry_above {
        match st.proto.retry(incoming, &mut buf) {
            Ok(tx) => {
                st.retries += 1;
                send_or_keep(st, tx, buf);
            }
            Err(e) => {
                let tx = st.proto.refuse(e.into_incoming(), &mut buf);
                send_or_keep(st, tx, buf);
            }
        }
        return;
    }
    match st.proto.accept(incoming, now, &mut buf, None) {
        Ok((handle, inner)) => {
            let conn = ConnShared::new(handle, shared.me.clone(), inner);
            st.conns.insert(handle, conn.clone());
            shared.queue_dirty(&conn);
        }
        Err(AcceptError { cause, response }) => {
            debug!(error = %cause, "quic: incoming connection failed");
            if let Some(tx) = response {
                send_or_keep(st, tx, buf);
            }
        }
    }
}

/// Connections whose handshake is not done (counted when a new peer arrives: at most
/// `max_connections`, and only while the shard is being connected to).
fn handshaking(st: &EndpointState) -> usize {
    st.conns.values().filter(|c| c.state.try_borrow().is_ok_and(|s| s.inner.is_handshaking())).count()
}

enum Progress {
    Idle,
    More,
    Blocked,
    Drained,
}

struct Driven {
    progress: Progress,
    connected: bool,
}

/// Polls one connection: events, then transmits within the budget, then its timer.
fn drive_conn(st: &mut EndpointState, conn: &Rc<ConnShared>, now: Instant, wake: &mut Vec<Waker>) -> Driven {
    let mut cs = conn.state.borrow_mut();
    let mut connected = events(st, conn, &mut cs, wake);
    let mut progress = Progress::Idle;
    let mut sent = 0;
    // The kernel refuses a GSO send above 64 KiB in total (EMSGSIZE, which quinn-udp treats
    // as loss): cap the batch by the current MTU, not only by the segment count.
    let mtu = usize::from(cs.inner.current_mtu()).max(1);
    let max_segments = st.io.max_gso_segments().min(st.opts.max_gso_segments).min(MAX_GSO_BYTES / mtu).max(1);
    loop {
        if sent >= st.opts.transmit_budget {
            progress = Progress::More;
            break;
        }
        let mut buf = std::mem::take(&mut st.tx_buf);
        buf.clear();
        let Some(meta) = cs.inner.poll_transmit(now, max_segments, &mut buf) else {
            st.tx_buf = buf;
            break;
        };
        if st.io.send(&meta, &buf).is_ok() {
            st.tx_buf = buf;
            sent += 1;
        } else {
            st.unsent.push_back(OwnedTransmit { meta, data: buf });
            progress = Progress::Blocked;
            break;
        }
    }
    connected |= events(st, conn, &mut cs, wake);
    st.timers.update(conn, cs.inner.poll_timeout());
    if cs.inner.is_drained() {
        cs.fail(quinn_proto::ConnectionError::LocallyClosed, wake);
        progress = Progress::Drained;
    }
    Driven { progress, connected }
}

/// Routes endpoint events to quinn-proto's endpoint and application events to waiting tasks.
/// Returns true if the handshake completed.
fn events(st: &mut EndpointState, conn: &ConnShared, cs: &mut super::conn::ConnState, wake: &mut Vec<Waker>) -> bool {
    let mut connected = false;
    loop {
        let mut any = false;
        while let Some(ev) = cs.inner.poll_endpoint_events() {
            any = true;
            if let Some(reply) = st.proto.handle_event(conn.handle, ev) {
                cs.inner.handle_event(reply);
            }
        }
        while let Some(ev) = cs.inner.poll() {
            any = true;
            connected |= cs.on_event(ev, wake);
        }
        if !any {
            return connected;
        }
    }
}
