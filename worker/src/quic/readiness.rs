//! "Await readable" for a UDP socket glommio does not own.
//!
//! glommio 0.9 has no public readiness API for foreign fds. We duplicate the socket's fd, hand
//! the duplicate to glommio's `UdpSocket` and await a 1-byte `MSG_PEEK`: it completes once a
//! datagram is queued, and leaves the datagram for quinn-udp's batched (GRO) receive.
#![allow(unsafe_code)]

use std::io;
use std::net::UdpSocket as StdUdpSocket;
use std::os::fd::{FromRawFd, IntoRawFd};

/// Waits until the socket has a datagram queued, without consuming it.
#[derive(Debug)]
pub(crate) struct Readiness {
    dup: glommio::net::UdpSocket,
}

impl Readiness {
    /// Must be called on a glommio executor thread.
    pub(crate) fn new(socket: &StdUdpSocket) -> io::Result<Self> {
        // `try_clone` is dup(2) with CLOEXEC: the duplicate is a fresh fd we own.
        let fd = socket.try_clone()?.into_raw_fd();
        // SAFETY: `fd` was just produced by `into_raw_fd` on an owned, open UDP socket, so it is
        // valid, not owned by anything else, and glommio's socket takes sole ownership (closing
        // it on drop). It shares the file description with `socket`, which stays open.
        let dup = unsafe { glommio::net::UdpSocket::from_raw_fd(fd) };
        Ok(Self { dup })
    }

    /// Completes when at least one datagram is queued on the socket.
    pub(crate) async fn readable(&self) -> io::Result<()> {
        let mut scratch = [0u8; 1];
        match self.dup.peek_from(&mut scratch).await {
            Ok(_) => Ok(()),
            Err(e) => Err(io::Error::other(e.to_string())),
        }
    }
}
