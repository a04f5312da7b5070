//! `cvctl cert revoke` and `cvctl cert revoked`: the masters' replicated list of revoked
//! certificates. Every master refuses a revoked certificate at the hello and closes its
//! connections within a fraction of a second; workers fetch the list after each heartbeat and
//! do the same (docs/security.md, "Revocation").

use std::path::Path;
use std::time::Duration;

use super::CmdResult;
use crate::connect::{ClientArgs, admin_call, runtime};
use clap::Args;
use cv_net::identity::{PeerCert, normalize_serial};
use cv_wire::msg::{ListRevoked, RevokeCert, RevokeCertOk, RevokedCert, RevokedList};

/// Arguments of `cvctl cert revoke`.
#[derive(Args, Debug)]
pub struct RevokeArgs {
    #[command(flatten)]
    conn: ClientArgs,
    /// What to revoke: a certificate file (`.pem`: its serial), a serial number (hex, 8 digits
    /// or more; colons allowed), or a name (every certificate of that common name issued until
    /// now; one issued afterwards, a renewal, is not covered).
    target: String,
    /// Read `target` as a serial number whatever it looks like.
    #[arg(long, conflicts_with = "name")]
    serial: bool,
    /// Read `target` as a common name whatever it looks like.
    #[arg(long)]
    name: bool,
}

/// Arguments of `cvctl cert revoked`.
#[derive(Args, Debug)]
pub struct RevokedArgs {
    #[command(flatten)]
    conn: ClientArgs,
}

/// How `target` is read: (serial, name), one of them empty.
fn what(a: &RevokeArgs) -> Result<(String, String), Box<dyn std::error::Error + Send + Sync>> {
    let serial_of = |t: &str| normalize_serial(t).ok_or_else(|| format!("{t:?} is not a serial number (hex)"));
    if a.serial {
        return Ok((serial_of(&a.target)?, String::new()));
    }
    if a.name {
        return Ok((String::new(), a.target.clone()));
    }
    let path = Path::new(&a.target);
    if path.extension().is_some_and(|e| e == "pem") || path.is_file() {
        let pem = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let cert = PeerCert::from_pem(&pem)?;
        return Ok((cert.serial, String::new()));
    }
    // cvctl issues 128-bit serials (32 hex digits); a short hex word is more likely a name.
    let digits = a.target.chars().filter(char::is_ascii_hexdigit).count();
    match normalize_serial(&a.target) {
        Some(s) if digits >= 8 => Ok((s, String::new())),
        _ => Ok((String::new(), a.target.clone())),
    }
}

impl RevokeArgs {
    /// Runs it.
    pub fn run(self) -> CmdResult {
        let (serial, name) = what(&self)?;
        runtime()?.block_on(async move {
            let req = RevokeCert { serial, name };
            let ok: RevokeCertOk = admin_call(&self.conn, &req, Duration::from_secs(30)).await?.decode_body()?;
            println!("revoked: {}", describe(&ok.entry));
            println!("  list generation {}: masters refuse it now, workers after their next heartbeat", ok.generation);
            Ok(())
        })
    }
}

impl RevokedArgs {
    /// Runs it.
    pub fn run(self) -> CmdResult {
        runtime()?.block_on(async move {
            let list: RevokedList =
                admin_call(&self.conn, &ListRevoked { since: 0 }, Duration::from_secs(30)).await?.decode_body()?;
            println!("revocation list, generation {}: {} entries", list.generation, list.entries.len());
            for e in &list.entries {
                println!("  {}", describe(e));
            }
            Ok(())
        })
    }
}

fn describe(e: &RevokedCert) -> String {
    let what = if e.serial.is_empty() {
        format!("every certificate of {:?} issued until then (valid from {} or earlier)", e.name, day(e.issued_before))
    } else if e.name.is_empty() {
        format!("serial {}", e.serial)
    } else {
        format!("serial {} ({})", e.serial, e.name)
    };
    format!("{what}; recorded {} by {}", day((e.at_ms / 1000) as i64), e.by)
}

/// A Unix time as its day (UTC, the date `cvctl doctor` prints) and the second.
fn day(s: i64) -> String {
    let t = rustls_pki_types::UnixTime::since_unix_epoch(std::time::Duration::from_secs(s.max(0) as u64));
    format!("{} ({s})", crate::doctor::certs::date(t))
}
