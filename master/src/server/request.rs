//! One request as its handler receives it: the frame's body validated once, by the
//! dispatcher, as the message its kind names.

use super::errors::Fail;
use cv_net::rpc::Reply;
use cv_wire::msg::Done;
use cv_wire::{Frame, Message};

/// A validated request of message type `M`.
pub(super) struct Req<'a, M: Message> {
    /// The requester's id, echoed in the reply.
    pub id: u64,
    /// The body, validated (rkyv's checked access and the message's limits).
    pub body: &'a M::Archived,
    /// The raw payload after the body (a completed file's tail).
    pub payload: &'a [u8],
}

impl<'a, M: Message> Req<'a, M> {
    /// Validates `frame`'s body as an `M`: the only validation a request's body gets.
    pub fn of(frame: &'a Frame) -> Result<Self, Fail> {
        Ok(Req { id: frame.header().request_id, body: frame.access::<M>()?, payload: frame.payload() })
    }

    /// The body as an owned value, for handlers that keep or move its fields.
    pub fn owned(&self) -> Result<M, Fail> {
        Ok(M::to_owned(self.body)?)
    }

    /// The reply `msg`, with no payload.
    pub fn reply<R: Message>(&self, msg: &R) -> Reply {
        Reply::ok(self.id, msg, Vec::new())
    }

    /// The reply of a request that returns nothing.
    pub fn done(&self) -> Reply {
        self.reply(&Done {})
    }
}
