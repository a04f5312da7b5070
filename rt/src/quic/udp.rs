//! The endpoint's UDP socket: setup, batched receive (GRO) and send (GSO) via quinn-udp.

use std::io::{self, IoSliceMut};
use std::net::{IpAddr, SocketAddr, UdpSocket};

use bytes::BytesMut;

use quinn_udp::{RecvMeta, UdpSockRef, UdpSocketState};
use socket2::{Domain, Protocol, Socket, Type};

/// Creates a non-blocking UDP socket with enlarged buffers, bound to `addr`.
///
/// No SO_REUSEPORT: a second shard or process binding the same port must fail, not share it.
pub(crate) fn bind(addr: SocketAddr, buffer_bytes: usize) -> io::Result<UdpSocket> {
    let sock = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    // Best effort: the kernel caps the size, and a smaller buffer still works.
    let _ = sock.set_recv_buffer_size(buffer_bytes);
    let _ = sock.set_send_buffer_size(buffer_bytes);
    sock.bind(&addr.into())?;
    sock.set_nonblocking(true)?;
    Ok(sock.into())
}

/// One received datagram, ready for `quinn_proto::Endpoint::handle`.
#[derive(Debug)]
pub(crate) struct Datagram {
    pub(crate) remote: SocketAddr,
    pub(crate) local_ip: Option<IpAddr>,
    pub(crate) ecn: Option<quinn_proto::EcnCodepoint>,
    pub(crate) data: BytesMut,
}

/// One outgoing UDP payload (possibly several GSO segments) that has not been sent yet.
#[derive(Debug)]
pub(crate) struct OwnedTransmit {
    pub(crate) meta: quinn_proto::Transmit,
    pub(crate) data: Vec<u8>,
}

/// The largest datagram GRO hands over (coalesced segments stay within one 64 KiB skb).
const MAX_GRO_BYTES: usize = 64 * 1024;

/// The socket plus quinn-udp's state and receive buffers.
#[derive(Debug)]
pub(crate) struct UdpIo {
    socket: std::rc::Rc<UdpSocket>,
    state: UdpSocketState,
    recv_buf: Vec<u8>,
    slot: usize,
    metas: Vec<RecvMeta>,
}

impl UdpIo {
    pub(crate) fn new(socket: std::rc::Rc<UdpSocket>, max_udp_payload: usize) -> io::Result<Self> {
        let state = UdpSocketState::new(UdpSockRef::from(&*socket))?;
        // One slot holds one GRO super-datagram, which the kernel keeps within 64 KiB.
        let slot = (max_udp_payload * state.gro_segments().max(1)).min(MAX_GRO_BYTES).max(max_udp_payload);
        Ok(Self {
            socket,
            state,
            recv_buf: vec![0; slot * quinn_udp::BATCH_SIZE],
            slot,
            metas: vec![RecvMeta::default(); quinn_udp::BATCH_SIZE],
        })
    }

    pub(crate) fn local_addr(&self) -> io::Result<SocketAddr> {
        self.socket.local_addr()
    }

    pub(crate) fn max_gso_segments(&self) -> usize {
        self.state.max_gso_segments().max(1)
    }

    pub(crate) fn may_fragment(&self) -> bool {
        self.state.may_fragment()
    }

    /// One batched receive into `out` (GRO batches split by stride, one copy per batch).
    /// Returns whether the batch was full (more may be queued); `Err(WouldBlock)` when the
    /// socket is empty. A short batch means the socket was drained: recvmmsg takes all it can.
    pub(crate) fn recv_batch(&mut self, out: &mut Vec<Datagram>) -> io::Result<bool> {
        let mut iovs: Vec<IoSliceMut<'_>> = self.recv_buf.chunks_mut(self.slot).map(IoSliceMut::new).collect();
        let n = self.state.recv(UdpSockRef::from(&*self.socket), &mut iovs, &mut self.metas)?;
        let full = n >= iovs.len();
        for (meta, iov) in self.metas.iter().zip(iovs.iter()).take(n) {
            let stride = meta.stride.max(1);
            let mut data = BytesMut::from(&iov[..meta.len]);
            let ecn = meta.ecn.and_then(|e| quinn_proto::EcnCodepoint::from_bits(e as u8));
            while !data.is_empty() {
                let take = stride.min(data.len());
                out.push(Datagram { remote: meta.addr, local_ip: meta.dst_ip, ecn, data: data.split_to(take) });
            }
        }
        Ok(full)
    }

    /// Sends one transmit; only `WouldBlock` is reported (other send errors are logged by
    /// quinn-udp and treated as packet loss, which QUIC recovers from).
    pub(crate) fn send(&self, meta: &quinn_proto::Transmit, data: &[u8]) -> io::Result<()> {
        let tx = quinn_udp::Transmit {
            destination: meta.destination,
            ecn: meta.ecn.and_then(|e| quinn_udp::EcnCodepoint::from_bits(e as u8)),
            contents: &data[..meta.size],
            segment_size: meta.segment_size,
            src_ip: meta.src_ip,
        };
        self.state.send(UdpSockRef::from(&*self.socket), &tx)
    }
}
