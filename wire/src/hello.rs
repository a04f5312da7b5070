//! The hello's version check, without I/O: the one place where a server (cv-net's rpc
//! servers, the worker's shards) decides which protocol version to speak with a peer, and
//! writes the refusal of a peer it cannot speak with so that the peer can read it.
//!
//! The header, `Hello`, `HelloOk` and `ErrorReply` keep their layout in every version
//! (FORMAT.md, "Compatibility"). A refusal is an `Error` frame stamped with the version the
//! peer's own header claims, so even a build that reads only its own version (every build
//! before this rule) gets a typed `VersionMismatch` naming both versions, instead of a frame
//! it cannot parse; and this build reads an `Error` frame of any version.

use crate::codes::ErrorCode;
use crate::error::WireError;
use crate::frame::{EncodedFrame, encode_as};
use crate::msg::ErrorReply;
use crate::{OLDEST_PEER_VERSION, PROTOCOL_VERSION};

/// A hello refused for its version: the frame to answer with, and why, for logs.
#[derive(Debug)]
pub struct Refusal {
    /// An `Error { VersionMismatch }` frame the peer can read.
    pub frame: EncodedFrame,
    /// The message the frame carries: both sides' versions.
    pub message: String,
}

/// The version to speak with a peer whose `Hello` offers `min..=max`: the newest both speak,
/// or a refusal (answered to `request_id` in this build's version, which a peer offering
/// versions of this build's window reads).
pub fn negotiate(min: u16, max: u16, request_id: u64, server: &str) -> Result<u16, Refusal> {
    let chosen = max.min(PROTOCOL_VERSION);
    if min <= max && chosen >= min && chosen >= OLDEST_PEER_VERSION {
        return Ok(chosen);
    }
    let message = format!("the peer speaks protocol versions {min}..={max}, this {server} speaks {}", ours());
    Err(refusal(PROTOCOL_VERSION, request_id, message))
}

/// The refusal of a first frame that could not be read as one of this build's: `error`
/// from decoding it. A frame of another version is answered in that version, naming both.
pub fn refuse_unreadable(error: &WireError, server: &str) -> Refusal {
    let message = match error.peer_version() {
        Some(v) => format!("the peer speaks protocol version {v}, this {server} speaks {}", ours()),
        None => format!("{error}; this {server} speaks protocol version {}", ours()),
    };
    let version = error.peer_version().unwrap_or(PROTOCOL_VERSION);
    let reply = ErrorReply { code: error.code() as u16, message, redirect: None };
    refusal_of(version, 0, reply)
}

/// This build's versions, as a refusal names them.
fn ours() -> String {
    if OLDEST_PEER_VERSION == PROTOCOL_VERSION {
        PROTOCOL_VERSION.to_string()
    } else {
        format!("{OLDEST_PEER_VERSION}..={PROTOCOL_VERSION}")
    }
}

fn refusal(version: u16, request_id: u64, message: String) -> Refusal {
    let reply = ErrorReply { code: ErrorCode::VersionMismatch as u16, message, redirect: None };
    refusal_of(version, request_id, reply)
}

fn refusal_of(version: u16, request_id: u64, reply: ErrorReply) -> Refusal {
    // An error reply of two short strings always fits the limits.
    let frame = encode_as(version, &reply, request_id, 0, 0).expect("an error reply always encodes");
    Refusal { frame, message: reply.message }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Frame, FrameHeader, Kind, Limits};

    fn read(r: &Refusal) -> (u16, ErrorReply) {
        let f = Frame::decode(r.frame.head(), &Limits::DEFAULT).expect("a refusal decodes");
        (f.header().version, f.decode_body().expect("an error reply"))
    }

    #[test]
    fn a_range_holding_this_version_is_spoken() {
        assert_eq!(negotiate(PROTOCOL_VERSION, PROTOCOL_VERSION, 1, "master").ok(), Some(PROTOCOL_VERSION));
        assert_eq!(negotiate(1, PROTOCOL_VERSION + 5, 1, "master").ok(), Some(PROTOCOL_VERSION));
    }

    #[test]
    fn other_ranges_are_refused_naming_both_sides() {
        let (lo, hi) = (OLDEST_PEER_VERSION - 1, PROTOCOL_VERSION + 1);
        for (min, max) in [(hi, hi + 2), (lo, lo), (hi, lo)] {
            let r = negotiate(min, max, 7, "master").expect_err("refused");
            let (version, reply) = read(&r);
            assert_eq!(version, PROTOCOL_VERSION);
            assert_eq!(ErrorCode::from_u16(reply.code), ErrorCode::VersionMismatch);
            assert!(reply.message.contains(&format!("{min}..={max}")), "{}", reply.message);
            assert!(reply.message.contains(&format!("this master speaks {PROTOCOL_VERSION}")), "{}", reply.message);
        }
    }

    #[test]
    fn a_frame_of_another_version_is_answered_in_that_version() {
        let mut raw = crate::encode(&crate::msg::Ping { nonce: 1 }, 3, &[]).unwrap().head().to_vec();
        raw[4..6].copy_from_slice(&(PROTOCOL_VERSION - 1).to_le_bytes());
        let e = FrameHeader::parse(&raw, &Limits::DEFAULT).expect_err("another version");
        assert_eq!(e.peer_version(), Some(PROTOCOL_VERSION - 1));
        let r = refuse_unreadable(&e, "worker");
        let (version, reply) = read(&r);
        assert_eq!(version, PROTOCOL_VERSION - 1);
        assert_eq!(ErrorCode::from_u16(reply.code), ErrorCode::VersionMismatch);
        let want =
            format!("the peer speaks protocol version {}, this worker speaks {PROTOCOL_VERSION}", PROTOCOL_VERSION - 1);
        assert_eq!(reply.message, want);
        // Its header is exactly what a build of that version expects of an `Error` frame.
        assert_eq!(&r.frame.head()[4..8], &[(PROTOCOL_VERSION - 1) as u8, 0, Kind::Error as u8, 0]);
    }

    #[test]
    fn a_broken_first_frame_is_refused_in_this_version() {
        let e = FrameHeader::parse(b"XXXX", &Limits::DEFAULT).expect_err("short");
        let (version, reply) = read(&refuse_unreadable(&e, "master"));
        assert_eq!(version, PROTOCOL_VERSION);
        assert_eq!(ErrorCode::from_u16(reply.code), ErrorCode::Malformed);
    }
}
