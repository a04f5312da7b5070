//! cv-rt, the shard runtime: one thread, one io_uring, one run queue; and its QUIC endpoint
//! ([`quic`]: quinn-proto driven from this executor with quinn-udp). No tokio anywhere.
//!
//! A shard thread runs all its tasks (QUIC driver, request handlers, store) on this executor
//! and does all its waiting in one `io_uring_enter`: disk completions, socket readiness
//! (`IORING_OP_POLL_ADD`), the earliest timer (the wait's timeout) and wake-ups from other
//! threads (an eventfd polled on the same ring). Why not glommio, which the design started
//! with: each glommio sleep and wake-up cost ~17 `io_uring_enter` calls and a `membarrier`
//! IPI per request (three rings, preemption timers re-armed every turn); see
//! worker/ARCHITECTURE.md, "Shard runtime", and worker/MEASUREMENTS.md for the measurements.
//!
//! Tasks are `async-task` tasks (not `Send`; they never leave the thread). Their wakers are
//! `Send`: a waker used on another thread (the fetch pool, a control-plane channel) pushes
//! the task on the queue and, if the shard sleeps, writes the eventfd. The shard announces
//! sleeping with a swap before its last look at the queue, and a remote waker swaps it back
//! after pushing, so one of the two always sees the other: no wake-up is lost.

mod buf;
pub mod fs;
mod gate;
mod lock;
pub mod quic;
mod ring;
pub mod shared;
mod sys;
mod timer;

use std::cell::RefCell;
use std::collections::VecDeque;
use std::fs::File;
use std::future::Future;
use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

pub use async_task::Task;
pub use buf::{AlignedBuf, BUF_ALIGN};
pub use gate::{Gate, GateClosed};
pub use lock::{Mutex as AsyncMutex, MutexGuard as AsyncMutexGuard};
pub use timer::{Elapsed, Sleep, timeout};

use ring::Ring;
use timer::Timers;

/// Tasks run before the runtime looks at its ring again.
const RUN_BUDGET: usize = 64;

/// How a runtime is built.
#[derive(Debug, Clone)]
pub struct RuntimeConfig {
    /// Thread to pin to; `None` leaves it unbound.
    pub cpu: Option<usize>,
    /// io_uring submission queue entries.
    pub ring_entries: u32,
    /// How long an idle runtime keeps checking for work before it sleeps.
    pub spin_before_park: Duration,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        RuntimeConfig { cpu: None, ring_entries: 128, spin_before_park: Duration::ZERO }
    }
}

/// Runnable tasks, shared with every waker (which may live on other threads).
struct Queue {
    tasks: Mutex<VecDeque<async_task::Runnable>>,
    sleeping: AtomicBool,
    efd: File,
}

impl Queue {
    fn push(&self, r: async_task::Runnable) {
        self.tasks.lock().unwrap_or_else(PoisonError::into_inner).push_back(r);
        if self.sleeping.swap(false, Ordering::SeqCst) {
            // Nothing useful to do if it fails: the counter is saturated, so a wake-up is due.
            let _ = (&self.efd).write(&1u64.to_ne_bytes());
        }
    }

    fn pop(&self) -> Option<async_task::Runnable> {
        self.tasks.lock().unwrap_or_else(PoisonError::into_inner).pop_front()
    }

    fn is_empty(&self) -> bool {
        self.tasks.lock().unwrap_or_else(PoisonError::into_inner).is_empty()
    }
}

struct Local {
    ring: RefCell<Ring>,
    timers: RefCell<Timers>,
    queue: Arc<Queue>,
    spin_before_park: Duration,
}

thread_local! {
    static CURRENT: RefCell<Option<Rc<Local>>> = const { RefCell::new(None) };
}

fn current() -> Option<Rc<Local>> {
    CURRENT.try_with(|c| c.borrow().clone()).ok().flatten()
}

fn local() -> Rc<Local> {
    current().expect("not on a cv shard runtime thread (cv_rt::Runtime::block_on)")
}

pub(crate) fn with_ring<R>(f: impl FnOnce(&mut Ring) -> R) -> R {
    f(&mut local().ring.borrow_mut())
}

pub(crate) fn try_with_ring<R>(f: impl FnOnce(&mut Ring) -> R) -> Option<R> {
    let l = current()?;
    let mut ring = l.ring.try_borrow_mut().ok()?;
    Some(f(&mut ring))
}

fn with_timers<R>(f: impl FnOnce(&mut Timers) -> R) -> R {
    f(&mut local().timers.borrow_mut())
}

fn try_with_timers<R>(f: impl FnOnce(&mut Timers) -> R) -> Option<R> {
    let l = current()?;
    let mut t = l.timers.try_borrow_mut().ok()?;
    Some(f(&mut t))
}

