//! Replies of a shard: an encoded frame whose payload (block bytes) is sent from the store's
//! buffers as they are, never gathered into one copy.

use cv_wire::msg::ErrorReply;
use cv_wire::{EncodedFrame, ErrorCode, Message, WireError};

use super::fill::Filling;
use crate::store::BlockBytes;
use cv_rt::quic::{QuicError, SendStream, VarInt};

/// Longest error message sent (peers refuse strings over their limit).
const MAX_MESSAGE: usize = 1024;
/// Stream reset code when a reply cannot even be encoded.
const CODE_ENCODE_FAILED: u32 = 2;
/// Stream reset code when a streamed reply's bytes stop coming (the fetch failed midway).
const CODE_SOURCE_FAILED: u32 = 3;

/// The payload of a reply.
#[derive(Debug)]
enum Payload {
    /// Block bytes, still in the store's buffers.
    Block(BlockBytes),
    /// Bytes owned by the reply (a ping's echo).
    Owned(Vec<u8>),
    /// Bytes shared with other replies (a block just fetched from object storage).
    Shared(bytes::Bytes),
    /// Bytes still arriving from object storage: the first piece, then the rest as they come.
    Streamed(bytes::Bytes, Filling),
}

/// One reply frame and the bytes that form its payload.
#[derive(Debug)]
pub(crate) struct Reply {
    frame: Result<EncodedFrame, WireError>,
    payload: Payload,
}

impl Reply {
    /// A reply without payload.
    pub(crate) fn ok<M: Message>(request_id: u64, msg: &M) -> Reply {
        Reply::with_bytes(request_id, msg, Vec::new())
    }

    /// A reply whose payload is `bytes`.
    pub(crate) fn with_bytes<M: Message>(request_id: u64, msg: &M, bytes: Vec<u8>) -> Reply {
        Reply { frame: cv_wire::encode(msg, request_id, &bytes), payload: Payload::Owned(bytes) }
    }

    /// A reply whose payload is `bytes`, sent piece by piece. The frame crc is combined from
    /// the checksums the store took while verifying the chunks it read, so the bytes are not
    /// read a second time.
    pub(crate) fn with_block<M: Message>(request_id: u64, msg: &M, bytes: BlockBytes) -> Reply {
        let frame = cv_wire::encode_with_crc(msg, request_id, bytes.len() as u64, bytes.crc32());
        Reply { frame, payload: Payload::Block(bytes) }
    }

    /// A reply whose payload is a shared buffer (sent without copying).
    pub(crate) fn with_shared<M: Message>(request_id: u64, msg: &M, bytes: bytes::Bytes) -> Reply {
        Reply { frame: cv_wire::encode(msg, request_id, &bytes), payload: Payload::Shared(bytes) }
    }

    /// A reply of `len` payload bytes that are still arriving: `first`, then the pieces of
    /// `rest`. Its payload crc follows the payload (`Flags::PAYLOAD_CRC_AFTER`).
    pub(crate) fn streamed<M: Message>(
        request_id: u64,
        msg: &M,
        len: u64,
        first: bytes::Bytes,
        rest: Filling,
    ) -> Reply {
        Reply { frame: cv_wire::encode_streamed(msg, request_id, len), payload: Payload::Streamed(first, rest) }
    }

    /// A frame encoded elsewhere, without payload: a hello's refusal (`cv_wire::hello`).
    pub(crate) fn frame(frame: EncodedFrame) -> Reply {
        Reply { frame: Ok(frame), payload: Payload::Owned(Vec::new()) }
    }

    /// An `ErrorReply` with `code`; `redirect` names the owning shard for `WrongShard`.
    pub(crate) fn error(request_id: u64, code: ErrorCode, message: &str, redirect: Option<String>) -> Reply {
        // Under the id the client's error names, so the two can be matched.
        let request = format_args!("{request_id:016x}");
        if code.is_fault() {
            tracing::warn!(%request, code = code.name(), message, "request failed");
        } else {
            tracing::debug!(%request, code = code.name(), message, "request refused");
        }
        let mut end = message.len().min(MAX_MESSAGE);
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        let msg = ErrorReply { code: code as u16, message: message[..end].to_string(), redirect };
        Reply::ok(request_id, &msg)
    }

    /// Writes the frame and its payload, then finishes the stream.
    pub(crate) async fn send(mut self, send: &mut SendStream) -> Result<(), QuicError> {
        let frame = match self.frame {
            Ok(f) => f,
            Err(e) => {
                tracing::error!(error = %e, "reply could not be encoded; resetting the stream");
                return send.reset(VarInt::from_u32(CODE_ENCODE_FAILED));
            }
        };
        send.write_all(frame.head()).await?;
        match &mut self.payload {
            // The DMA buffers themselves go to the stream (no copy); quinn-proto keeps them
            // until the client acknowledges their bytes.
            Payload::Block(bytes) => {
                for part in bytes.shared_parts() {
                    send.write_all_shared(part).await?;
                }
            }
            Payload::Owned(bytes) => send.write_all(bytes).await?,
            Payload::Shared(bytes) => send.write_all_shared(bytes.clone()).await?,
            Payload::Streamed(first, rest) => {
                let mut crc = crc32fast::Hasher::new();
                crc.update(first);
                send.write_all(first).await?;
                while let Some(piece) = rest.next().await {
                    match piece {
                        Ok(b) => {
                            crc.update(&b);
                            send.write_all_shared(b).await?;
                        }
                        // Never a wrong trailer: the reader sees the reset and retries.
                        Err(e) => {
                            tracing::debug!(error = %e.message, "streamed reply cut: its source failed");
                            return send.reset(VarInt::from_u32(CODE_SOURCE_FAILED));
                        }
                    }
                }
                send.write_all(&cv_wire::trailer(crc.finalize())).await?;
            }
        }
        send.finish()
    }
}
