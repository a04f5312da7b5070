//! Cluster identities: a cluster CA, node certificates (servers, and workers
//! calling the master) and client certificates, all verified mutually during
//! the TLS 1.3 handshake. A peer without a certificate from the cluster CA
//! never gets past the handshake, in either direction.
//!
//! Every server certificate names [`SERVER_NAME`], and clients always verify
//! against that name: the cluster CA is the trust boundary, not DNS. Client
//! certificates carry only the clientAuth usage, so they cannot serve.

use crate::config::TlsConfig;
use crate::error::{NetError, NetErrorKind};
use crate::identity::CertRole;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose, SanType,
};
use rustls::RootCertStore;
use rustls::server::WebPkiClientVerifier;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// The name every cv server certificate carries and every client verifies.
pub const SERVER_NAME: &str = "cv.cluster";

/// The name client certificates carry instead: they can never pass as a node.
pub const CLIENT_NAME: &str = "client.cv.cluster";

/// How long an identity is valid unless the issuer says otherwise: a year for nodes, 90 days
/// for operators and applications (renewed with `cvctl cert issue`; `cvctl doctor` warns
/// before the end).
pub fn default_lifetime(role: &CertRole) -> Duration {
    if role.is_node() { Duration::from_secs(365 * 86_400) } else { Duration::from_secs(90 * 86_400) }
}

/// How long a cluster CA is valid.
const CA_LIFETIME: Duration = Duration::from_secs(10 * 365 * 86_400);

/// A certificate and its key, PEM-encoded.
#[derive(Clone)]
pub struct Issued {
    /// Certificate, PEM.
    pub cert_pem: String,
    /// Private key, PEM (PKCS#8).
    pub key_pem: String,
}

impl std::fmt::Debug for Issued {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Issued").field("cert_pem", &self.cert_pem).finish_non_exhaustive()
    }
}

/// A cluster certificate authority able to issue identities.
pub struct ClusterCa {
    cert: rcgen::Certificate,
    key: KeyPair,
}

impl std::fmt::Debug for ClusterCa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterCa").finish_non_exhaustive()
    }
}

fn tls_err(what: &str, e: impl std::fmt::Display) -> NetError {
    NetError::new(NetErrorKind::Tls, format!("{what}: {e}"))
}

/// How long before its issue a certificate is valid from (clocks of a cluster differ a little).
/// A revocation by name covers the certificates valid from this long before it or earlier:
/// those issued until it, not a renewal issued after (`crate::revoked`).
pub const NOT_BEFORE_BACKDATE: Duration = Duration::from_secs(3600);

/// Valid from [`NOT_BEFORE_BACKDATE`] ago for `lifetime`.
fn validity(params: &mut CertificateParams, lifetime: Duration) {
    let now = time::OffsetDateTime::now_utc();
    params.not_before = now - time::Duration::seconds(NOT_BEFORE_BACKDATE.as_secs() as i64);
    params.not_after = now + time::Duration::seconds(lifetime.as_secs().min(i64::MAX as u64) as i64);
}

fn ca_params(cluster: &str) -> CertificateParams {
    let mut params = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, format!("cv cluster CA {cluster}"));
    params.distinguished_name = dn;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    validity(&mut params, CA_LIFETIME);
    params
}

impl ClusterCa {
    /// Creates a new CA for the cluster named `cluster`.
    pub fn generate(cluster: &str) -> Result<Self, NetError> {
        let key = KeyPair::generate().map_err(|e| tls_err("generate CA key", e))?;
        let cert = ca_params(cluster).self_signed(&key).map_err(|e| tls_err("self-sign CA", e))?;
        Ok(ClusterCa { cert, key })
    }

    /// An existing CA, from its certificate and key (`ca.pem`, `ca.key`), to issue more
    /// identities under it. What it issues names the same issuer and key identifier, so peers
    /// holding the original `ca.pem` trust it.
    pub fn from_pem(cert_pem: &str, key_pem: &str) -> Result<Self, NetError> {
        use rustls_pki_types::pem::PemObject;
        use x509_parser::prelude::{FromDer, X509Certificate};
        let key = KeyPair::from_pem(key_pem).map_err(|e| tls_err("CA key", e))?;
        // Signing with another key would issue certificates nobody trusts: check it is this CA's.
        let der = CertificateDer::from_pem_slice(cert_pem.as_bytes()).map_err(|e| tls_err("CA certificate", e))?;
        let (_, parsed) = X509Certificate::from_der(der.as_ref()).map_err(|e| tls_err("CA certificate", e))?;
        if parsed.tbs_certificate.subject_pki.raw != key.public_key_der().as_slice() {
            return Err(tls_err("CA key", "it is not the key of the CA certificate"));
        }
        let params = CertificateParams::from_ca_cert_pem(cert_pem).map_err(|e| tls_err("CA certificate", e))?;
        let cert = params.self_signed(&key).map_err(|e| tls_err("CA certificate and key do not match", e))?;
        Ok(ClusterCa { cert, key })
    }

