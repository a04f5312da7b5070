//! cv wire protocol: the frame format, the message catalogue and the error codes.
//!
//! This crate has no async runtime and does no I/O: it turns messages into bytes
//! and validated bytes back into messages. Transports (tokio/quinn in the client
//! and master, quinn-proto on the shard runtime in the worker) move the bytes.
//!
//! A frame is a fixed 32-byte [`FrameHeader`], an rkyv-archived body and an
//! optional raw payload (block bytes, tails) that travels outside rkyv so it can
//! go from an aligned disk buffer to the socket without a copy. The layout is
//! written down byte by byte in `wire/FORMAT.md`.
//!
//! Network bytes are only ever read through [`Frame::access`], which validates
//! the archive with rkyv's checked access and then checks semantic limits. Receivers
//! parse a frame's header once, into an [`Inbound`], and build the [`Frame`] from it.

mod codes;
mod error;
pub mod footer;
mod frame;
pub mod hello;
mod ids;
mod inbound;
mod kinds;
mod limits;
pub mod msg;

pub use codes::ErrorCode;
pub use error::{WireError, WireErrorKind};
pub use frame::{
    EncodedFrame, Flags, Frame, FrameCheck, FrameHeader, HEADER_LEN, MAGIC, TRAILER_LEN, encode, encode_streamed,
    encode_with, encode_with_crc, trailer,
};
pub use ids::{SHARD_BITS, block_id, block_seq, block_shard, first_free_seq};
pub use inbound::{Held, Inbound, RequestBudget};
pub use kinds::{Kind, Message};
pub use limits::Limits;

/// The protocol version this build speaks. Frames carrying any other version
/// are refused with [`WireErrorKind::UnsupportedVersion`] (save `Error` frames, whose
/// layout is frozen: [`hello`]).
pub const PROTOCOL_VERSION: u16 = 9;

/// The oldest protocol version a peer of this build may speak (the compatibility window,
/// `wire/FORMAT.md`, "Compatibility"). Version 9 carries block capabilities, which a peer of
/// version 8 has no way to present, so the window holds only [`PROTOCOL_VERSION`].
pub const OLDEST_PEER_VERSION: u16 = 9;

/// ALPN token negotiated by every cv QUIC connection.
pub const ALPN: &[u8] = b"cv/1";

/// The rkyv version frames are archived with, for callers that read archived
/// views (`AlignedVec`, `deserialize`).
pub use rkyv;
