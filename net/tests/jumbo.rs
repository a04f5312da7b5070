//! Jumbo datagrams on loopback: a connection between two cv endpoints (quinn on tokio) finds
//! the configured `max_udp_payload` by MTU discovery and moves bulk data without losing
//! packets. quinn alone builds 10-datagram GSO batches, which at 8952 bytes exceed one UDP
//! send; the kernel refuses them and every full batch is lost.

mod common;

use common::identity;
use cv_net::identity::CertRole;
use cv_net::quic::TransportSettings;
use cv_net::rpc;
use cv_net::tls::{ClusterCa, SERVER_NAME};
use std::time::Duration;

const BULK: usize = 32 << 20;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bulk_transfer_at_jumbo_mtu_loses_no_packets() {
    let ca = ClusterCa::generate("jumbo").unwrap();
    let settings = TransportSettings::default();
    assert!(settings.udp_payload() > 8000, "the default is a jumbo payload");
    let server =
        rpc::server_endpoint("127.0.0.1:0".parse().unwrap(), &identity(&ca, CertRole::Node), &settings).unwrap();
    let addr = server.local_addr().unwrap();
    let sender = tokio::spawn(async move {
        let conn = server.accept().await.unwrap().await.unwrap();
        let (mut send, _recv) = conn.accept_bi().await.unwrap();
        let data = vec![0xa5u8; BULK];
        send.write_all(&data).await.unwrap();
        send.finish().unwrap();
        conn.closed().await;
        conn.stats()
    });

    let client = rpc::client_endpoint(&identity(&ca, CertRole::Client), &settings).unwrap();
    let conn = client.connect(addr, SERVER_NAME).unwrap().await.unwrap();
    // Let MTU discovery finish before the bulk transfer starts.
    let (mut send, mut recv) = conn.open_bi().await.unwrap();
    send.write_all(b"go").await.unwrap();
    for _ in 0..100 {
        if conn.stats().path.current_mtu >= 8000 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let got = recv.read_to_end(BULK + 1).await.unwrap();
    assert_eq!(got.len(), BULK);
    conn.close(0u32.into(), b"done");
    let sent = sender.await.unwrap();
    client.wait_idle().await;
    assert!(sent.path.current_mtu >= 8000, "MTU discovery stopped at {}", sent.path.current_mtu);
    // A few may be lost to a full socket buffer; a lost GSO batch loses hundreds.
    assert!(
        sent.path.lost_packets <= 32,
        "{} of {} packets lost sending {BULK} bytes",
        sent.path.lost_packets,
        sent.path.sent_packets
    );
}
