//! [`UfsStream`]: the bytes of one ranged read, handed out as the store delivers them.

use crate::error::{UfsError, UfsErrorKind};
use bytes::Bytes;

/// A read's error; an object shorter than the range cv recorded for it has changed.
pub(crate) fn read_error(what: String, e: opendal::Error) -> UfsError {
    let shorter = e.kind() == opendal::ErrorKind::RangeNotSatisfied
        || (e.kind() == opendal::ErrorKind::Unexpected && e.message().contains("too little data"));
    let err = UfsError::from_opendal(what, e);
    if shorter { err.with_kind(UfsErrorKind::Changed) } else { err }
}

/// A check run before the last bytes of a read are handed out: that the object is still the
/// version the read was for (stores without ETags, whose reads cannot be conditional).
pub(crate) type Recheck = std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), UfsError>> + Send>>;

/// The bytes of one ranged read as they arrive ([`Ufs::read_stream`]).
pub struct UfsStream {
    inner: Option<opendal::BufferStream>,
    /// Bytes received and not handed out yet (a buffer may hold several pieces).
    pending: opendal::Buffer,
    /// Bytes of the range not handed out yet.
    left: u64,
    what: String,
    recheck: Option<Recheck>,
}

impl std::fmt::Debug for UfsStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UfsStream").field("what", &self.what).field("left", &self.left).finish()
    }
}

impl UfsStream {
    /// The stream of `len` bytes read by `inner` (none for an empty range); `what` names the
    /// read in errors.
    pub(crate) fn new(inner: Option<opendal::BufferStream>, len: u64, what: String) -> Self {
        Self { inner, pending: opendal::Buffer::new(), left: len, what, recheck: None }
    }

    /// Runs `recheck` before the range's last bytes are handed out: if it fails, the read
    /// ends with its error instead, so no caller completes a read of a changed object.
    pub(crate) fn with_recheck(mut self, recheck: Recheck) -> Self {
        self.recheck = Some(recheck);
        self
    }

    /// The next bytes of the range, in order; `None` once all of them came. Never more
    /// bytes than the range holds; a stream that ends early is a `Changed` error.
    pub async fn next(&mut self) -> Option<Result<Bytes, UfsError>> {
        use futures::StreamExt;
        loop {
            if self.left == 0 {
                return None;
            }
            if let Some(b) = Iterator::next(&mut self.pending) {
                let b = if b.len() as u64 > self.left { b.slice(..self.left as usize) } else { b };
                if b.len() as u64 == self.left
                    && let Some(check) = self.recheck.take()
                    && let Err(e) = check.await
                {
                    self.left = 0;
                    return Some(Err(e));
                }
                self.left -= b.len() as u64;
                return Some(Ok(b));
            }
            let inner = self.inner.as_mut()?;
            match StreamExt::next(inner).await {
                Some(Ok(buf)) => self.pending = buf,
                Some(Err(e)) => {
                    self.left = 0;
                    return Some(Err(read_error(self.what.clone(), e)));
                }
                None => {
                    let left = std::mem::take(&mut self.left);
                    return Some(Err(UfsError::new(
                        UfsErrorKind::Changed,
                        format!("{}: ended {left} bytes early; the object is shorter now", self.what),
                    )));
                }
            }
        }
    }
}