/// One shard's executor. Not `Send`: it lives and dies on the thread that made it.
pub struct Runtime {
    local: Rc<Local>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime").finish_non_exhaustive()
    }
}

impl Runtime {
    /// Builds the runtime on the calling thread (and pins the thread if asked).
    pub fn new(cfg: RuntimeConfig) -> io::Result<Runtime> {
        if let Some(cpu) = cfg.cpu {
            sys::pin_to_cpu(cpu)?;
        }
        let ring = Ring::new(cfg.ring_entries.max(8))?;
        let queue = Arc::new(Queue {
            tasks: Mutex::new(VecDeque::new()),
            sleeping: AtomicBool::new(false),
            efd: sys::eventfd()?,
        });
        let local = Rc::new(Local {
            ring: RefCell::new(ring),
            timers: RefCell::new(Timers::default()),
            queue,
            spin_before_park: cfg.spin_before_park,
        });
        Ok(Runtime { local })
    }

    /// Runs `fut` and every task it spawns until `fut` completes. Tasks still pending then
    /// are dropped with the runtime.
    pub fn block_on<F: Future>(&self, fut: F) -> F::Output {
        let _enter = Enter::new(&self.local);
        let mut fut = std::pin::pin!(fut);
        let main = Arc::new(MainWaker { woken: AtomicBool::new(true), queue: self.local.queue.clone() });
        let waker = std::task::Waker::from(main.clone());
        let q = &self.local.queue;
        let mut wake = Vec::new();
        loop {
            if main.woken.swap(false, Ordering::SeqCst)
                && let Poll::Ready(v) = fut.as_mut().poll(&mut Context::from_waker(&waker))
            {
                return v;
            }
            for _ in 0..RUN_BUDGET {
                match q.pop() {
                    Some(r) => {
                        r.run();
                    }
                    None => break,
                }
            }
            self.collect(&mut wake);
            if !q.is_empty() || main.woken.load(Ordering::SeqCst) {
                continue;
            }
            if !self.local.spin_before_park.is_zero() && self.spin(&main, &mut wake) {
                continue;
            }
            self.park(&main, &mut wake);
        }
    }

    /// Submits the turn's file operations, then collects completions and due timers: wakes
    /// their tasks.
    fn collect(&self, wake: &mut Vec<std::task::Waker>) {
        let fired = {
            let mut ring = self.local.ring.borrow_mut();
            ring.flush();
            ring.reap(wake)
        };
        if fired {
            // Reset the counter so that the next poll waits for a new write.
            let _ = (&self.local.queue.efd).read(&mut [0u8; 8]);
        }
        self.local.timers.borrow_mut().fire(Instant::now(), wake);
        wake.drain(..).for_each(std::task::Waker::wake);
    }

    /// Polls for work for up to `spin_before_park`; true if some arrived.
    fn spin(&self, main: &MainWaker, wake: &mut Vec<std::task::Waker>) -> bool {
        let until = Instant::now() + self.local.spin_before_park;
        while Instant::now() < until {
            self.collect(wake);
            if !self.local.queue.is_empty() || main.woken.load(Ordering::SeqCst) {
                return true;
            }
            std::hint::spin_loop();
        }
        false
    }

    fn park(&self, main: &MainWaker, wake: &mut Vec<std::task::Waker>) {
        let q = &self.local.queue;
        if let Err(e) = self.local.ring.borrow_mut().arm_wake(q.efd.as_raw_fd()) {
            tracing::warn!(error = %e, "arming the runtime's wake-up poll failed");
        }
        // See the module comment: swap, then the last look at the queue.
        q.sleeping.swap(true, Ordering::SeqCst);
        if q.is_empty() && !main.woken.load(Ordering::SeqCst) {
            let timeout = self.local.timers.borrow().next().map(|t| t.saturating_duration_since(Instant::now()));
            if let Err(e) = self.local.ring.borrow_mut().wait(timeout) {
                tracing::warn!(error = %e, "io_uring wait failed");
            }
        }
        q.sleeping.store(false, Ordering::SeqCst);
        self.collect(wake);
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        let _enter = Enter::new(&self.local);
        // Drop queued tasks (their futures drop here, on their thread), then whatever the
        // timers and the ring still hold; each step may queue tasks again.
        let drop_queued = || while self.local.queue.pop().is_some() {};
        drop_queued();
        drop(self.local.timers.borrow_mut().clear());
        drop_queued();
        self.local.ring.borrow_mut().drain();
        drop_queued();
    }
}

/// The waker of `block_on`'s own future, which is polled in place rather than spawned (so it
/// may borrow from the caller). Waking it from another thread wakes a sleeping runtime.
struct MainWaker {
    woken: AtomicBool,
    queue: Arc<Queue>,
}

