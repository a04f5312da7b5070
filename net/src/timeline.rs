//! Per-request timeline marks: `trace`-level `tracing` events under one target, which
//! `cvctl bench read --timeline` collects to show where a block read's time goes (to the
//! shard, at the shard, back to the first byte, the rest of the transfer).
//!
//! Every mark carries `stage` (one of the constants below), `port` (the shard's UDP port)
//! and `req` (the request id on that connection): port and id name one request while the
//! client keeps its connections. Without a subscriber interested in `trace` (the default
//! logging filter is `warn`), a mark costs one level check.

/// The `tracing` target of every mark.
pub const TARGET: &str = "cv_timeline";
/// Client: the request is about to be sent.
pub const ISSUE: &str = "issue";
/// Shard: the request's frame has been read.
pub const ARRIVED: &str = "arrived";
/// Shard: the reply is ready to send (for a read of a stored block, its disk read is done).
pub const READY: &str = "ready";
/// Client: the reply's frame header has arrived.
pub const FIRST: &str = "first";
/// Client: the whole reply has arrived and passed its check.
pub const DONE: &str = "done";

/// Records the mark `stage` of request `req` on the shard at `port`. The arguments are
/// evaluated only when a subscriber records the mark.
#[macro_export]
macro_rules! timeline_mark {
    ($stage:expr, $port:expr, $req:expr) => {
        ::tracing::trace!(target: $crate::timeline::TARGET, stage = $stage, port = $port, req = $req)
    };
}