    /// Reads `ca.pem` and `ca.key` from `dir`.
    pub fn load_dir(dir: &Path) -> Result<Self, NetError> {
        let read = |f: &str| {
            let p = dir.join(f);
            std::fs::read_to_string(&p).map_err(|e| tls_err(&format!("read {}", p.display()), e))
        };
        ClusterCa::from_pem(&read("ca.pem")?, &read("ca.key")?)
    }

    /// The CA certificate, PEM.
    pub fn cert_pem(&self) -> String {
        self.cert.pem()
    }

    /// The CA key, PEM. Keep it offline: whoever has it can join the cluster.
    pub fn key_pem(&self) -> String {
        self.key.serialize_pem()
    }

    /// Issues a certificate for `name` with `role`, valid for the role's
    /// [`default_lifetime`].
    pub fn issue(&self, name: &str, role: &CertRole, extra_sans: &[String]) -> Result<Issued, NetError> {
        self.issue_for(name, role, extra_sans, default_lifetime(role))
    }

    /// Issues a certificate for `name` with `role`, valid from now for `lifetime`. Node roles
    /// name [`SERVER_NAME`] and `extra_sans` (hostnames or IPs) and may serve; admin and
    /// client certificates name only [`CLIENT_NAME`] and may only call. The role goes in as a
    /// URI ([`crate::identity`]), except for [`CertRole::Node`], the role-less node
    /// certificate of clusters set up before roles.
    pub fn issue_for(
        &self,
        name: &str,
        role: &CertRole,
        extra_sans: &[String],
        lifetime: Duration,
    ) -> Result<Issued, NetError> {
        let sans: Vec<String> = if role.is_node() {
            std::iter::once(SERVER_NAME.to_string()).chain(extra_sans.iter().cloned()).collect()
        } else {
            vec![CLIENT_NAME.to_string()]
        };
        let mut params = CertificateParams::new(sans).map_err(|e| tls_err("certificate names", e))?;
        if let Some(uri) = role.uri() {
            let uri = uri.try_into().map_err(|e| tls_err("role URI", e))?;
            params.subject_alt_names.push(SanType::URI(uri));
        }
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, name);
        params.distinguished_name = dn;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = if role.is_node() {
            vec![ExtendedKeyUsagePurpose::ServerAuth, ExtendedKeyUsagePurpose::ClientAuth]
        } else {
            vec![ExtendedKeyUsagePurpose::ClientAuth]
        };
        params.serial_number = Some(random_serial());
        validity(&mut params, lifetime);
        let key = KeyPair::generate().map_err(|e| tls_err("generate key", e))?;
        let cert = params.signed_by(&key, &self.cert, &self.key).map_err(|e| tls_err("sign certificate", e))?;
        Ok(Issued { cert_pem: cert.pem(), key_pem: key.serialize_pem() })
    }

    /// Writes `ca.pem`, `ca.key`, `node.pem`/`node.key` (every master and worker),
    /// `admin.pem`/`admin.key` (the operator) and `client.pem`/`client.key` (applications)
    /// into `dir` (keys mode 0600), and the masters' group secret for block capabilities
    /// ([`CAPABILITY_KEY`], mode 0600). Refuses to overwrite an existing CA.
    pub fn init_dir(dir: &Path, cluster: &str, node_sans: &[String]) -> Result<(), NetError> {
        if dir.join("ca.pem").exists() {
            return Err(NetError::new(
                NetErrorKind::Tls,
                format!("{} already holds a cluster CA; refusing to replace it", dir.display()),
            ));
        }
        std::fs::create_dir_all(dir).map_err(|e| tls_err("create certificate directory", e))?;
        let ca = ClusterCa::generate(cluster)?;
        write_file(&dir.join("ca.pem"), &ca.cert_pem(), false)?;
        write_file(&dir.join("ca.key"), &ca.key_pem(), true)?;
        for (file, name, role) in [
            ("node", "cv-node", CertRole::Node),
            ("admin", "cv-admin", CertRole::Admin),
            ("client", "cv-client", CertRole::Client),
        ] {
            ca.issue(name, &role, if role.is_node() { node_sans } else { &[] })?.write(dir, file)?;
        }
        write_capability_key(dir)
    }
}

/// The file of the masters' group secret in a `cvctl cert init` directory.
pub const CAPABILITY_KEY: &str = "capability.key";

/// Writes a new masters' group secret for block capabilities (`[master] capability_key`) as
/// [`CAPABILITY_KEY`] in `dir`, mode 0600, refusing to replace one.
pub fn write_capability_key(dir: &Path) -> Result<(), NetError> {
    write_file(&dir.join(CAPABILITY_KEY), &crate::capability::new_group_secret(), true)
}

