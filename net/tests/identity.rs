//! Certificates say what their holder may do: the role URI goes in when issued and comes
//! back out of the verified certificate; certificates from before roles keep a meaning; a CA
//! reloaded from its files issues certificates peers of the original trust.

mod common;

use common::PingService;
use cv_net::identity::{CertRole, PeerCert};
use cv_net::quic::TransportSettings;
use cv_net::rpc::{self, Conn};
use cv_net::tls::{ClusterCa, Identity};
use cv_wire::Limits;
use cv_wire::msg::Role;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

fn now() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs() as i64
}

#[test]
fn an_issued_role_reads_back_with_its_serial_and_end() {
    let ca = ClusterCa::generate("t").unwrap();
    let mut serials = std::collections::HashSet::new();
    for role in [CertRole::Admin, CertRole::Client, CertRole::Worker("w1".into()), CertRole::Master("m1".into())] {
        let issued = ca.issue_for("holder", &role, &[], Duration::from_secs(3 * 86_400)).unwrap();
        let cert = PeerCert::from_pem(&issued.cert_pem).unwrap();
        assert_eq!(cert.role, role);
        assert_eq!(cert.name, "holder");
        assert!(cert.serial.len() >= 16, "serial {}", cert.serial);
        assert!(serials.insert(cert.serial.clone()), "serials repeat");
        let end = now() + 3 * 86_400;
        assert!((cert.not_after - end).abs() < 120, "ends at {} not {end}", cert.not_after);
    }
    // Default lifetimes: a year for nodes, 90 days for people and applications.
    let node = PeerCert::from_pem(&ca.issue("n", &CertRole::Worker("n".into()), &[]).unwrap().cert_pem).unwrap();
    assert!((node.not_after - (now() + 365 * 86_400)).abs() < 120);
    let client = PeerCert::from_pem(&ca.issue("c", &CertRole::Client, &[]).unwrap().cert_pem).unwrap();
    assert!((client.not_after - (now() + 90 * 86_400)).abs() < 120);
}

/// Certificates as clusters made them before roles: no role URI.
fn roleless(names: Vec<String>) -> String {
    let key = rcgen::KeyPair::generate().unwrap();
    rcgen::CertificateParams::new(names).unwrap().self_signed(&key).unwrap().pem()
}

/// A certificate with the given URIs among its names (parsing does not check the signature).
fn with_uris(names: Vec<String>, uris: &[&str]) -> String {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut p = rcgen::CertificateParams::new(names).unwrap();
    for u in uris {
        p.subject_alt_names.push(rcgen::SanType::URI((*u).try_into().unwrap()));
    }
    p.self_signed(&key).unwrap().pem()
}

#[test]
fn certificates_from_before_roles_and_bad_roles() {
    let node = PeerCert::from_pem(&roleless(vec![cv_net::tls::SERVER_NAME.into()])).unwrap();
    assert_eq!(node.role, CertRole::Node);
    assert!(node.role.may_work() && node.role.may_lead() && !node.role.is_admin());
    // The old client certificate was every operator's: it is now a client's, no more.
    let old_client = PeerCert::from_pem(&roleless(vec![cv_net::tls::CLIENT_NAME.into()])).unwrap();
    assert_eq!(old_client.role, CertRole::Client);
    assert!(!old_client.role.is_admin() && !old_client.role.may_work());

    let client_names = || vec![cv_net::tls::CLIENT_NAME.to_string()];
    let e = PeerCert::from_pem(&with_uris(client_names(), &["cv://role/root"])).unwrap_err();
    assert!(e.to_string().contains("no such role"), "{e}");
    let e = PeerCert::from_pem(&with_uris(client_names(), &["cv://role/client", "cv://role/admin"])).unwrap_err();
    assert!(e.to_string().contains("more than one role"), "{e}");
    // A node role on a certificate that cannot serve is refused, not taken as a client.
    let e = PeerCert::from_pem(&with_uris(client_names(), &["cv://role/worker/w1"])).unwrap_err();
    assert!(e.to_string().contains("without the server name"), "{e}");
    // Other URIs are no roles.
    let plain = PeerCert::from_pem(&with_uris(client_names(), &["https://example.com/x"])).unwrap();
    assert_eq!(plain.role, CertRole::Client);
}

#[tokio::test]
async fn a_reloaded_ca_issues_what_the_original_trusts() {
    let ca = ClusterCa::generate("t").unwrap();
    let server_id = {
        let node = ca.issue("server", &CertRole::Node, &[]).unwrap();
        Identity::from_pem(&ca.cert_pem(), &node.cert_pem, &node.key_pem).unwrap()
    };
    let ep = rpc::server_endpoint("127.0.0.1:0".parse().unwrap(), &server_id, &TransportSettings::default()).unwrap();
    let addr = ep.local_addr().unwrap();
    tokio::spawn(rpc::serve(ep, std::sync::Arc::new(PingService), Role::Master, "m".into(), Limits::DEFAULT));
    // `cvctl cert issue` loads ca.pem and ca.key again, in another process, maybe months later.
    let again = ClusterCa::from_pem(&ca.cert_pem(), &ca.key_pem()).unwrap();
    let admin = again.issue("ops", &CertRole::Admin, &[]).unwrap();
    let id = Identity::from_pem(&ca.cert_pem(), &admin.cert_pem, &admin.key_pem).unwrap();
    let ep = rpc::client_endpoint(&id, &TransportSettings::default()).unwrap();
    let conn = Conn::connect(&ep, addr, Role::Admin, "ops", Limits::DEFAULT).await.unwrap();
    assert_eq!(conn.peer_role(), Role::Master);
    // A key that is not the CA's is refused.
    let other = ClusterCa::generate("other").unwrap();
    assert!(ClusterCa::from_pem(&ca.cert_pem(), &other.key_pem()).is_err(), "a foreign key passed as the CA's");
}

/// A certificate past its end is refused at the handshake; the one issued to renew it (same
/// name, a new serial) is taken at once, by the same server, with no restart.
#[tokio::test]
async fn an_expired_certificate_is_refused_and_its_renewal_taken() {
    let ca = ClusterCa::generate("t").unwrap();
    let addr = common::serve_pings(&ca);
    let dial = |lifetime: Duration| {
        let issued = ca.issue_for("app", &CertRole::Client, &[], lifetime).unwrap();
        let id = Identity::from_pem(&ca.cert_pem(), &issued.cert_pem, &issued.key_pem).unwrap();
        let ep = rpc::client_endpoint(&id, &TransportSettings::default()).unwrap();
        async move { Conn::connect(&ep, addr, Role::Client, "app", Limits::DEFAULT).await }
    };
    let short = dial(Duration::from_secs(1));
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let e = short.await.unwrap_err();
    assert_eq!(e.kind(), cv_net::NetErrorKind::Tls, "{e}");
    assert!(e.to_string().contains("has expired"), "{e}");
    dial(Duration::from_secs(3600)).await.unwrap();
}
