//! Typed errors of the QUIC endpoint, its connections and streams.

use std::io;

use quinn_proto::{ConnectionError, VarInt};

/// What went wrong, coarse enough to decide on a reaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// Socket setup or binding failed (see the source `io::Error`).
    Io,
    /// The endpoint is shutting down or has shut down.
    EndpointClosed,
    /// The connection is gone; [`QuicError::connection_error`] says why.
    ConnectionLost,
    /// The peer reset the stream we were reading ([`QuicError::code`]).
    Reset,
    /// The peer asked us to stop sending on this stream ([`QuicError::code`]).
    Stopped,
    /// The stream was already finished, reset or stopped on our side.
    ClosedStream,
    /// `read_exact` reached the end of the stream before the buffer was full.
    FinishedEarly,
    /// `read_to_end` exceeded its size limit (the stream was stopped).
    TooLong,
}

/// Error of the QUIC layer: a [`ErrorKind`], plus the detail that kind carries.
#[derive(Debug, thiserror::Error)]
#[error("quic {kind:?}: {context}{}", detail(.code, .conn, .source))]
pub struct QuicError {
    kind: ErrorKind,
    context: &'static str,
    code: Option<VarInt>,
    conn: Option<ConnectionError>,
    #[source]
    source: Option<io::Error>,
}

fn detail(code: &Option<VarInt>, conn: &Option<ConnectionError>, src: &Option<io::Error>) -> String {
    match (code, conn, src) {
        (Some(c), _, _) => format!(" (code {c})"),
        (_, Some(e), _) => format!(" ({e})"),
        (_, _, Some(e)) => format!(" ({e})"),
        _ => String::new(),
    }
}

impl QuicError {
    pub(crate) fn new(kind: ErrorKind, context: &'static str) -> Self {
        Self { kind, context, code: None, conn: None, source: None }
    }

    pub(crate) fn io(context: &'static str, source: io::Error) -> Self {
        Self { source: Some(source), ..Self::new(ErrorKind::Io, context) }
    }

    pub(crate) fn lost(context: &'static str, reason: ConnectionError) -> Self {
        Self { conn: Some(reason), ..Self::new(ErrorKind::ConnectionLost, context) }
    }

    pub(crate) fn with_code(kind: ErrorKind, context: &'static str, code: VarInt) -> Self {
        Self { code: Some(code), ..Self::new(kind, context) }
    }

    /// The coarse error class.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The application error code of a `Reset` or `Stopped` error.
    pub fn code(&self) -> Option<VarInt> {
        self.code
    }

    /// Why the connection was lost, for `ConnectionLost`.
    pub fn connection_error(&self) -> Option<&ConnectionError> {
        self.conn.as_ref()
    }

    /// Whether retrying the operation (on a new connection or stream) may succeed.
    ///
    /// A lost connection (timeout, reset, peer or endpoint restart) is retryable; a protocol
    /// violation, a refused stream or a size-limit breach is not.
    pub fn retryable(&self) -> bool {
        match self.kind {
            ErrorKind::ConnectionLost => {
                !matches!(self.conn, Some(ConnectionError::VersionMismatch | ConnectionError::TransportError(_)))
            }
            ErrorKind::Io => self
                .source
                .as_ref()
                .is_some_and(|e| matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted)),
            _ => false,
        }
    }
}
