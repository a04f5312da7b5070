//! Certificate revocation (`cvctl cert revoke`): the list is part of the masters' replicated
//! state; workers fetch it (and every master reads its own) to refuse the revoked at the hello
//! and close their connections (docs/security.md, "Revocation").

use super::{check_count, check_str};
use crate::error::WireError;
use crate::kinds::CheckLimits;
use crate::limits::Limits;
use rkyv::{Archive, Deserialize, Serialize};

/// One revoked certificate, or every certificate of one name issued until a moment.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct RevokedCert {
    /// The certificate's serial number: lowercase hex, no separators, no leading zeros
    /// (`cv_net::identity::normalize_serial`). Empty: the entry names certificates by `name`.
    pub serial: String,
    /// With no serial: every certificate whose subject common name is this and that became
    /// valid at or before `issued_before`. With a serial: the name it was revoked under, if known.
    pub name: String,
    /// By name: certificates valid from this second (Unix) or earlier. cvctl backdates a
    /// certificate's start by an hour, so the master records its clock less that hour: those
    /// issued until the revocation.
    pub issued_before: i64,
    /// When it was recorded, milliseconds since the Unix epoch.
    pub at_ms: u64,
    /// Who recorded it: the admin certificate's common name and serial.
    pub by: String,
}

/// Revoke a certificate by serial, or every certificate of a name issued until now; admin only.
/// Answered by [`RevokeCertOk`]. Exactly one of the two is set.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct RevokeCert {
    /// Serial number (hex; colons and case are ignored).
    pub serial: String,
    /// Subject common name.
    pub name: String,
}

/// Reply to [`RevokeCert`]: what was recorded (or was already) and the list's generation.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct RevokeCertOk {
    /// The entry.
    pub entry: RevokedCert,
    /// The list's generation with it.
    pub generation: u64,
}

/// Ask a master for the revocation list, answered by [`RevokedList`]: workers after each
/// heartbeat, admins for `cvctl cert revoked`. With `since` equal to the list's generation the
/// reply carries no entries (nothing changed).
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct ListRevoked {
    /// The generation the caller holds (0: none).
    pub since: u64,
}

/// Reply to [`ListRevoked`].
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct RevokedList {
    /// Bumped by every revocation; never goes back.
    pub generation: u64,
    /// Whether `entries` is the whole list (false: unchanged since the caller's generation).
    pub changed: bool,
    /// Every entry, when changed.
    pub entries: Vec<RevokedCert>,
}

fn check_entry(e: &ArchivedRevokedCert, l: &Limits) -> Result<(), WireError> {
    check_str(&e.serial, l, "revoked.serial")?;
    check_str(&e.name, l, "revoked.name")?;
    check_str(&e.by, l, "revoked.by")
}

impl CheckLimits for ArchivedRevokeCert {
    fn check_limits(&self, l: &Limits) -> Result<(), WireError> {
        check_str(&self.serial, l, "revoke.serial")?;
        check_str(&self.name, l, "revoke.name")
    }
}

impl CheckLimits for ArchivedRevokeCertOk {
    fn check_limits(&self, l: &Limits) -> Result<(), WireError> {
        check_entry(&self.entry, l)
    }
}

impl CheckLimits for ArchivedRevokedList {
    fn check_limits(&self, l: &Limits) -> Result<(), WireError> {
        check_count(self.entries.len(), l, "revoked.entries")?;
        self.entries.iter().try_for_each(|e| check_entry(e, l))
    }
}

super::no_limits!(ArchivedListRevoked);
