//! Stream halves handed to handlers: async reads and writes over quinn-proto's stream state.
//!
//! Every operation borrows the connection state for one synchronous step, never across an
//! `.await`, and wakes the driver when quinn-proto may have something to transmit.

use std::future::poll_fn;
use std::task::{Context, Poll};

use bytes::Bytes;
use quinn_proto::{FinishError, ReadError, ReadableError, StreamId, VarInt, WriteError};

use super::conn::{CODE_DROPPED, ConnRef, ConnShared};
use super::error::{ErrorKind, QuicError};

/// The receiving half of a bidirectional stream.
///
/// Dropping it before the end of the stream stops it (STOP_SENDING), so the peer's data and
/// the stream's credit are released instead of pinning the concurrent-stream limit.
#[derive(Debug)]
pub struct RecvStream {
    conn: ConnRef,
    id: StreamId,
    /// FIN or reset seen, or stopped: nothing left to release on drop.
    done: bool,
    /// FIN seen: further reads return `None`.
    fin: bool,
}

impl RecvStream {
    pub(crate) fn new(conn: ConnRef, id: StreamId) -> Self {
        Self { conn, id, done: false, fin: false }
    }

    /// The QUIC stream id.
    pub fn id(&self) -> u64 {
        self.id.into()
    }

    fn poll_chunk(&mut self, cx: &mut Context<'_>, max: usize) -> Poll<Result<Option<Bytes>, QuicError>> {
        if self.fin {
            return Poll::Ready(Ok(None));
        }
        if self.done {
            return Poll::Ready(Err(QuicError::new(ErrorKind::ClosedStream, "read")));
        }
        let conn = &self.conn.0;
        let mut st = conn.state.borrow_mut();
        let (result, transmit) = {
            let mut recv = st.inner.recv_stream(self.id);
            match recv.read(true) {
                Err(ReadableError::ClosedStream) => (Err(None), false),
                Err(ReadableError::IllegalOrderedRead) => (Err(None), false),
                Ok(mut chunks) => {
                    let r = chunks.next(max);
                    let transmit = chunks.finalize().should_transmit();
                    (r.map_err(Some), transmit)
                }
            }
        };
        let out = match result {
            Ok(Some(chunk)) => Poll::Ready(Ok(Some(chunk.bytes))),
            Ok(None) => {
                self.done = true;
                self.fin = true;
                Poll::Ready(Ok(None))
            }
            Err(Some(ReadError::Blocked)) => match ConnShared::lost_error(&st, "read") {
                Some(e) => Poll::Ready(Err(e)),
                None => {
                    st.readers.insert(self.id, cx.waker().clone());
                    Poll::Pending
                }
            },
            Err(Some(ReadError::Reset(code))) => {
                self.done = true;
                Poll::Ready(Err(QuicError::with_code(ErrorKind::Reset, "read", code)))
            }
            Err(None) => {
                self.done = true;
                Poll::Ready(Err(ConnShared::lost_error(&st, "read")
                    .unwrap_or_else(|| QuicError::new(ErrorKind::ClosedStream, "read on a closed stream"))))
            }
        };
        drop(st);
        if transmit {
            conn.wake_driver();
        }
        out
    }

    /// Returns the next chunk in order, at most `max` bytes, without copying; `None` at FIN.
    pub async fn read_chunk(&mut self, max: usize) -> Result<Option<Bytes>, QuicError> {
        poll_fn(|cx| self.poll_chunk(cx, max.max(1))).await
    }

    /// Reads into `buf`; returns the byte count, or `None` at the end of the stream.
    pub async fn read(&mut self, buf: &mut [u8]) -> Result<Option<usize>, QuicError> {
        if buf.is_empty() {
            return Ok(Some(0));
        }
        Ok(self.read_chunk(buf.len()).await?.map(|chunk| {
            buf[..chunk.len()].copy_from_slice(&chunk);
            chunk.len()
        }))
    }

    /// Fills `buf` completely; `FinishedEarly` if the stream ends first.
    pub async fn read_exact(&mut self, buf: &mut [u8]) -> Result<(), QuicError> {
        let mut filled = 0;
        while filled < buf.len() {
            match self.read(&mut buf[filled..]).await? {
                Some(n) => filled += n,
                None => return Err(QuicError::new(ErrorKind::FinishedEarly, "read_exact")),
            }
        }
        Ok(())
    }

    /// Reads until FIN. More than `limit` bytes stops the stream and fails with `TooLong`.
    pub async fn read_to_end(&mut self, limit: usize) -> Result<Vec<u8>, QuicError> {
        let mut out = Vec::new();
        while let Some(chunk) = self.read_chunk(usize::MAX).await? {
            if out.len() + chunk.len() > limit {
                // Best effort: the stream may already be closed.
                let _ = self.stop(CODE_DROPPED);
                return Err(QuicError::new(ErrorKind::TooLong, "read_to_end"));
            }
            out.extend_from_slice(&chunk);
        }
        Ok(out)
    }

