//! Revoked certificates: recorded through the journal like any change, read by the server
//! shell, which refuses them at the hello and closes their connections, and hands the list to
//! workers (docs/security.md, "Revocation").

use super::{MasterCore, Pending};
use crate::error::{Error, ErrorKind, Result};
use crate::state::{Mutation, Revocation};

impl MasterCore {
    /// Revokes the certificate of `serial` (normalized hex), or with an empty serial every
    /// certificate of common name `name` valid from `backdate_s` before now or earlier (those
    /// issued until now, when issuers backdate by that much); `by` names the admin. The
    /// pending value is the entry as recorded.
    pub fn begin_revoke(&self, serial: &str, name: &str, by: &str, backdate_s: u64) -> Result<Pending<Revocation>> {
        if serial.is_empty() == name.is_empty() {
            return Err(Error::new(ErrorKind::InvalidArgument, "revoke a serial number or a name, one of the two"));
        }
        if name.len() > 1024 || serial.len() > 128 {
            return Err(Error::new(ErrorKind::InvalidArgument, "serial or name too long"));
        }
        let mut recorded = None;
        let (_, t) = self.submit(|_, now_ms| {
            let r = Revocation {
                serial: serial.to_string(),
                name: name.to_string(),
                // By serial the moment plays no part.
                issued_before: if serial.is_empty() { (now_ms / 1000).saturating_sub(backdate_s) as i64 } else { 0 },
                at_ms: now_ms,
                by: by.to_string(),
            };
            recorded = Some(r.clone());
            Ok(Mutation::Revoke(r))
        })?;
        // `submit` ran the builder, or failed before it and returned above.
        let recorded = recorded.ok_or_else(|| Error::new(ErrorKind::Io, "revocation not recorded"))?;
        Ok(Self::done(recorded, t))
    }

    /// The list's generation (0: nothing ever revoked).
    pub fn revoked_generation(&self) -> u64 {
        self.settled().state.data().revoked_generation
    }

    /// The list and its generation.
    pub fn revoked(&self) -> (u64, Vec<Revocation>) {
        let g = self.settled();
        let data = g.state.data();
        (data.revoked_generation, data.revoked.values().cloned().collect())
    }
}
