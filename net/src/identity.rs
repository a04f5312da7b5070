//! Who a peer is, read from its certificate (already verified against the cluster CA during
//! the handshake). A server grants what the certificate proves, never what the hello says.
//!
//! The role is a URI among the certificate's subject alternative names:
//!
//! | URI                         | role                                              |
//! |-----------------------------|---------------------------------------------------|
//! | `cv://role/admin`           | operator: cvctl's cluster changes (mounts, drain, masters, free, report) |
//! | `cv://role/client`          | applications: read and write files, nothing else  |
//! | `cv://role/worker/<name>`   | a worker; `<name>` is the node name it registers  |
//! | `cv://role/master/<name>`   | a master                                          |
//!
//! Certificates issued before roles existed carry none: one naming [`crate::tls::SERVER_NAME`]
//! is a node of either kind ([`CertRole::Node`]), any other a client. An old client
//! certificate thereby loses the administrative rights every certificate used to have.

use crate::error::{NetError, NetErrorKind};
use cv_wire::msg::Role;
use rustls_pki_types::CertificateDer;
use x509_parser::prelude::{FromDer, GeneralName, X509Certificate};

/// The scheme and path every role URI starts with.
pub const ROLE_URI: &str = "cv://role/";

/// What a certificate lets its holder do.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum CertRole {
    /// An operator: every client right plus the cluster's administration.
    Admin,
    /// An application: files only.
    Client,
    /// A worker with this node name.
    Worker(String),
    /// A master with this node name.
    Master(String),
    /// A node certificate from before roles: may act as a worker or a master.
    Node,
}

impl CertRole {
    /// The role's URI, as issued into a certificate (`None` for [`CertRole::Node`], which has
    /// none).
    pub fn uri(&self) -> Option<String> {
        Some(match self {
            CertRole::Admin => format!("{ROLE_URI}admin"),
            CertRole::Client => format!("{ROLE_URI}client"),
            CertRole::Worker(n) => format!("{ROLE_URI}worker/{n}"),
            CertRole::Master(n) => format!("{ROLE_URI}master/{n}"),
            CertRole::Node => return None,
        })
    }

    /// Parses a role URI; the error says what is wrong with it.
    pub fn from_uri(uri: &str) -> Result<CertRole, String> {
        let rest = uri.strip_prefix(ROLE_URI).ok_or_else(|| format!("{uri:?} does not start with {ROLE_URI}"))?;
        match rest.split_once('/') {
            None if rest == "admin" => Ok(CertRole::Admin),
            None if rest == "client" => Ok(CertRole::Client),
            Some(("worker", name)) => Ok(CertRole::Worker(node_name(name)?)),
            Some(("master", name)) => Ok(CertRole::Master(node_name(name)?)),
            _ => Err(format!("{uri:?}: no such role (admin, client, worker/<name>, master/<name>)")),
        }
    }

    /// Whether this certificate serves, so it must name [`crate::tls::SERVER_NAME`].
    pub fn is_node(&self) -> bool {
        matches!(self, CertRole::Worker(_) | CertRole::Master(_) | CertRole::Node)
    }

    /// May act as a worker (register, heartbeat, fetch mount credentials, copy blocks).
    pub fn may_work(&self) -> bool {
        matches!(self, CertRole::Worker(_) | CertRole::Node)
    }

    /// May act as a master (Raft messages, orders to workers).
    pub fn may_lead(&self) -> bool {
        matches!(self, CertRole::Master(_) | CertRole::Node)
    }

    /// May change the cluster (mounts, drain, membership, free, report).
    pub fn is_admin(&self) -> bool {
        *self == CertRole::Admin
    }
}

impl std::fmt::Display for CertRole {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CertRole::Admin => f.write_str("admin"),
            CertRole::Client => f.write_str("client"),
            CertRole::Worker(n) => write!(f, "worker {n}"),
            CertRole::Master(n) => write!(f, "master {n}"),
            CertRole::Node => f.write_str("node (no role; issued before roles)"),
        }
    }
}

/// A node name in a role URI: what a worker registers as, so the same characters.
fn node_name(name: &str) -> Result<String, String> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if ok { Ok(name.to_string()) } else { Err(format!("{name:?} is not a node name (1-64 of A-Z a-z 0-9 - _ .)")) }
}

/// What a verified certificate says of its holder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerCert {
    /// The role it grants.
    pub role: CertRole,
    /// Its subject's common name, for messages and logs.
    pub name: String,
    /// Its serial number, as [`normalize_serial`] writes it (what revocation names).
    pub serial: String,
    /// When it became valid, seconds since the Unix epoch (a revocation by name covers the
    /// certificates of that name valid from before it).
    pub not_before: i64,
    /// When it stops being valid, seconds since the Unix epoch.
    pub not_after: i64,
}

