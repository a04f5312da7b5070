//! quinn's UDP socket with its GSO batches kept under the kernel's 64 KiB per send.
//!
//! quinn 0.11 builds up to 10 datagrams per `sendmsg` whatever their size. With datagrams
//! over 6.5 KB (jumbo frames, loopback) a full batch exceeds what one UDP send may carry,
//! the kernel answers `EMSGSIZE`, and quinn-udp drops the batch as if it were an MTU probe:
//! every full batch is lost. This wrapper caps the segments per send for the endpoint's
//! largest datagram; everything else is the runtime's own socket.

use quinn::udp::{RecvMeta, Transmit};
use quinn::{AsyncUdpSocket, UdpPoller};
use std::fmt;
use std::io::{self, IoSliceMut};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

/// The most UDP payload one send may carry: the IPv4 length field's 65535 less the IP
/// and UDP headers.
const MAX_SEND_BYTES: usize = 65_507;

/// Datagrams of up to `max_udp_payload` bytes that fit in one send (at least one).
pub(crate) fn segments_per_send(max_udp_payload: u16) -> usize {
    (MAX_SEND_BYTES / usize::from(max_udp_payload).max(1)).max(1)
}

/// A runtime socket whose `max_transmit_segments` respects [`MAX_SEND_BYTES`].
pub(crate) struct CappedGso {
    inner: Arc<dyn AsyncUdpSocket>,
    segments: usize,
}

impl CappedGso {
    pub(crate) fn new(inner: Arc<dyn AsyncUdpSocket>, max_udp_payload: u16) -> Arc<Self> {
        let segments = inner.max_transmit_segments().min(segments_per_send(max_udp_payload));
        Arc::new(CappedGso { inner, segments })
    }
}

impl fmt::Debug for CappedGso {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CappedGso").field("segments", &self.segments).finish_non_exhaustive()
    }
}

impl AsyncUdpSocket for CappedGso {
    fn create_io_poller(self: Arc<Self>) -> Pin<Box<dyn UdpPoller>> {
        self.inner.clone().create_io_poller()
    }

    fn try_send(&self, transmit: &Transmit) -> io::Result<()> {
        self.inner.try_send(transmit)
    }

    fn poll_recv(
        &self,
        cx: &mut Context,
        bufs: &mut [IoSliceMut<'_>],
        meta: &mut [RecvMeta],
    ) -> Poll<io::Result<usize>> {
        self.inner.poll_recv(cx, bufs, meta)
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr()
    }

    fn max_transmit_segments(&self) -> usize {
        self.segments
    }

    fn max_receive_segments(&self) -> usize {
        self.inner.max_receive_segments()
    }

    fn may_fragment(&self) -> bool {
        self.inner.may_fragment()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_batch_fits_one_send() {
        for payload in [1200u16, 1472, 8952, 9000, 32768, 65527] {
            let n = segments_per_send(payload);
            assert!(n >= 1 && (n == 1 || n * usize::from(payload) <= MAX_SEND_BYTES), "{payload}: {n}");
        }
        assert_eq!(segments_per_send(8952), 7);
        assert_eq!(segments_per_send(65527), 1);
    }
}
