//! Reading request frames from a shard's QUIC stream through cv-wire's sans-I/O pieces (as
//! cv-net's rpc servers do): the header first, parsed once and checked against the limits
//! before anything is allocated, then the body; the payload is read whole or, for block
//! writes, streamed by the handler.

use std::fmt;

use cv_wire::{ErrorCode, Frame, HEADER_LEN, Inbound, Limits, WireError};

use cv_rt::quic::{ErrorKind as QuicErrorKind, QuicError, RecvStream};

/// Why a request frame could not be read.
#[derive(Debug)]
pub(crate) enum ReadFail {
    /// The stream or connection is gone; nobody is left to answer.
    Gone(QuicError),
    /// The bytes are not a valid frame (header, limits, checksum, archive), or the
    /// connection's request budget is full (`Busy`, answered `Unavailable`).
    Wire(WireError),
    /// The stream ended in the middle of the frame.
    Truncated(&'static str),
}

impl ReadFail {
    /// The error code to answer the peer with.
    pub(crate) fn code(&self) -> ErrorCode {
        match self {
            ReadFail::Wire(e) => e.code(),
            ReadFail::Truncated(_) => ErrorCode::Malformed,
            ReadFail::Gone(_) => ErrorCode::Internal,
        }
    }

    pub(crate) fn from_quic(e: QuicError, part: &'static str) -> ReadFail {
        if e.kind() == QuicErrorKind::FinishedEarly { ReadFail::Truncated(part) } else { ReadFail::Gone(e) }
    }
}

impl fmt::Display for ReadFail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadFail::Gone(e) => write!(f, "stream gone: {e}"),
            ReadFail::Wire(e) => write!(f, "{e}"),
            ReadFail::Truncated(part) => write!(f, "stream ended inside the frame {part}"),
        }
    }
}

/// Reads the header (parsed against `limits` before any allocation) and the body.
pub(crate) async fn read_head(recv: &mut RecvStream, limits: &Limits) -> Result<Inbound, ReadFail> {
    let inbound = read_header(recv, limits).await?;
    read_body(recv, inbound).await
}

/// Reads and parses the header alone: what the request will need is known before any of it
/// is allocated.
pub(crate) async fn read_header(recv: &mut RecvStream, limits: &Limits) -> Result<Inbound, ReadFail> {
    let mut raw = [0u8; HEADER_LEN];
    recv.read_exact(&mut raw).await.map_err(|e| ReadFail::from_quic(e, "header"))?;
    Inbound::parse(raw, limits).map_err(ReadFail::Wire)
}

/// Reads the body that the header announces.
pub(crate) async fn read_body(recv: &mut RecvStream, mut inbound: Inbound) -> Result<Inbound, ReadFail> {
    recv.read_exact(inbound.body_mut()).await.map_err(|e| ReadFail::from_quic(e, "body"))?;
    Ok(inbound)
}

/// Reads what follows the body of `head`: the payload (its length is already within the
/// limits) and its trailing crc when the frame has one.
pub(crate) async fn read_payload(recv: &mut RecvStream, head: &Inbound) -> Result<Vec<u8>, ReadFail> {
    let mut payload = vec![0u8; head.header().after_body_len()];
    recv.read_exact(&mut payload).await.map_err(|e| ReadFail::from_quic(e, "payload"))?;
    Ok(payload)
}

/// Reads one whole frame and verifies its checksum.
pub(crate) async fn read_frame(recv: &mut RecvStream, limits: &Limits) -> Result<Frame, ReadFail> {
    let head = read_head(recv, limits).await?;
    let payload = read_payload(recv, &head).await?;
    head.finish(payload, limits).map_err(ReadFail::Wire)
}