    /// Discards unread data and asks the peer to stop sending (STOP_SENDING with `code`).
    pub fn stop(&mut self, code: VarInt) -> Result<(), QuicError> {
        if self.done {
            return Err(QuicError::new(ErrorKind::ClosedStream, "stop"));
        }
        self.done = true;
        let conn = &self.conn.0;
        let res = {
            let mut st = conn.state.borrow_mut();
            st.readers.remove(&self.id);
            st.inner.recv_stream(self.id).stop(code)
        };
        conn.wake_driver();
        res.map_err(|_| QuicError::new(ErrorKind::ClosedStream, "stop"))
    }
}

impl Drop for RecvStream {
    fn drop(&mut self) {
        if !self.done {
            let _ = self.stop(CODE_DROPPED);
        }
    }
}

/// The sending half of a bidirectional stream.
///
/// Dropping it without `finish()` resets the stream: a truncated reply must never look complete.
#[derive(Debug)]
pub struct SendStream {
    conn: ConnRef,
    id: StreamId,
    /// Finished or reset: nothing to do on drop.
    done: bool,
}

impl SendStream {
    pub(crate) fn new(conn: ConnRef, id: StreamId) -> Self {
        Self { conn, id, done: false }
    }

    /// The QUIC stream id.
    pub fn id(&self) -> u64 {
        self.id.into()
    }

    fn map_write_error(&self, e: WriteError) -> QuicError {
        match e {
            WriteError::Stopped(code) => QuicError::with_code(ErrorKind::Stopped, "write", code),
            WriteError::ClosedStream | WriteError::Blocked => {
                QuicError::new(ErrorKind::ClosedStream, "write on a closed stream")
            }
        }
    }

    /// Writes some of `data` once flow control allows; returns how much was taken.
    pub async fn write(&mut self, data: &[u8]) -> Result<usize, QuicError> {
        self.write_with(|s| s.write(data)).await
    }

    /// Writes all of `data` without copying it: the stream keeps the buffer until the peer
    /// has acknowledged its bytes.
    pub async fn write_all_shared(&mut self, mut data: Bytes) -> Result<(), QuicError> {
        while !data.is_empty() {
            // Takes what flow control allows and advances `data` past it.
            self.write_with(|s| s.write_chunks(std::slice::from_mut(&mut data)).map(|w| w.bytes)).await?;
        }
        Ok(())
    }

    /// Runs `write` on the stream once flow control lets it take something.
    async fn write_with(
        &mut self,
        mut write: impl FnMut(&mut quinn_proto::SendStream<'_>) -> Result<usize, WriteError>,
    ) -> Result<usize, QuicError> {
        if self.done {
            return Err(QuicError::new(ErrorKind::ClosedStream, "write after finish"));
        }
        let conn = self.conn.0.clone();
        let n = poll_fn(|cx| {
            let mut st = conn.state.borrow_mut();
            if let Some(e) = ConnShared::lost_error(&st, "write") {
                return Poll::Ready(Err(e));
            }
            match write(&mut st.inner.send_stream(self.id)) {
                Ok(n) => Poll::Ready(Ok(n)),
                Err(WriteError::Blocked) => {
                    st.writers.insert(self.id, cx.waker().clone());
                    Poll::Pending
                }
                Err(e) => Poll::Ready(Err(self.map_write_error(e))),
            }
        })
        .await?;
        conn.wake_driver();
        Ok(n)
    }

    /// Writes all of `data`.
    pub async fn write_all(&mut self, mut data: &[u8]) -> Result<(), QuicError> {
        while !data.is_empty() {
            let n = self.write(data).await?;
            data = &data[n..];
        }
        Ok(())
    }

    /// Marks the end of the stream; the data already written is still delivered.
    pub fn finish(&mut self) -> Result<(), QuicError> {
        if self.done {
            return Err(QuicError::new(ErrorKind::ClosedStream, "finish"));
        }
        let conn = &self.conn.0;
        let res = conn.state.borrow_mut().inner.send_stream(self.id).finish();
        self.done = true;
        conn.wake_driver();
        match res {
            Ok(()) => Ok(()),
            Err(FinishError::Stopped(code)) => Err(QuicError::with_code(ErrorKind::Stopped, "finish", code)),
            Err(FinishError::ClosedStream) => Err(QuicError::new(ErrorKind::ClosedStream, "finish")),
        }
    }

    /// Abandons the stream: unsent data is dropped and the peer sees RESET_STREAM with `code`.
    pub fn reset(&mut self, code: VarInt) -> Result<(), QuicError> {
        if self.done {
            return Err(QuicError::new(ErrorKind::ClosedStream, "reset"));
        }
        self.done = true;
        let conn = &self.conn.0;
        let res = {
            let mut st = conn.state.borrow_mut();
            st.writers.remove(&self.id);
            st.inner.send_stream(self.id).reset(code)
        };
        conn.wake_driver();
        res.map_err(|_| QuicError::new(ErrorKind::ClosedStream, "reset"))
    }
}

impl Drop for SendStream {
    fn drop(&mut self) {
        if !self.done {
            let _ = self.reset(CODE_DROPPED);
        }
    }
}
