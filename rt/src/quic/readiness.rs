//! "Await readable" for the endpoint's UDP socket: a one-shot poll on the shard's io_uring.

use std::io;
use std::net::UdpSocket as StdUdpSocket;
use std::os::fd::AsRawFd;
use std::rc::Rc;

/// Waits until the socket has a datagram queued, without consuming it. Holding the socket
/// keeps its fd open while a poll may refer to it.
#[derive(Debug)]
pub(crate) struct Readiness(Rc<StdUdpSocket>);

impl Readiness {
    pub(crate) fn new(socket: Rc<StdUdpSocket>) -> Self {
        Self(socket)
    }

    /// Completes when at least one datagram is queued on the socket.
    pub(crate) async fn readable(&self) -> io::Result<()> {
        crate::readable(self.0.as_raw_fd()).await
    }
}
