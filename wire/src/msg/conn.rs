//! Connection-level messages: hello, errors, ping, done.

use super::{Role, check_str, no_limits};
use crate::error::WireError;
use crate::kinds::CheckLimits;
use crate::limits::Limits;
use rkyv::{Archive, Deserialize, Serialize};

/// First frame on every connection, sent by the side that connected.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct Hello {
    /// Oldest protocol version the sender speaks.
    pub min_version: u16,
    /// Newest protocol version the sender speaks.
    pub max_version: u16,
    /// What the sender is.
    pub role: Role,
    /// Free-form node or program name, for logs.
    pub node: String,
}

/// Answer to [`Hello`]: the version both sides will use.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct HelloOk {
    /// Chosen protocol version.
    pub version: u16,
    /// What the answering side is.
    pub role: Role,
    /// Its node name.
    pub node: String,
}

/// A failed request. `code` is an [`crate::ErrorCode`].
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct ErrorReply {
    /// The [`crate::ErrorCode`] as a number.
    pub code: u16,
    /// Human context (never secrets).
    pub message: String,
    /// For `WrongShard`: the `host:port` that owns the block.
    pub redirect: Option<String>,
}

/// Null request, answered by [`Pong`] with the same nonce: the transport floor.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct Ping {
    /// Echoed back.
    pub nonce: u64,
}

/// Answer to [`Ping`].
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct Pong {
    /// The request's nonce.
    pub nonce: u64,
}

/// Success with nothing to return.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct Done {}

impl CheckLimits for ArchivedHello {
    fn check_limits(&self, l: &Limits) -> Result<(), WireError> {
        check_str(&self.node, l, "hello.node")
    }
}

impl CheckLimits for ArchivedHelloOk {
    fn check_limits(&self, l: &Limits) -> Result<(), WireError> {
        check_str(&self.node, l, "hello_ok.node")
    }
}

impl CheckLimits for ArchivedErrorReply {
    fn check_limits(&self, l: &Limits) -> Result<(), WireError> {
        check_str(&self.message, l, "error.message")?;
        match self.redirect.as_ref() {
            Some(r) => check_str(r, l, "error.redirect"),
            None => Ok(()),
        }
    }
}

no_limits!(ArchivedPing, ArchivedPong, ArchivedDone);