impl std::task::Wake for MainWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::SeqCst);
        if self.queue.sleeping.swap(false, Ordering::SeqCst) {
            let _ = (&self.queue.efd).write(&1u64.to_ne_bytes());
        }
    }
}

/// Makes a runtime current on this thread for a scope.
struct Enter {
    prev: Option<Rc<Local>>,
}

impl Enter {
    fn new(l: &Rc<Local>) -> Enter {
        let prev = CURRENT.with(|c| c.borrow_mut().replace(l.clone()));
        Enter { prev }
    }
}

impl Drop for Enter {
    fn drop(&mut self) {
        let prev = self.prev.take();
        let _ = CURRENT.try_with(|c| *c.borrow_mut() = prev);
    }
}

/// Spawns a task on the current runtime. Dropping the returned [`Task`] cancels it;
/// `detach()` lets it run on its own.
///
/// # Panics
/// Outside a runtime.
pub fn spawn_local<F>(fut: F) -> Task<F::Output>
where
    F: Future + 'static,
    F::Output: 'static,
{
    let queue = local().queue.clone();
    let (runnable, task) = async_task::spawn_local(fut, move |r| queue.push(r));
    runnable.schedule();
    task
}

/// Lets every other runnable task run once before continuing.
pub async fn yield_now() {
    let mut yielded = false;
    std::future::poll_fn(|cx| {
        if yielded {
            return Poll::Ready(());
        }
        yielded = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    })
    .await
}

/// Completes after `d`.
pub fn sleep(d: Duration) -> Sleep {
    Sleep::new(d)
}

