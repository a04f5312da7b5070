//! Decoding errors. Every way a frame can be refused is a kind here.

use crate::codes::ErrorCode;
use std::fmt;

/// Why a frame was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WireErrorKind {
    /// Fewer bytes than the header or the lengths it declares.
    Truncated,
    /// The first four bytes are not the cv magic.
    BadMagic,
    /// The frame's protocol version is not one this build speaks.
    UnsupportedVersion,
    /// The frame kind is not in the catalogue.
    UnknownKind,
    /// Reserved header bits or fields are set.
    BadHeader,
    /// The crc32 over header, body and payload does not match.
    Checksum,
    /// A declared size or a count inside the body breaks a [`crate::Limits`] value.
    LimitExceeded,
    /// The body is not a valid archive of the expected message.
    Malformed,
    /// The frame is valid but of another kind than the one expected.
    UnexpectedKind,
    /// Encoding failed (a message larger than the limits, or a serializer error).
    Encode,
    /// The frame is valid, but its connection's request buffers are full
    /// ([`crate::RequestBudget`]); the same request may succeed once others finish.
    Busy,
}

/// A refused frame: its kind and a short static description of what broke.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WireError {
    kind: WireErrorKind,
    detail: String,
    /// For `UnsupportedVersion`: the version the refused frame's header claims.
    peer_version: Option<u16>,
}

impl WireError {
    /// A new error: also for message types declared outside this crate (the client's
    /// borrowed `ReadBlock`), which encode through [`crate::Message`] as the catalogue's do.
    pub fn new(kind: WireErrorKind, detail: impl Into<String>) -> Self {
        WireError { kind, detail: detail.into(), peer_version: None }
    }

    /// A frame of protocol version `version`, which this build does not speak.
    pub(crate) fn unsupported_version(version: u16) -> Self {
        let detail = format!("frame version {version}, this build speaks {}", crate::PROTOCOL_VERSION);
        WireError { kind: WireErrorKind::UnsupportedVersion, detail, peer_version: Some(version) }
    }

    /// For [`WireErrorKind::UnsupportedVersion`]: the version the frame claims, which a
    /// refusal is written in so that the peer can read it ([`crate::hello`]).
    pub fn peer_version(&self) -> Option<u16> {
        self.peer_version
    }

    /// What broke.
    pub fn kind(&self) -> WireErrorKind {
        self.kind
    }

    /// Context for humans (which field, which limit).
    pub fn detail(&self) -> &str {
        &self.detail
    }

    /// The protocol error code a server answers with for this decoding error.
    pub fn code(&self) -> ErrorCode {
        match self.kind {
            WireErrorKind::UnsupportedVersion => ErrorCode::VersionMismatch,
            WireErrorKind::LimitExceeded => ErrorCode::LimitExceeded,
            WireErrorKind::Encode => ErrorCode::Internal,
            WireErrorKind::Busy => ErrorCode::Unavailable,
            _ => ErrorCode::Malformed,
        }
    }

    /// Decoding errors never get better by resending the same bytes; a full budget may.
    pub fn retryable(&self) -> bool {
        self.kind == WireErrorKind::Busy
    }
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "wire {:?}: {}", self.kind, self.detail)
    }
}

impl std::error::Error for WireError {}
