//! `[tls]`: the three files are read and parsed, the certificate chains to the configured CA
//! at the current time with the usage its role needs and names what that role's peers check
//! (`cv.cluster` for nodes, `client.cv.cluster` for clients, as `cv_net::tls` issues them), it
//! is not about to expire, and the key is the certificate's and readable by its owner only. The handshake would refuse any of
//! these later, with a less precise message and only once a peer is there.

use super::{Check, Finding, Problem, needs_node_identity};
use crate::config::CvConfig;
use rustls::crypto::CryptoProvider;
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use std::path::Path;
use std::time::{Duration, SystemTime};
use webpki::{EndEntityCert, ExtendedKeyUsageValidator, KeyUsage};

/// Warn this long before a certificate expires: time to issue and roll out a new one.
const EXPIRY_WARNING: Duration = Duration::from_secs(30 * 24 * 3600);

/// The findings for `[tls]`, judged at `now`.
pub(super) fn check(cfg: &CvConfig, now: SystemTime) -> Vec<Finding> {
    let tls = &cfg.common.tls;
    let node = needs_node_identity(cfg);
    let mut out = Vec::new();
    let ca = match read_certs(&tls.ca, "CA certificate") {
        Ok(ca) => {
            out.push(Finding::ok(Check::Cert, tls.ca.display().to_string(), "CA certificate parses"));
            Some(ca)
        }
        Err(f) => {
            out.push(f);
            None
        }
    };
    let chain = read_certs(&tls.cert, "certificate").map_err(|f| out.push(f)).ok();
    let key = read_key(&tls.key).map_err(|f| out.push(f)).ok();
    if key.is_some() {
        out.extend(key_mode_finding(&tls.key));
    }
    if let (Some(ca), Some(chain)) = (&ca, &chain) {
        out.extend(chain_findings(&tls.cert, &tls.ca, ca, chain, node, now));
    }
    if let (Some(chain), Some(key)) = (chain, key) {
        out.push(key_finding(&tls.key, &tls.cert, chain, key));
    }
    // The masters' capability secret: whoever reads it mints block capabilities.
    if let Some(secret) = cfg.master.as_ref().and_then(|m| m.capability_key.as_deref()) {
        out.extend(key_mode_finding(secret));
    }
    out
}

/// A key file readable by its group or by everyone fails: whoever reads it is this node.
fn key_mode_finding(path: &Path) -> Option<Finding> {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(path).ok()?.permissions().mode() & 0o777;
    (mode & 0o077 != 0).then(|| {
        Finding::fail(
            Check::Cert,
            path.display().to_string(),
            Problem::KeyExposed,
            format!("private key is mode {mode:o}: others may read it; chmod 600 it (owned by the service's user)"),
        )
    })
}

fn read(path: &Path) -> Result<Vec<u8>, Finding> {
    std::fs::read(path).map_err(|e| {
        Finding::fail(Check::Cert, path.display().to_string(), Problem::Unreadable, format!("cannot read: {e}"))
    })
}

fn read_certs(path: &Path, what: &str) -> Result<Vec<CertificateDer<'static>>, Finding> {
    let bytes = read(path)?;
    let unparsable = |d: String| Finding::fail(Check::Cert, path.display().to_string(), Problem::Unparsable, d);
    let certs: Vec<_> = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<_, _>>()
        .map_err(|e| unparsable(format!("not a PEM {what}: {e}")))?;
    if certs.is_empty() {
        return Err(unparsable(format!("no {what} in the file (expected PEM `BEGIN CERTIFICATE`)")));
    }
    Ok(certs)
}

fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>, Finding> {
    let bytes = read(path)?;
    PrivateKeyDer::from_pem_slice(&bytes).map_err(|e| {
        Finding::fail(
            Check::Cert,
            path.display().to_string(),
            Problem::Unparsable,
            format!("not a PEM private key: {e}"),
        )
    })
}

