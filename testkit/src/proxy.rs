//! [`DelayProxy`]: a TCP proxy that holds every chunk a fixed time in each direction, to give a loopback
//! object store the round-trip time of a remote one (this kernel has no netem).

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::rt::{RtThread, accept_loop, bind_loopback};

/// Bytes read at a time from either side.
const READ_BUF: usize = 64 << 10;
/// Chunks in flight per direction before the reader waits (bounds memory when the far side is slow).
const QUEUE: usize = 1024;

/// A TCP proxy on 127.0.0.1 (random port) in front of `target` that holds every chunk `one_way` in each
/// direction (so each round trip costs `2 * one_way` more), keeping order per connection. Chunks are
/// pipelined: the delay is latency, not a bandwidth cap. Connecting is not delayed (the proxy accepts at
/// once and connects to the target at once); the first bytes are. Timer granularity is tokio's, 1 ms
/// (delays are rounded up). Own thread and runtime; stops on [`DelayProxy::shutdown`] or drop.
#[derive(Debug)]
pub struct DelayProxy {
    addr: SocketAddr,
    rt: RtThread,
}

impl DelayProxy {
    pub fn start(target: SocketAddr, one_way: Duration) -> io::Result<DelayProxy> {
        let listener = bind_loopback()?;
        let addr = listener.local_addr()?;
        let rt = RtThread::spawn("cv-testkit-proxy", 2, move |stop| {
            let listener = TcpListener::from_std(listener)?;
            Ok(accept_loop(listener, stop, move |client| proxy_connection(client, target, one_way)))
        })?;
        Ok(DelayProxy { addr, rt })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Stops accepting, drops open connections and joins the proxy thread (also done on drop).
    pub fn shutdown(mut self) {
        self.rt.stop();
    }
}

async fn proxy_connection(client: TcpStream, target: SocketAddr, one_way: Duration) {
    let Ok(server) = TcpStream::connect(target).await else { return };
    let _ = server.set_nodelay(true);
    let (client_rd, client_wr) = client.into_split();
    let (server_rd, server_wr) = server.into_split();
    let up = pipe(client_rd, server_wr, one_way);
    let down = pipe(server_rd, client_wr, one_way);
    tokio::pin!(up, down);
    // A clean end (EOF passed on) of one direction leaves the other running (half-close); an error in
    // either ends the connection.
    tokio::select! {
        r = &mut up => if r.is_ok() { let _ = (&mut down).await; },
        r = &mut down => if r.is_ok() { let _ = (&mut up).await; },
    }
}

/// Copies `from` to `to`, each chunk (and the final EOF) written `one_way` after it was read.
async fn pipe(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, one_way: Duration) -> io::Result<()> {
    let (tx, mut rx) = mpsc::channel::<(Instant, Option<Vec<u8>>)>(QUEUE);
    let reader = async move {
        let mut buf = vec![0u8; READ_BUF];
        loop {
            let n = from.read(&mut buf).await?;
            let chunk = (n > 0).then(|| buf[..n].to_vec());
            if tx.send((Instant::now() + one_way, chunk)).await.is_err() {
                return Err(io::Error::from(io::ErrorKind::BrokenPipe));
            }
            if n == 0 {
                return Ok(());
            }
        }
    };
    let writer = async move {
        while let Some((due, chunk)) = rx.recv().await {
            tokio::time::sleep_until(due).await;
            match chunk {
                Some(chunk) => to.write_all(&chunk).await?,
                None => return to.shutdown().await,
            }
        }
        Err(io::Error::from(io::ErrorKind::BrokenPipe))
    };
    tokio::try_join!(reader, writer).map(|_| ())
}
