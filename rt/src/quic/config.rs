//! Typed options of a QUIC endpoint that quinn-proto's own configs do not cover.

use std::time::Duration;

/// Socket and admission settings of one shard's endpoint.
///
/// TLS, idle timeout, keep-alive and stream limits come from the `quinn_proto::ServerConfig`
/// (and its `TransportConfig`) passed next to these options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointOptions {
    /// SO_RCVBUF and SO_SNDBUF requested before use; the kernel caps them at
    /// `net.core.{r,w}mem_max`. Default 4 MiB: the Linux default loses packets under bursts.
    pub socket_buffer_bytes: usize,
    /// Connections (handshaking or established) beyond this are refused at the first packet.
    pub max_connections: usize,
    /// Handshakes in flight from which a new peer must first prove its address (a QUIC Retry:
    /// one round trip more, no state kept for it): a flood from spoofed addresses then costs the
    /// endpoint no handshake work. Below it, clients connect in one round trip.
    pub retry_above: usize,
    /// UDP sends (GSO batches) one connection may emit before the driver lets others run.
    pub transmit_budget: usize,
    /// Datagrams per GSO send (further capped by the kernel's support and 64 KiB per send).
    pub max_gso_segments: usize,
    /// How long the driver backs off when the socket's send buffer is full.
    pub send_backoff: Duration,
    /// Largest UDP payload the endpoint accepts (announced to peers); what it sends is set
    /// by the transport config's MTU discovery. Servers set the cluster's (cv-net's
    /// `TransportSettings::udp_payload`, jumbo frames by default); the default here is what
    /// any Ethernet path carries, so cv-rt needs nothing of cv-net.
    pub max_udp_payload: u16,
}

/// A 1500-byte Ethernet frame less the IPv6 and UDP headers.
const ETHERNET_UDP_PAYLOAD: u16 = 1452;

impl Default for EndpointOptions {
    fn default() -> Self {
        Self {
            socket_buffer_bytes: 4 << 20,
            max_connections: 1024,
            retry_above: 64,
            transmit_budget: 8,
            // The 64 KiB-per-send cap binds first (7 segments of a 8952-byte jumbo datagram,
            // 44 at Ethernet's 1452): a 64 KiB reply leaves in two sends.
            max_gso_segments: 64,
            send_backoff: Duration::from_micros(50),
            max_udp_payload: ETHERNET_UDP_PAYLOAD,
        }
    }
}
