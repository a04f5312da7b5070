//! The revoked certificates, as every server checks them at the hello (docs/security.md,
//! "Revocation"). The list lives in the masters' replicated state; a master reads its own, a
//! worker fetches it after each heartbeat, both as the wire's `RevokedCert` entries. An entry
//! names one certificate by serial, or every certificate of a common name that was valid before
//! a moment (a user's whole set; one issued after, a renewal, is not covered).

use crate::identity::{PeerCert, normalize_serial};
use cv_wire::msg::RevokedCert;
use std::collections::{HashMap, HashSet};

/// The list at one generation, indexed for the hello's check.
#[derive(Clone, Debug, Default)]
pub struct Revoked {
    generation: u64,
    serials: HashSet<String>,
    /// Name → the latest `issued_before` recorded for it.
    names: HashMap<String, i64>,
}

impl Revoked {
    /// The list at `generation`. An entry with a serial that does not read as one matches
    /// nothing and is left out.
    pub fn new<'a>(generation: u64, entries: impl IntoIterator<Item = &'a RevokedCert>) -> Revoked {
        let mut r = Revoked { generation, ..Default::default() };
        for e in entries {
            if e.serial.is_empty() {
                let at = r.names.entry(e.name.clone()).or_insert(i64::MIN);
                *at = (*at).max(e.issued_before);
            } else if let Some(s) = normalize_serial(&e.serial) {
                r.serials.insert(s);
            }
        }
        r
    }

    /// The generation it was made from (0: no list yet).
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Entries in it.
    pub fn len(&self) -> usize {
        self.serials.len() + self.names.len()
    }

    /// Whether it has no entry.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Why `cert` is refused, if it is revoked.
    pub fn refuses(&self, cert: &PeerCert) -> Option<String> {
        if self.serials.contains(&cert.serial) {
            return Some(format!("{cert} is revoked"));
        }
        match self.names.get(&cert.name) {
            Some(&before) if cert.not_before <= before => {
                Some(format!("{cert} is revoked (every certificate of {:?} valid from {before} or earlier)", cert.name))
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identity::CertRole;

    fn cert(name: &str, serial: &str, not_before: i64) -> PeerCert {
        PeerCert { role: CertRole::Client, name: name.into(), serial: serial.into(), not_before, not_after: i64::MAX }
    }

    fn entry(serial: &str, name: &str, issued_before: i64) -> RevokedCert {
        RevokedCert { serial: serial.into(), name: name.into(), issued_before, at_ms: 0, by: String::new() }
    }

    #[test]
    fn serials_and_names_issued_before_are_refused_and_renewals_are_not() {
        let list = Revoked::new(3, &[entry("00:AB:cd", "bob", 0), entry("", "alice", 1000)]);
        assert_eq!(list.generation(), 3);
        assert_eq!(list.len(), 2);
        assert!(list.refuses(&cert("bob", "abcd", 5000)).unwrap().contains("revoked"));
        assert!(list.refuses(&cert("bob", "abce", 5000)).is_none(), "another of bob's certificates");
        assert!(list.refuses(&cert("alice", "1", 1000)).is_some(), "issued at the moment of revocation");
        assert!(list.refuses(&cert("alice", "2", 1001)).is_none(), "a renewal issued after");
        assert!(list.refuses(&cert("carol", "3", 0)).is_none());
        assert!(Revoked::default().refuses(&cert("bob", "abcd", 0)).is_none());
    }
}