/// Chain, validity dates, usage and name of the leaf.
fn chain_findings(
    cert_path: &Path,
    ca_path: &Path,
    ca: &[CertificateDer<'static>],
    chain: &[CertificateDer<'static>],
    node: bool,
    now: SystemTime,
) -> Vec<Finding> {
    let subject = cert_path.display().to_string();
    let fail = |p, d: String| vec![Finding::fail(Check::Cert, subject.clone(), p, d)];
    let leaf = match EndEntityCert::try_from(&chain[0]) {
        Ok(l) => l,
        Err(e) => return fail(Problem::Unparsable, format!("not an X.509 certificate webpki accepts: {e}")),
    };
    let mut anchors = Vec::new();
    for c in ca {
        match webpki::anchor_from_trusted_cert(c) {
            Ok(a) => anchors.push(a),
            Err(e) => {
                let d = format!("not a usable CA certificate: {e}");
                return vec![Finding::fail(Check::Cert, ca_path.display().to_string(), Problem::Unparsable, d)];
            }
        }
    }
    let provider = rustls::crypto::ring::default_provider();
    let at = |t: SystemTime| UnixTime::since_unix_epoch(t.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default());
    let verify = |time: UnixTime, usage: KeyUsage| verify(&provider, &leaf, &anchors, &chain[1..], time, usage);
    // Every cv identity calls other cv servers, so clientAuth is what all of them need.
    if let Err(e) = verify(at(now), KeyUsage::client_auth()) {
        let (p, d) = explain(&e, ca_path);
        return fail(p, d);
    }
    let mut out = Vec::new();
    // Validity ends where a check at the end of time (9999-12-31, the latest X.509 date;
    // rcgen's default notAfter is 4096-01-01) reports the notAfter it failed on.
    let far = UnixTime::since_unix_epoch(Duration::from_secs(253_402_300_799));
    let not_after = match verify(far, KeyUsage::client_auth()) {
        Err(webpki::Error::CertExpired { not_after, .. }) => Some(not_after),
        _ => None,
    };
    let until = not_after.map(|t| format!("valid until {}", date(t))).unwrap_or_else(|| "valid".into());
    match verify(at(now + EXPIRY_WARNING), KeyUsage::client_auth()) {
        Err(webpki::Error::CertExpired { not_after, .. }) => {
            let left = not_after.as_secs().saturating_sub(at(now).as_secs()) / 86_400;
            let d = format!("expires on {} (in {left} days): issue a new one before then", date(not_after));
            out.push(Finding::warn(Check::Cert, subject.clone(), Problem::ExpiresSoon, d));
        }
        _ => out.push(Finding::ok(Check::Cert, subject.clone(), format!("chains to {}, {until}", ca_path.display()))),
    }
    // The role the servers will read from it (`cv_net::identity`): one they cannot read is
    // refused at every hello.
    let role = match cv_net::identity::PeerCert::parse(&chain[0]) {
        Ok(c) => c.role,
        Err(e) => {
            out.push(Finding::fail(Check::Cert, subject, Problem::WrongRole, format!("servers refuse it: {e}")));
            return out;
        }
    };
    out.push(role_finding(&subject, &leaf, node, verify(at(now), KeyUsage::server_auth()).is_ok(), &role));
    out
}

fn verify<'a>(
    provider: &CryptoProvider,
    leaf: &'a EndEntityCert<'a>,
    anchors: &'a [rustls_pki_types::TrustAnchor<'_>],
    intermediates: &'a [CertificateDer<'a>],
    time: UnixTime,
    usage: impl ExtendedKeyUsageValidator,
) -> Result<(), webpki::Error> {
    let algs = provider.signature_verification_algorithms.all;
    leaf.verify_for_usage(algs, anchors, intermediates, time, usage, None, None).map(|_| ())
}

/// A failed chain verification as a problem and a sentence.
fn explain(e: &webpki::Error, ca_path: &Path) -> (Problem, String) {
    match e {
        webpki::Error::CertExpired { not_after, .. } => {
            (Problem::Expired, format!("expired on {}: issue a new one under the cluster CA", date(*not_after)))
        }
        webpki::Error::CertNotValidYet { not_before, .. } => {
            (Problem::NotYetValid, format!("not valid before {}: is this host's clock right?", date(*not_before)))
        }
        webpki::Error::UnknownIssuer | webpki::Error::InvalidSignatureForPublicKey => (
            Problem::WrongCa,
            format!("does not chain to the CA in {} ({e:?}): it was issued by another CA", ca_path.display()),
        ),
        #[allow(deprecated)]
        webpki::Error::RequiredEkuNotFound | webpki::Error::RequiredEkuNotFoundContext(_) => {
            (Problem::WrongRole, "lacks the clientAuth usage every cv identity needs".into())
        }
        other => (Problem::Unparsable, format!("does not verify: {other:?}")),
    }
}

