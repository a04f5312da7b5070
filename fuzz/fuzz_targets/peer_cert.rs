//! A peer's certificate as the servers read its role, name, serial and expiry
//! (`cv_net::identity::PeerCert::parse`). rustls has verified the chain by then, but the parse
//! must hold for any bytes: it never panics, and a role it returns is one a URI can carry.
#![no_main]
use cv_net::identity::{CertRole, PeerCert};
use libfuzzer_sys::fuzz_target;
use rustls_pki_types::CertificateDer;

fuzz_target!(|data: &[u8]| {
    if let Ok(cert) = PeerCert::parse(&CertificateDer::from(data)) {
        if let Some(uri) = cert.role.uri() {
            assert_eq!(CertRole::from_uri(&uri).as_ref(), Ok(&cert.role));
        }
    }
});
