//! [`Shaped`]: a response body that stalls or breaks after its first bytes, for the body
//! faults of [`crate::Fault`].

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use hyper::body::{Body, Bytes, Frame, SizeHint};

type StdError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// What happens once the first bytes went out.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Then {
    /// A pause, then the rest.
    Stall(Duration),
    /// The body fails: hyper drops the connection mid-body.
    Cut,
}

/// `inner`, delivered as: its first `after` bytes, then [`Then`].
pub(crate) struct Shaped {
    inner: s3s::Body,
    /// Bytes still to send before the fault.
    before: usize,
    then: Then,
    /// Bytes of `inner` held back at the fault.
    held: Option<Bytes>,
    sleep: Option<Pin<Box<tokio::time::Sleep>>>,
    faulted: bool,
}

impl Shaped {
    pub(crate) fn new(inner: s3s::Body, after: usize, then: Then) -> Self {
        Self { inner, before: after, then, held: None, sleep: None, faulted: false }
    }
}

impl Body for Shaped {
    type Data = Bytes;
    type Error = StdError;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, StdError>>> {
        let this = &mut *self;
        if this.before == 0 && !this.faulted {
            match this.then {
                Then::Cut => {
                    this.faulted = true;
                    return Poll::Ready(Some(Err("cut by cv-testkit".into())));
                }
                Then::Stall(d) => {
                    ready!(this.sleep.get_or_insert_with(|| Box::pin(tokio::time::sleep(d))).as_mut().poll(cx));
                    this.faulted = true;
                }
            }
        }
        if let Some(b) = this.held.take() {
            return Poll::Ready(Some(Ok(Frame::data(b))));
        }
        if this.faulted && matches!(this.then, Then::Cut) {
            return Poll::Ready(None);
        }
        let frame = ready!(Pin::new(&mut this.inner).poll_frame(cx));
        let Some(Ok(frame)) = frame else { return Poll::Ready(frame) };
        let mut data = match frame.into_data() {
            Ok(d) => d,
            Err(other) => return Poll::Ready(Some(Ok(other))),
        };
        if !this.faulted && data.len() > this.before {
            this.held = Some(data.split_off(this.before));
        }
        if !this.faulted {
            this.before -= data.len();
        }
        Poll::Ready(Some(Ok(Frame::data(data))))
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