/// Completes when `fd` has data to read (or an error or hang-up to report).
pub(crate) async fn readable(fd: std::os::fd::RawFd) -> io::Result<()> {
    let op = with_ring(|r| r.poll_readable(fd));
    op.await.0.map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    fn rt() -> Runtime {
        Runtime::new(RuntimeConfig::default()).unwrap()
    }

    #[test]
    fn tasks_timers_and_yields_run() {
        let out = rt().block_on(async {
            let hits = Rc::new(Cell::new(0));
            let h = hits.clone();
            let t = spawn_local(async move {
                sleep(Duration::from_millis(5)).await;
                h.set(h.get() + 1);
                7
            });
            yield_now().await;
            let t0 = Instant::now();
            let v = t.await;
            assert!(t0.elapsed() >= Duration::from_millis(3));
            assert_eq!(timeout(Duration::from_millis(5), std::future::pending::<()>()).await, Err(Elapsed));
            assert_eq!(timeout(Duration::from_secs(5), async { 3 }).await, Ok(3));
            v + hits.get()
        });
        assert_eq!(out, 8);
    }

    #[test]
    fn a_waker_from_another_thread_wakes_a_sleeping_runtime() {
        let r = rt();
        for _ in 0..200 {
            let (tx, rx) = flume::bounded::<u32>(1);
            let th = std::thread::spawn(move || {
                std::thread::sleep(Duration::from_micros(50));
                tx.send(5).unwrap();
            });
            let got = r.block_on(async move { rx.recv_async().await.unwrap() });
            assert_eq!(got, 5);
            th.join().unwrap();
        }
    }

    #[test]
    fn a_dropped_task_is_cancelled() {
        rt().block_on(async {
            let flag = Rc::new(Cell::new(false));
            let f = flag.clone();
            let t = spawn_local(async move {
                sleep(Duration::from_millis(20)).await;
                f.set(true);
            });
            yield_now().await;
            drop(t);
            sleep(Duration::from_millis(40)).await;
            assert!(!flag.get());
        });
    }

    #[test]
    fn wakes_racing_the_park_are_never_lost() {
        // The other thread wakes as soon as it can, so some wakes land between the runtime's
        // last look at its queue and its sleep: each must still end the sleep.
        let r = rt();
        let (tx, rx) = flume::unbounded::<u32>();
        let (back_tx, back_rx) = flume::unbounded::<u32>();
        let th = std::thread::spawn(move || {
            for i in 0..5000 {
                tx.send(i).unwrap();
                assert_eq!(back_rx.recv_timeout(Duration::from_secs(5)), Ok(i), "runtime stalled");
            }
        });
        r.block_on(async move {
            for i in 0..5000 {
                assert_eq!(rx.recv_async().await.unwrap(), i);
                back_tx.send(i).unwrap();
            }
        });
        th.join().unwrap();
    }

    #[test]
    fn a_dropped_poll_is_cancelled_and_the_runtime_ends() {
        let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let fd = sock.as_raw_fd();
        let r = rt();
        r.block_on(async move {
            // Never readable: the task waits until it is dropped, which cancels its poll.
            let t = spawn_local(async move { readable(fd).await });
            sleep(Duration::from_millis(5)).await;
            drop(t);
            sleep(Duration::from_millis(5)).await;
            assert_eq!(local().ring.borrow().in_flight(), 0, "the cancelled poll completed");
            // And one left waiting when block_on returns is cancelled when the runtime drops.
            spawn_local(async move { readable(fd).await }).detach();
            yield_now().await;
        });
        let t0 = Instant::now();
        drop(r);
        assert!(t0.elapsed() < Duration::from_secs(1));
        drop(sock);
    }

    #[test]
    fn file_ops_made_in_one_turn_are_submitted_together() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let data: Vec<u8> = (0..16 * 4096u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&path, &data).unwrap();
        rt().block_on(async move {
            let file = Rc::new(fs::RingFile::new(std::fs::File::open(&path).unwrap()));
            let before = local().ring.borrow().submits;
            let reads: Vec<_> = (0..16u64)
                .map(|i| {
                    let f = file.clone();
                    spawn_local(async move {
                        let (n, buf) = f.read_at(buf::AlignedBuf::with_capacity(4096), 4096, i * 4096).await;
                        (n.unwrap(), buf.as_ref()[..4096].to_vec())
                    })
                })
                .collect();
            for (i, t) in reads.into_iter().enumerate() {
                let (n, got) = t.await;
                assert_eq!((n, &got[..]), (4096, &data[i * 4096..(i + 1) * 4096]));
            }
            let submits = local().ring.borrow().submits - before;
            assert!(submits <= 2, "16 reads made in one turn took {submits} submits");
            // A file dropped while its read is still queued: submitted first, then closed.
            let f = fs::RingFile::new(std::fs::File::open(&path).unwrap());
            let mut read = Box::pin(f.read_at(buf::AlignedBuf::with_capacity(4096), 4096, 4096));
            assert!(futures_poll_once(read.as_mut()).is_pending());
            drop(read);
            drop(f);
            sleep(Duration::from_millis(5)).await;
            assert_eq!(local().ring.borrow().in_flight(), 0, "the read completed (or was cancelled) after all");
        });
    }

    #[test]
    fn a_read_into_the_middle_of_a_buffer_leaves_its_start_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let data: Vec<u8> = (0..4 * 4096u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&path, &data).unwrap();
        let f = fs::RingFile::new(std::fs::File::open(&path).unwrap());
        let mut waiting = buf::AlignedBuf::with_capacity(2 * 4096);
        waiting.as_mut_slice()[..4096].fill(7);
        // Asked past the buffer's end: cut to it. Outside any runtime, on the thread's ring.
        let (n, waiting) = f.read_into_waiting(waiting, 4096, 4 * 4096, 4096).unwrap();
        assert_eq!(n, 4096);
        assert!(waiting.as_ref()[..4096].iter().all(|&b| b == 7));
        assert_eq!(&waiting.as_ref()[4096..], &data[4096..2 * 4096]);
        // Again on the same ring; and a read past the end of the file reads nothing.
        let (n, _) = f.read_into_waiting(buf::AlignedBuf::with_capacity(4096), 0, 4096, 3 * 4096).unwrap();
        assert_eq!(n, 4096);
        let (n, _) = f.read_into_waiting(buf::AlignedBuf::with_capacity(4096), 0, 4096, 9 * 4096).unwrap();
        assert_eq!(n, 0);
        rt().block_on(async move {
            let mut b = buf::AlignedBuf::with_capacity(4 * 4096);
            b.as_mut_slice()[..4096].fill(7);
            let (n, b) = f.read_into(b, 4096, 2 * 4096, 2 * 4096).await;
            assert_eq!(n.unwrap(), 2 * 4096);
            assert!(b.as_ref()[..4096].iter().all(|&b| b == 7));
            assert_eq!(&b.as_ref()[4096..3 * 4096], &data[2 * 4096..]);
        });
    }

    /// Polls `fut` once with a waker that does nothing.
    fn futures_poll_once<F: Future>(fut: std::pin::Pin<&mut F>) -> Poll<F::Output> {
        fut.poll(&mut Context::from_waker(std::task::Waker::noop()))
    }

    #[test]
    fn a_readable_socket_completes_its_poll() {
        let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let addr = sock.local_addr().unwrap();
        let fd = sock.as_raw_fd();
        rt().block_on(async move {
            let waiting = spawn_local(async move { readable(fd).await });
            sleep(Duration::from_millis(2)).await;
            std::net::UdpSocket::bind("127.0.0.1:0").unwrap().send_to(b"x", addr).unwrap();
            timeout(Duration::from_secs(5), waiting).await.expect("poll completed").unwrap();
        });
    }
}
