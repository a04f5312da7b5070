//! The bytes of request frames one connection may hold in memory at once.
//!
//! A frame's header is checked against the limits before its body is allocated, but an
//! authenticated peer could still open many streams, each declaring a body (and a ping
//! payload) of the largest allowed size, and never finish them. Every request reserves what it
//! will buffer from its connection's budget before allocating it; a request that does not fit
//! is refused at once (`Unavailable`, retryable) instead of waiting, so a stalled stream can
//! never hold up the ones that would free the budget. Block-write payloads are streamed to
//! the store and reserve nothing. The budget is one largest frame (`Limits::max_frame_len`),
//! as on every `cv_net::rpc` server.

use std::cell::Cell;
use std::rc::Rc;

use cv_wire::{FrameHeader, Kind, Limits};

/// One connection's budget (shard-local: connections never move between threads).
#[derive(Debug)]
pub(crate) struct Budget {
    size: u64,
    left: Cell<u64>,
}

impl Budget {
    /// Room for one frame of the largest size `limits` allow; smaller frames share it.
    pub(crate) fn for_limits(limits: &Limits) -> Rc<Budget> {
        let size = limits.max_frame_len();
        Rc::new(Budget { size, left: Cell::new(size) })
    }

    /// Bytes in all.
    pub(crate) fn size(&self) -> u64 {
        self.size
    }

    /// Reserves what the request `header` announces it will buffer, or `None` if that does
    /// not fit; the reservation ends when the returned guard drops.
    pub(crate) fn hold(self: &Rc<Self>, header: &FrameHeader) -> Option<Held> {
        let bytes = buffered(header);
        let left = self.left.get().checked_sub(bytes)?;
        self.left.set(left);
        Some(Held { budget: self.clone(), bytes })
    }

    #[cfg(test)]
    fn left(&self) -> u64 {
        self.left.get()
    }
}

/// Bytes of a request kept in memory while it is served: the whole frame, less the payload of
/// a block write (streamed to the store).
fn buffered(header: &FrameHeader) -> u64 {
    let streamed = if header.kind == Kind::WriteBlock { header.after_body_len() } else { 0 };
    (header.frame_len() - streamed) as u64
}

/// A reservation; gives its bytes back when dropped.
#[derive(Debug)]
pub(crate) struct Held {
    budget: Rc<Budget>,
    bytes: u64,
}

impl Drop for Held {
    fn drop(&mut self) {
        self.budget.left.set(self.budget.left.get() + self.bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cv_wire::msg::{Ping, WriteBlock};

    fn header(frame: &cv_wire::EncodedFrame) -> FrameHeader {
        FrameHeader::parse(frame.head(), &Limits::DEFAULT).unwrap()
    }

    #[test]
    fn reservations_share_the_budget_and_come_back_when_dropped() {
        let limits = Limits { max_body: 1000, max_payload: 4000, ..Limits::DEFAULT };
        let budget = Budget::for_limits(&limits);
        // One largest frame: header, body, payload and its trailing crc.
        let full = limits.max_frame_len();
        assert_eq!(full, 5036);
        assert_eq!(budget.left(), full);
        let ping = cv_wire::encode(&Ping { nonce: 1 }, 1, &[7u8; 3000]).unwrap();
        let ping = header(&ping);
        let first = budget.hold(&ping).expect("fits");
        let used = full - budget.left();
        assert!(used >= 3000 && used == buffered(&ping), "the whole frame: {used}");
        assert!(budget.hold(&ping).is_none(), "a second one does not fit");
        drop(first);
        assert_eq!(budget.left(), full);
        assert!(budget.hold(&ping).is_some());
    }

    #[test]
    fn a_block_write_reserves_its_header_and_body_only() {
        let write = cv_wire::encode(&WriteBlock { block_id: 1, pinned: false }, 2, &[1u8; 100_000]).unwrap();
        let write = header(&write);
        assert_eq!(buffered(&write), (cv_wire::HEADER_LEN + write.body_len as usize) as u64);
        assert!(write.payload_len >= 100_000);
    }
}
