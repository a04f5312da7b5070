//! Reading request frames from a shard's QUIC stream: the header first, checked against the
//! limits before anything is allocated, then the body; the payload is read whole or, for
//! block writes, streamed by the handler.

use std::fmt;

use cv_wire::rkyv::util::AlignedVec;
use cv_wire::{ErrorCode, Frame, FrameHeader, HEADER_LEN, Limits, WireError};

use cv_rt::quic::{ErrorKind as QuicErrorKind, QuicError, RecvStream};

/// Why a request frame could not be read.
#[derive(Debug)]
pub(crate) enum ReadFail {
    /// The stream or connection is gone; nobody is left to answer.
    Gone(QuicError),
    /// The bytes are not a valid frame (header, limits, checksum, archive).
    Wire(WireError),
    /// The stream ended in the middle of the frame.
    Truncated(&'static str),
    /// The connection's unfinished requests already hold its request buffers (their size).
    Busy(u64),
}

impl ReadFail {
    /// The error code to answer the peer with.
    pub(crate) fn code(&self) -> ErrorCode {
        match self {
            ReadFail::Wire(e) => e.code(),
            ReadFail::Truncated(_) => ErrorCode::Malformed,
            ReadFail::Busy(_) => ErrorCode::Unavailable,
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
            ReadFail::Busy(size) => {
                write!(f, "this connection's unfinished requests hold its {size} bytes of request buffers; retry")
            }
        }
    }
}

/// A request's header and body, read and length-checked; the payload is still on the stream.
#[derive(Debug)]
pub(crate) struct Head {
    pub(crate) raw: [u8; HEADER_LEN],
    pub(crate) header: FrameHeader,
    pub(crate) body: AlignedVec,
}

impl Head {
    /// Completes the frame with its payload and verifies the checksum.
    pub(crate) fn into_frame(self, payload: Vec<u8>, limits: &Limits) -> Result<Frame, WireError> {
        Frame::from_parts(self.raw, self.body, payload, limits)
    }
}

/// Reads the header (parsed against `limits` before any allocation) and the body.
pub(crate) async fn read_head(recv: &mut RecvStream, limits: &Limits) -> Result<Head, ReadFail> {
    let (raw, header) = read_header(recv, limits).await?;
    read_body(recv, raw, header).await
}

/// Reads and parses the header alone: what the request will need is known before any of it
/// is allocated.
pub(crate) async fn read_header(
    recv: &mut RecvStream,
    limits: &Limits,
) -> Result<([u8; HEADER_LEN], FrameHeader), ReadFail> {
    let mut raw = [0u8; HEADER_LEN];
    recv.read_exact(&mut raw).await.map_err(|e| ReadFail::from_quic(e, "header"))?;
    let header = FrameHeader::parse(&raw, limits).map_err(ReadFail::Wire)?;
    Ok((raw, header))
}

/// Reads the body that `header` (parsed from `raw`) announces.
pub(crate) async fn read_body(
    recv: &mut RecvStream,
    raw: [u8; HEADER_LEN],
    header: FrameHeader,
) -> Result<Head, ReadFail> {
    let mut body = AlignedVec::with_capacity(header.body_len as usize);
    body.resize(header.body_len as usize, 0);
    recv.read_exact(&mut body).await.map_err(|e| ReadFail::from_quic(e, "body"))?;
    Ok(Head { raw, header, body })
}

/// Reads what follows the body of `head`: the payload (its length is already within the
/// limits) and its trailing crc when the frame has one.
pub(crate) async fn read_payload(recv: &mut RecvStream, head: &Head) -> Result<Vec<u8>, ReadFail> {
    let mut payload = vec![0u8; head.header.after_body_len()];
    recv.read_exact(&mut payload).await.map_err(|e| ReadFail::from_quic(e, "payload"))?;
    Ok(payload)
}

/// Reads one whole frame and verifies its checksum.
pub(crate) async fn read_frame(recv: &mut RecvStream, limits: &Limits) -> Result<Frame, ReadFail> {
    let head = read_head(recv, limits).await?;
    let payload = read_payload(recv, &head).await?;
    head.into_frame(payload, limits).map_err(ReadFail::Wire)
}
