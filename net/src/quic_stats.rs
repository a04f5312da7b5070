//! Totals over a server's QUIC connections, for metrics: the live connections' counters are
//! read at scrape time and added to what the closed ones left behind, so nothing on the
//! request path counts anything but the streams it accepts.

use quinn_proto::ConnectionStats;

/// Counters summed over connections (closed and live).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QuicTotals {
    /// Connections open now (a gauge).
    pub connections_open: u64,
    /// Connections accepted since start.
    pub connections_total: u64,
    /// Request streams the peers opened.
    pub streams_total: u64,
    /// UDP packets sent.
    pub sent_packets: u64,
    /// Packets declared lost.
    pub lost_packets: u64,
    /// Bytes in those packets.
    pub lost_bytes: u64,
    /// Congestion events (window reductions).
    pub congestion_events: u64,
    /// QUIC Retry packets sent: handshakes were many, so new peers first proved their address.
    pub retries_total: u64,
}

impl QuicTotals {
    /// Adds one connection's transport counters (not its open/total/stream counts).
    pub fn add_conn(&mut self, s: &ConnectionStats) {
        self.sent_packets += s.path.sent_packets;
        self.lost_packets += s.path.lost_packets;
        self.lost_bytes += s.path.lost_bytes;
        self.congestion_events += s.path.congestion_events;
    }

    /// Both added field by field (e.g. the shards of one worker).
    pub fn merge(&mut self, o: &QuicTotals) {
        self.connections_open += o.connections_open;
        self.connections_total += o.connections_total;
        self.streams_total += o.streams_total;
        self.sent_packets += o.sent_packets;
        self.lost_packets += o.lost_packets;
        self.lost_bytes += o.lost_bytes;
        self.congestion_events += o.congestion_events;
        self.retries_total += o.retries_total;
    }
}
