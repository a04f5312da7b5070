//! QUIC transport settings and endpoint configs, for quinn (client, master)
//! and quinn-proto (worker shards) alike — both use quinn-proto's types.

use crate::config::{ByteSize, ConfigError, Dur};
use crate::error::{NetError, NetErrorKind};
use crate::tls::Identity;
use quinn_proto::crypto::rustls::{QuicClientConfig, QuicServerConfig};
use quinn_proto::{AckFrequencyConfig, EndpointConfig, IdleTimeout, MtuDiscoveryConfig, TransportConfig, VarInt};
use serde::{Deserialize, Serialize};
use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::time::Duration;

/// How long a server waits for a new connection's hello. A peer's QUIC stack keeps an idle
/// connection alive with keep-alives, so without this a connection that never says hello would
/// hold its slot for ever. A real client sends its hello right after the handshake.
pub const HELLO_WITHIN: Duration = Duration::from_secs(5);

/// Handshakes in flight at a server from which a new peer must first prove its address with
/// a QUIC Retry (one round trip more; the server keeps no state for it until then), as the
/// shards' `cv_rt::quic::EndpointOptions::retry_above`. A flood from spoofed addresses then
/// costs no handshake work; clients below it connect in one round trip.
pub const RETRY_ABOVE: usize = 64;

/// Flow-control windows, stream limits and timers of every cv connection.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TransportSettings {
    /// Per-stream receive window: how much one read may have in flight.
    pub stream_window: ByteSize,
    /// Per-connection receive window, across streams.
    pub connection_window: ByteSize,
    /// Concurrent bidirectional streams a peer may open (requests in flight).
    pub max_streams: u32,
    /// PING interval that keeps idle connections (and NAT state) alive, and lets a live peer
    /// prove it is alive while a long request runs.
    pub keep_alive: Dur,
    /// A connection silent this long is closed: how long a dead or cut-off peer (a killed
    /// worker, a crashed master) goes unnoticed, by a reader waiting on it, by the master
    /// holding the worker's control connection and by a worker waiting on its master. A
    /// live peer answers the keep-alive PINGs, so a slow request never trips it.
    pub idle_timeout: Dur,
    /// SO_RCVBUF/SO_SNDBUF of the UDP socket (quinn does not enlarge them).
    pub socket_buffer: ByteSize,
    /// Ack-eliciting packets the peer may receive before it must acknowledge (QUIC ACK
    /// frequency extension; 1 is QUIC's default, an ACK every other packet). Every ACK wakes
    /// the sender; a reply's ACK can instead ride on the next request.
    pub ack_threshold: u32,
    /// Largest UDP payload this node sends or accepts. Connections start at 1200 bytes and
    /// path-MTU discovery probes up to this, so a path with a smaller MTU (1500-byte Ethernet)
    /// settles at what it carries; probes are sent with don't-fragment. QUIC's per-packet work
    /// (headers, AEAD calls, ACKs, the receiver's datagram handling) scales with the packet
    /// count, so jumbo frames matter: see worker/ARCHITECTURE.md, "Jumbo datagrams", for the measurement.
    pub max_udp_payload: ByteSize,
}

/// A 9000-byte jumbo frame less the IPv6 and UDP headers.
const JUMBO_UDP_PAYLOAD: u64 = 8952;
/// The largest UDP payload (IPv6) and QUIC's smallest.
const UDP_PAYLOAD_RANGE: std::ops::RangeInclusive<u64> = 1200..=65527;

impl Default for TransportSettings {
    fn default() -> Self {
        TransportSettings {
            stream_window: ByteSize::mib(8),
            connection_window: ByteSize::mib(64),
            max_streams: 1024,
            // A dead peer is noticed within 1.5 s (failover's budget is 2 s), at the cost of
            // two PINGs a second per idle connection.
            keep_alive: Dur::millis(500),
            idle_timeout: Dur::millis(1500),
            socket_buffer: ByteSize::mib(4),
            ack_threshold: 64,
            max_udp_payload: ByteSize(JUMBO_UDP_PAYLOAD),
        }
    }
}

impl TransportSettings {
    /// Checks the values against each other and QUIC's limits.
    pub fn validate(&self, section: &str) -> Result<(), ConfigError> {
        let f = |name: &str| format!("{section}.{name}");
        if self.stream_window.bytes() < 64 << 10 || self.stream_window.bytes() > (1 << 30) {
            return Err(ConfigError::new(f("stream_window"), "must be between 64KiB and 1GiB"));
        }
        if self.connection_window < self.stream_window || self.connection_window.bytes() > (4 << 30) {
            return Err(ConfigError::new(f("connection_window"), "must be >= stream_window and <= 4GiB"));
        }
        if self.max_streams == 0 || self.max_streams > 1 << 16 {
            return Err(ConfigError::new(f("max_streams"), "must be between 1 and 65536"));
        }
        if self.idle_timeout.get().is_zero() || self.keep_alive >= self.idle_timeout {
            return Err(ConfigError::new(f("keep_alive"), "must be shorter than idle_timeout, which must be > 0"));
        }
        if self.socket_buffer.bytes() < 64 << 10 {
            return Err(ConfigError::new(f("socket_buffer"), "must be at least 64KiB"));
        }
        if self.ack_threshold > 1024 {
            return Err(ConfigError::new(f("ack_threshold"), "must be at most 1024"));
        }
        if !UDP_PAYLOAD_RANGE.contains(&self.max_udp_payload.bytes()) {
            return Err(ConfigError::new(f("max_udp_payload"), "must be between 1200 and 65527 bytes"));
        }
        Ok(())
    }