/// Whether the certificate is what the role needs: servers present `cv.cluster` with
/// serverAuth (clients check both); clients carry `client.cv.cluster` and clientAuth only.
fn role_finding(
    subject: &str,
    leaf: &EndEntityCert<'_>,
    node: bool,
    serves: bool,
    role: &cv_net::identity::CertRole,
) -> Finding {
    let names = |n: &'static str| {
        ServerName::try_from(n).is_ok_and(|name| leaf.verify_is_valid_for_subject_name(&name).is_ok())
    };
    let (server, client) = (cv_net::tls::SERVER_NAME, cv_net::tls::CLIENT_NAME);
    let s = subject.to_string();
    match (node, names(server), serves) {
        (true, true, true) => {
            Finding::ok(Check::Cert, s, format!("node certificate ({role}): names {server}, serverAuth + clientAuth"))
        }
        (true, false, _) => Finding::fail(
            Check::Cert,
            s,
            Problem::WrongRole,
            format!(
                "does not name {server}: masters and workers need a node certificate (`cvctl cert init`'s node.pem)"
            ),
        ),
        (true, true, false) => Finding::fail(
            Check::Cert,
            s,
            Problem::WrongRole,
            format!("names {server} but lacks the serverAuth usage: peers would refuse it"),
        ),
        (false, true, _) | (false, _, true) => Finding::warn(
            Check::Cert,
            s,
            Problem::WrongRole,
            format!(
                "a node certificate in a client's config: it can serve and register as a node; give clients client.pem ({client})"
            ),
        ),
        (false, false, false) if names(client) => {
            Finding::ok(Check::Cert, s, format!("client certificate ({role}): names {client}, clientAuth only"))
        }
        (false, false, false) => Finding::warn(
            Check::Cert,
            s,
            Problem::WrongRole,
            format!("names neither {server} nor {client}: not issued by `cvctl cert init`"),
        ),
    }
}

/// Whether the key is the certificate's: its public half against the certificate's.
fn key_finding(
    key_path: &Path,
    cert_path: &Path,
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
) -> Finding {
    let subject = key_path.display().to_string();
    let provider = rustls::crypto::ring::default_provider();
    let signer = match provider.key_provider.load_private_key(key) {
        Ok(s) => s,
        Err(e) => {
            return Finding::fail(Check::Cert, subject, Problem::Unparsable, format!("unusable private key: {e}"));
        }
    };
    match CertifiedKey::new(chain, signer).keys_match() {
        Ok(()) => Finding::ok(Check::Cert, subject, format!("is the key of {}", cert_path.display())),
        Err(rustls::Error::InconsistentKeys(rustls::InconsistentKeys::KeyMismatch)) => Finding::fail(
            Check::Cert,
            subject,
            Problem::KeyMismatch,
            format!("is not the key of {}: the handshake would fail", cert_path.display()),
        ),
        Err(e) => Finding::warn(
            Check::Cert,
            subject,
            Problem::KeyMismatch,
            format!("could not compare with the certificate: {e}"),
        ),
    }
}

/// A UTC date, `2026-12-05`: enough to act on an expiry.
pub(crate) fn date(t: UnixTime) -> String {
    // Days since 1970-01-01 to a civil date (Howard Hinnant's algorithm), to avoid a date crate
    // for one line of output.
    let days = (t.as_secs() / 86_400) as i64 + 719_468;
    let era = days.div_euclid(146_097);
    let doe = days.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_civil() {
        let d = |s: u64| date(UnixTime::since_unix_epoch(Duration::from_secs(s)));
        assert_eq!(d(0), "1970-01-01");
        assert_eq!(d(951_782_400), "2000-02-29");
        assert_eq!(d(1_764_892_800), "2025-12-05");
    }
}