impl PeerCert {
    /// Reads a certificate. Fails on one that does not parse or names two roles or a role URI
    /// that is not one (a certificate meant to carry a role must not fall back to another).
    pub fn parse(der: &CertificateDer<'_>) -> Result<PeerCert, NetError> {
        let bad = |what: String| NetError::new(NetErrorKind::Tls, format!("peer certificate: {what}"));
        let (_, cert) = X509Certificate::from_der(der.as_ref()).map_err(|e| bad(e.to_string()))?;
        let mut role = None;
        let mut node = false;
        if let Ok(Some(san)) = cert.subject_alternative_name() {
            for n in &san.value.general_names {
                match n {
                    GeneralName::URI(u) if u.starts_with(ROLE_URI) => {
                        let r = CertRole::from_uri(u).map_err(bad)?;
                        if role.replace(r).is_some() {
                            return Err(bad("names more than one role".into()));
                        }
                    }
                    GeneralName::DNSName(d) if *d == crate::tls::SERVER_NAME => node = true,
                    _ => {}
                }
            }
        }
        let role = match role {
            Some(r) if r.is_node() && !node => {
                return Err(bad(format!("role {r} without the server name {}", crate::tls::SERVER_NAME)));
            }
            Some(r) => r,
            None if node => CertRole::Node,
            None => CertRole::Client,
        };
        let name = cert
            .subject()
            .iter_common_name()
            .next()
            .and_then(|cn| cn.as_str().ok())
            .unwrap_or("(no common name)")
            .to_string();
        let serial = normalize_serial(&cert.tbs_certificate.raw_serial_as_string())
            .ok_or_else(|| bad("serial number is not hex".into()))?;
        let validity = cert.validity();
        Ok(PeerCert {
            role,
            name,
            serial,
            not_before: validity.not_before.timestamp(),
            not_after: validity.not_after.timestamp(),
        })
    }

    /// Reads the first certificate of a PEM text.
    pub fn from_pem(pem: &str) -> Result<PeerCert, NetError> {
        use rustls_pki_types::pem::PemObject;
        let der = CertificateDer::from_pem_slice(pem.as_bytes())
            .map_err(|e| NetError::new(NetErrorKind::Tls, format!("certificate PEM: {e}")))?;
        PeerCert::parse(&der)
    }

    /// The certificate of a rustls/quinn peer identity; a peer with none (impossible once the
    /// handshake required one) is refused.
    pub fn of_identity(identity: Option<Box<dyn std::any::Any>>) -> Result<PeerCert, NetError> {
        match crate::tls::peer_leaf(identity) {
            Some(leaf) => PeerCert::parse(&leaf),
            None => Err(NetError::new(NetErrorKind::Tls, "peer presented no certificate")),
        }
    }
}

impl std::fmt::Display for PeerCert {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} certificate {:?} (serial {})", self.role, self.name, self.serial)
    }
}

/// A certificate serial number as cv writes and compares it: lowercase hex, without the
/// colons or spaces tools print between bytes and without leading zeros (DER adds a zero byte
/// before a serial whose top bit is set; `openssl` shows it, other tools do not). `None` for
/// anything but hex digits and separators, or no digit at all.
pub fn normalize_serial(text: &str) -> Option<String> {
    let digits: String = text.chars().filter(|c| !matches!(c, ':' | ' ')).collect();
    let digits = digits.strip_prefix("0x").unwrap_or(&digits);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let trimmed = digits.trim_start_matches('0');
    Some(if trimmed.is_empty() { "0".into() } else { trimmed.to_ascii_lowercase() })
}

/// Whether a peer holding `cert` may say in its hello that it is `role` named `node`: anyone
/// a client; an admin certificate an admin; a worker or master certificate that worker or master
/// (only as the node it names); the role-less node certificate of older clusters either. Masters
/// and shards both ask this before they answer the hello.
pub fn hello_allowed(role: Role, node: &str, cert: &PeerCert) -> Result<(), String> {
    let named = |name: &String| {
        if name == node { Ok(()) } else { Err(format!("{cert} may not speak as node {node:?}")) }
    };
    let needs = match (role, &cert.role) {
        (Role::Client, _) | (Role::Admin, CertRole::Admin) => return Ok(()),
        (Role::Worker, CertRole::Worker(name)) | (Role::Master, CertRole::Master(name)) => return named(name),
        (Role::Worker | Role::Master, CertRole::Node) => return Ok(()),
        (Role::Admin, _) => "admin tool needs an admin",
        (Role::Worker, _) => "worker needs a worker or node",
        (Role::Master, _) => "master needs a master or node",
    };
    Err(format!("role {needs} certificate; this peer holds a {cert}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn role_uris_round_trip_and_bad_ones_are_named() {
        for r in [CertRole::Admin, CertRole::Client, CertRole::Worker("w-1".into()), CertRole::Master("m.2".into())] {
            assert_eq!(CertRole::from_uri(&r.uri().unwrap()).unwrap(), r);
        }
        assert!(CertRole::from_uri("cv://role/root").unwrap_err().contains("no such role"));
        assert!(CertRole::from_uri("cv://role/worker/").unwrap_err().contains("not a node name"));
        assert!(CertRole::from_uri("cv://role/worker/a/b").unwrap_err().contains("not a node name"));
        assert!(CertRole::from_uri("cv://role/admin/x").unwrap_err().contains("no such role"));
    }

    #[test]
    fn serials_compare_whatever_tool_printed_them() {
        assert_eq!(normalize_serial("00:8F:3a").as_deref(), Some("8f3a"));
        assert_eq!(normalize_serial("8f3a").as_deref(), Some("8f3a"));
        assert_eq!(normalize_serial("0x008F3A").as_deref(), Some("8f3a"));
        assert_eq!(normalize_serial("00").as_deref(), Some("0"));
        assert_eq!(normalize_serial("alice"), None);
        assert_eq!(normalize_serial(""), None);
    }
}