    /// The quinn-proto transport config these settings describe.
    pub fn transport_config(&self) -> TransportConfig {
        let mut t = TransportConfig::default();
        let var = |n: u64| VarInt::from_u64(n).unwrap_or(VarInt::MAX);
        t.stream_receive_window(var(self.stream_window.bytes()))
            .receive_window(var(self.connection_window.bytes()))
            .send_window(self.connection_window.bytes())
            .max_concurrent_bidi_streams(var(u64::from(self.max_streams)))
            .max_concurrent_uni_streams(VarInt::from_u32(0))
            .keep_alive_interval(Some(self.keep_alive.get()))
            .max_idle_timeout(IdleTimeout::try_from(self.idle_timeout.get()).ok());
        if self.ack_threshold != 1 {
            let mut ack = AckFrequencyConfig::default();
            ack.ack_eliciting_threshold(VarInt::from_u32(self.ack_threshold));
            t.ack_frequency_config(Some(ack));
        }
        let mut mtu = MtuDiscoveryConfig::default();
        mtu.upper_bound(self.udp_payload());
        t.mtu_discovery_config(Some(mtu));
        t
    }

    /// `max_udp_payload` as quinn wants it (validated to fit).
    pub fn udp_payload(&self) -> u16 {
        u16::try_from(self.max_udp_payload.bytes()).unwrap_or(u16::MAX)
    }

    /// The endpoint-wide config: the largest UDP payload this endpoint accepts (announced to
    /// peers, which send no larger).
    pub fn endpoint_config(&self) -> EndpointConfig {
        let mut cfg = EndpointConfig::default();
        // Only out-of-range values fail, and `validate` refuses those.
        let _ = cfg.max_udp_payload_size(self.udp_payload());
        cfg
    }
}

/// A quinn-proto server config with mutual TLS from `identity`.
pub fn server_config(identity: &Identity, settings: &TransportSettings) -> Result<quinn_proto::ServerConfig, NetError> {
    let crypto = QuicServerConfig::try_from(identity.server_config()?)
        .map_err(|e| NetError::new(NetErrorKind::Tls, format!("QUIC server crypto: {e}")))?;
    let mut cfg = quinn_proto::ServerConfig::with_crypto(Arc::new(crypto));
    cfg.transport_config(Arc::new(settings.transport_config()));
    Ok(cfg)
}

/// A quinn-proto client config with mutual TLS from `identity`.
pub fn client_config(identity: &Identity, settings: &TransportSettings) -> Result<quinn_proto::ClientConfig, NetError> {
    let crypto = QuicClientConfig::try_from(identity.client_config()?)
        .map_err(|e| NetError::new(NetErrorKind::Tls, format!("QUIC client crypto: {e}")))?;
    let mut cfg = quinn_proto::ClientConfig::new(Arc::new(crypto));
    cfg.transport_config(Arc::new(settings.transport_config()));
    Ok(cfg)
}

/// Binds a UDP socket with enlarged kernel buffers (set before first use,
/// so the first burst is not dropped). The kernel caps them at
/// `net.core.rmem_max`/`wmem_max`; the result is logged, not fatal.
pub fn bind_udp(addr: SocketAddr, buffer: ByteSize) -> Result<UdpSocket, NetError> {
    use socket2::{Domain, Protocol, Socket, Type};
    let io = |what: &str, e: std::io::Error| NetError::new(NetErrorKind::Io, format!("{what} {addr}")).with_source(e);
    let socket =
        Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP)).map_err(|e| io("socket", e))?;
    if addr.is_ipv6() {
        // Dual-stack when binding [::]; harmless for a specific v6 address.
        let _ = socket.set_only_v6(false);
    }
    let want = usize::try_from(buffer.bytes()).unwrap_or(usize::MAX);
    if let Err(e) = socket.set_recv_buffer_size(want) {
        tracing::warn!(%addr, error = %e, "could not set SO_RCVBUF");
    }
    if let Err(e) = socket.set_send_buffer_size(want) {
        tracing::warn!(%addr, error = %e, "could not set SO_SNDBUF");
    }
    socket.bind(&addr.into()).map_err(|e| io("bind", e))?;
    tracing::debug!(
        %addr,
        rcvbuf = socket.recv_buffer_size().unwrap_or(0),
        sndbuf = socket.send_buffer_size().unwrap_or(0),
        "udp socket bound"
    );
    Ok(socket.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_validate_and_bad_values_name_the_field() {
        TransportSettings::default().validate("transport").unwrap();
        let bad = TransportSettings { keep_alive: Dur::secs(60), ..Default::default() };
        assert_eq!(bad.validate("transport").unwrap_err().field, "transport.keep_alive");
        let bad = TransportSettings { max_streams: 0, ..Default::default() };
        assert_eq!(bad.validate("transport").unwrap_err().field, "transport.max_streams");
        let bad = TransportSettings { connection_window: ByteSize::kib(64), ..Default::default() };
        assert_eq!(bad.validate("transport").unwrap_err().field, "transport.connection_window");
        let bad = TransportSettings { ack_threshold: 5000, ..Default::default() };
        assert_eq!(bad.validate("transport").unwrap_err().field, "transport.ack_threshold");
        for bytes in [1199, 65528] {
            let bad = TransportSettings { max_udp_payload: ByteSize(bytes), ..Default::default() };
            assert_eq!(bad.validate("transport").unwrap_err().field, "transport.max_udp_payload");
        }
    }

    #[test]
    fn socket_buffers_are_enlarged() {
        let s = bind_udp("127.0.0.1:0".parse().unwrap(), ByteSize::mib(1)).unwrap();
        let s = socket2::Socket::from(s);
        // Linux doubles the requested value; anything above the 208 KiB default
        // shows the request took effect (capped by rmem_max).
        assert!(s.recv_buffer_size().unwrap() > 256 << 10);
    }
}
