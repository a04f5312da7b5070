//! Receiving a request frame, without I/O: the one piece every server's stream reader uses
//! (cv-net's rpc servers on quinn, the worker's shards on their own runtime).
//!
//! The header is parsed once, into an [`Inbound`], and checked against the limits before
//! anything is allocated. A server then reserves what the request will buffer from its
//! connection's [`RequestBudget`], reads the body into [`Inbound::body_mut`] and the rest
//! through its own stream type, and [`Inbound::finish`] verifies the checksum and yields the
//! [`Frame`] without parsing the header again.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use rkyv::util::AlignedVec;

use crate::error::{WireError, WireErrorKind};
use crate::frame::{Frame, FrameCheck, FrameHeader, HEADER_LEN};
use crate::limits::Limits;

/// A frame as it arrives: its header (raw bytes and their parsed, limit-checked form), then
/// its body; what follows the body is still on the stream.
#[derive(Debug)]
pub struct Inbound {
    raw: [u8; HEADER_LEN],
    header: FrameHeader,
    /// Empty (not allocated) until [`Inbound::body_mut`].
    body: AlignedVec,
}

impl Inbound {
    /// Parses and checks the header (magic, version, kind, declared lengths against `limits`).
    /// Allocates nothing.
    pub fn parse(raw: [u8; HEADER_LEN], limits: &Limits) -> Result<Inbound, WireError> {
        let header = FrameHeader::parse(&raw, limits)?;
        Ok(Inbound { raw, header, body: AlignedVec::new() })
    }

    /// The parsed header.
    pub fn header(&self) -> &FrameHeader {
        &self.header
    }

    /// The body's buffer, to read exactly the body into: allocated (zeroed, aligned) on the
    /// first call, once the caller has reserved it from its budget.
    pub fn body_mut(&mut self) -> &mut [u8] {
        let len = self.header.body_len as usize;
        if self.body.len() != len {
            self.body.reserve_exact(len);
            self.body.resize(len, 0);
        }
        &mut self.body
    }

    /// The body as read into [`Inbound::body_mut`].
    pub fn body(&self) -> &[u8] {
        &self.body
    }

    /// Starts the checksum of a frame whose payload the caller streams elsewhere (a block
    /// write into the store) instead of gathering it.
    pub fn check(&self) -> Result<FrameCheck, WireError> {
        FrameCheck::new(&self.raw, &self.header, &self.body)
    }

    /// Completes the frame with the [`FrameHeader::after_body_len`] bytes after its body (the
    /// payload, and its crc when the frame carries it there), and verifies the checksum.
    pub fn finish(self, after_body: Vec<u8>, limits: &Limits) -> Result<Frame, WireError> {
        Frame::assemble(self.raw, self.header, self.body, after_body, limits)
    }
}

/// The bytes of request frames one connection may hold in memory at once.
///
/// A header is checked against the limits before its body is allocated, but an authenticated
/// peer could still open many streams, each announcing a frame of the largest size, and never
/// finish them. Every request reserves what it will buffer before allocating it; one that does
/// not fit is refused at once (`Busy`, answered `Unavailable`, retryable) rather than made to
/// wait, so a stalled stream can never hold up the ones that would free the budget. The budget
/// is one largest frame, [`Limits::max_frame_len`], on every server.
#[derive(Debug, Clone)]
pub struct RequestBudget {
    inner: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    size: u64,
    left: AtomicU64,
}

impl RequestBudget {
    /// Room for one frame of the largest size `limits` allow; smaller frames share it.
    pub fn for_limits(limits: &Limits) -> RequestBudget {
        let size = limits.max_frame_len();
        RequestBudget { inner: Arc::new(Shared { size, left: AtomicU64::new(size) }) }
    }

    /// Bytes in all.
    pub fn size(&self) -> u64 {
        self.inner.size
    }