impl Issued {
    /// Writes `<stem>.pem` and `<stem>.key` (mode 0600) into `dir`, refusing to overwrite.
    pub fn write(&self, dir: &Path, stem: &str) -> Result<(), NetError> {
        write_file(&dir.join(format!("{stem}.pem")), &self.cert_pem, false)?;
        write_file(&dir.join(format!("{stem}.key")), &self.key_pem, true)
    }
}

/// 16 random bytes, the top bit clear (a serial is a positive integer): unique per
/// certificate, so a revocation names exactly one.
fn random_serial() -> rcgen::SerialNumber {
    let mut b: [u8; 16] = rand::random();
    b[0] &= 0x7f;
    b[0] |= 0x01;
    rcgen::SerialNumber::from_slice(&b)
}

fn write_file(path: &Path, contents: &str, secret: bool) -> Result<(), NetError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(if secret { 0o600 } else { 0o644 })
        .open(path)
        .map_err(|e| tls_err(&format!("create {}", path.display()), e))?;
    f.write_all(contents.as_bytes()).map_err(|e| tls_err(&format!("write {}", path.display()), e))
}

/// The verified leaf certificate of a rustls/quinn peer identity.
pub fn peer_leaf(identity: Option<Box<dyn std::any::Any>>) -> Option<CertificateDer<'static>> {
    identity?.downcast::<Vec<CertificateDer<'static>>>().ok()?.into_iter().next()
}

/// A loaded identity: the CA to trust, our chain and our key.
#[derive(Debug)]
pub struct Identity {
    ca: Vec<CertificateDer<'static>>,
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
}

impl Clone for Identity {
    fn clone(&self) -> Self {
        Identity { ca: self.ca.clone(), chain: self.chain.clone(), key: self.key.clone_key() }
    }
}

impl Identity {
    /// Parses PEM strings.
    pub fn from_pem(ca_pem: &str, cert_pem: &str, key_pem: &str) -> Result<Self, NetError> {
        let certs = |pem: &str, what: &str| -> Result<Vec<CertificateDer<'static>>, NetError> {
            let v: Result<Vec<_>, _> = CertificateDer::pem_slice_iter(pem.as_bytes()).collect();
            let v = v.map_err(|e| tls_err(what, e))?;
            if v.is_empty() {
                return Err(tls_err(what, "no certificate in PEM"));
            }
            Ok(v)
        };
        Ok(Identity {
            ca: certs(ca_pem, "CA certificate")?,
            chain: certs(cert_pem, "certificate")?,
            key: PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).map_err(|e| tls_err("private key", e))?,
        })
    }

    /// Reads the files named by a [`TlsConfig`].
    pub fn load(cfg: &TlsConfig) -> Result<Self, NetError> {
        let read = |p: &Path| std::fs::read_to_string(p).map_err(|e| tls_err(&format!("read {}", p.display()), e));
        Identity::from_pem(&read(&cfg.ca)?, &read(&cfg.cert)?, &read(&cfg.key)?)
    }

    fn roots(&self) -> Result<Arc<RootCertStore>, NetError> {
        let mut roots = RootCertStore::empty();
        for c in &self.ca {
            roots.add(c.clone()).map_err(|e| tls_err("CA certificate", e))?;
        }
        Ok(Arc::new(roots))
    }

    /// rustls server config: TLS 1.3 only, ALPN `cv/1`, client certificates
    /// from the cluster CA required.
    pub fn server_config(&self) -> Result<rustls::ServerConfig, NetError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier = WebPkiClientVerifier::builder_with_provider(self.roots()?, provider.clone())
            .build()
            .map_err(|e| tls_err("client verifier", e))?;
        let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(|e| tls_err("TLS versions", e))?
            .with_client_cert_verifier(verifier)
            .with_single_cert(self.chain.clone(), self.key.clone_key())
            .map_err(|e| tls_err("server certificate", e))?;
        cfg.alpn_protocols = vec![cv_wire::ALPN.to_vec()];
        Ok(cfg)
    }

    /// rustls client config: TLS 1.3 only, ALPN `cv/1`, servers verified
    /// against the cluster CA, our certificate presented.
    pub fn client_config(&self) -> Result<rustls::ClientConfig, NetError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut cfg = rustls::ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(|e| tls_err("TLS versions", e))?
            .with_root_certificates(self.roots()?)
            .with_client_auth_cert(self.chain.clone(), self.key.clone_key())
            .map_err(|e| tls_err("client certificate", e))?;
        cfg.alpn_protocols = vec![cv_wire::ALPN.to_vec()];
        Ok(cfg)
    }
}
