//! "Await readable" for the endpoint's UDP socket: a one-shot poll on the shard's io_uring.

use std::io;
use std::net::UdpSocket as StdUdpSocket;
use std::os::fd::{AsRawFd, RawFd};
use std::rc::Rc;

/// Waits until the socket has a datagram queued, without consuming it.
#[derive(Debug)]
pub(crate) struct Readiness {
    /// Keeps the socket open while a poll may reference its fd.
    socket: Rc<StdUdpSocket>,
    fd: RawFd,
}

impl Readiness {
    pub(crate) fn new(socket: Rc<StdUdpSocket>) -> Self {
        let fd = socket.as_raw_fd();
        Self { socket, fd }
    }

    /// Completes when at least one datagram is queued on the socket.
    pub(crate) async fn readable(&self) -> io::Result<()> {
        debug_assert_eq!(self.socket.as_raw_fd(), self.fd);
        crate::rt::readable(self.fd).await
    }
}