    /// Bytes not reserved now.
    pub fn left(&self) -> u64 {
        self.inner.left.load(Ordering::Acquire)
    }

    /// Reserves what the request `header` announces it will buffer
    /// ([`FrameHeader::buffered_len`]); the reservation ends when the returned guard drops.
    pub fn hold(&self, header: &FrameHeader) -> Result<Held, WireError> {
        let bytes = header.buffered_len();
        let taken = self.inner.left.fetch_update(Ordering::AcqRel, Ordering::Acquire, |left| left.checked_sub(bytes));
        match taken {
            Ok(_) => Ok(Held { budget: self.inner.clone(), bytes }),
            Err(_) => Err(WireError::new(
                WireErrorKind::Busy,
                format!(
                    "this connection's unfinished requests hold its {} bytes of request buffers; retry",
                    self.size()
                ),
            )),
        }
    }
}

/// A reservation of a [`RequestBudget`]; gives its bytes back when dropped.
#[derive(Debug)]
pub struct Held {
    budget: Arc<Shared>,
    bytes: u64,
}

impl Drop for Held {
    fn drop(&mut self) {
        self.budget.left.fetch_add(self.bytes, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::msg::{Ping, WriteBlock};
    use crate::{ErrorCode, encode};

    fn inbound(frame: &crate::EncodedFrame) -> Inbound {
        let mut raw = [0u8; HEADER_LEN];
        raw.copy_from_slice(&frame.head()[..HEADER_LEN]);
        Inbound::parse(raw, &Limits::DEFAULT).unwrap()
    }

    #[test]
    fn reservations_share_the_budget_and_come_back_when_dropped() {
        let limits = Limits { max_body: 1000, max_payload: 4000, ..Limits::DEFAULT };
        let budget = RequestBudget::for_limits(&limits);
        // One largest frame: header, body, payload and its trailing crc.
        let full = limits.max_frame_len();
        assert_eq!((full, budget.left()), (5036, 5036));
        let ping = encode(&Ping { nonce: 1 }, 1, &[7u8; 3000]).unwrap();
        let ping = *inbound(&ping).header();
        let first = budget.hold(&ping).expect("fits");
        let used = full - budget.left();
        assert!(used >= 3000 && used == ping.frame_len() as u64, "the whole frame: {used}");
        let refused = budget.hold(&ping).expect_err("a second one does not fit");
        assert_eq!((refused.kind(), refused.code()), (WireErrorKind::Busy, ErrorCode::Unavailable));
        assert!(refused.retryable());
        drop(first);
        assert_eq!(budget.left(), full);
        assert!(budget.hold(&ping).is_ok());
    }

    #[test]
    fn a_block_write_reserves_its_header_and_body_only() {
        let write =
            encode(&WriteBlock { block_id: 1, pinned: false, cap: Default::default() }, 2, &[1u8; 100_000]).unwrap();
        let write = *inbound(&write).header();
        assert_eq!(write.buffered_len(), (HEADER_LEN + write.body_len as usize) as u64);
        assert!(write.payload_len >= 100_000);
    }

    #[test]
    fn a_frame_read_in_parts_is_checked_once_assembled() {
        let wire = encode(&Ping { nonce: 9 }, 3, b"abc").unwrap();
        let mut bytes = wire.head().to_vec();
        bytes.extend_from_slice(b"abc");
        let read = |after: &[u8]| {
            let mut head = inbound(&wire);
            let body_len = head.header().body_len as usize;
            head.body_mut().copy_from_slice(&bytes[HEADER_LEN..HEADER_LEN + body_len]);
            head.finish(after.to_vec(), &Limits::DEFAULT)
        };
        let frame = read(b"abc").unwrap();
        assert_eq!((frame.header().request_id, frame.payload()), (3, &b"abc"[..]));
        let bad = read(b"abd").unwrap_err();
        assert_eq!(bad.kind(), WireErrorKind::Checksum);
    }
}
