//! A thread owning its own tokio runtime, running one future until told to stop; and the accept loop the
//! server and the proxy share.

use std::future::Future;
use std::io;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;

#[derive(Debug)]
pub(crate) struct RtThread {
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl RtThread {
    /// Starts a thread with a multi-thread runtime of `workers` workers. `make` runs on that thread inside the
    /// runtime's context (so it may register sockets with it); its error is returned from here. The future it
    /// returns runs until it ends; it should end soon after its stop receiver fires.
    pub(crate) fn spawn<M, F>(name: &str, workers: usize, make: M) -> io::Result<RtThread>
    where
        M: FnOnce(oneshot::Receiver<()>) -> io::Result<F> + Send + 'static,
        F: Future<Output = ()> + 'static,
    {
        let (stop_tx, stop_rx) = oneshot::channel();
        let (ready_tx, ready_rx) = mpsc::sync_channel::<io::Result<()>>(1);
        let rt_name = name.to_owned();
        let thread = std::thread::Builder::new().name(name.to_owned()).spawn(move || {
            let rt = match tokio::runtime::Builder::new_multi_thread()
                .worker_threads(workers)
                .thread_name(rt_name)
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    let _ = ready_tx.send(Err(e));
                    return;
                }
            };
            let fut = {
                let _enter = rt.enter();
                make(stop_rx)
            };
            match fut {
                Ok(fut) => {
                    let _ = ready_tx.send(Ok(()));
                    rt.block_on(fut);
                }
                Err(e) => {
                    let _ = ready_tx.send(Err(e));
                }
            }
            // Connection tasks still running are dropped here; blocking file I/O gets a moment to finish.
            rt.shutdown_timeout(Duration::from_secs(2));
        })?;
        let mut me = RtThread { stop: Some(stop_tx), thread: Some(thread) };
        match ready_rx.recv() {
            Ok(Ok(())) => Ok(me),
            Ok(Err(e)) => {
                me.stop();
                Err(e)
            }
            Err(_) => {
                me.stop();
                Err(io::Error::other("cv-testkit: runtime thread ended before starting"))
            }
        }
    }

    /// Tells the future to stop and joins the thread. Idempotent.
    pub(crate) fn stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for RtThread {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Accepts until `stop` fires (or its sender is dropped), sets TCP_NODELAY on every accepted socket (without
/// it, small request/response exchanges stall ~40 ms on Nagle + delayed ACK) and spawns `handle` for it.
pub(crate) async fn accept_loop<H, F>(listener: TcpListener, mut stop: oneshot::Receiver<()>, handle: H)
where
    H: Fn(TcpStream) -> F,
    F: Future<Output = ()> + Send + 'static,
{
    loop {
        tokio::select! {
            _ = &mut stop => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let _ = stream.set_nodelay(true);
                    tokio::spawn(handle(stream));
                }
                // E.g. out of file descriptors: back off instead of spinning.
                Err(_) => tokio::time::sleep(Duration::from_millis(5)).await,
            },
        }
    }
}

/// A loopback listener on a random port, non-blocking, ready for `TcpListener::from_std`.
pub(crate) fn bind_loopback() -> io::Result<std::net::TcpListener> {
    bind_at(std::net::Ipv4Addr::LOCALHOST.into())
}

/// A non-blocking listener on `ip`, random port.
pub(crate) fn bind_at(ip: std::net::IpAddr) -> io::Result<std::net::TcpListener> {
    let listener = std::net::TcpListener::bind((ip, 0))?;
    listener.set_nonblocking(true)?;
    Ok(listener)
}
