//! A call whose reply is lost is retried under the same request id, on a new connection if
//! it must be, so that the master can answer the retry from its first reply instead of
//! applying the mutation twice (master/src/server/replay.rs). The master here is scripted:
//! real QUIC and TLS, the hello, then it drops the connection instead of answering the first
//! `Mkdir`.

use cv_client::{Client, ClientSettings};
use cv_net::identity::CertRole;
use cv_net::quic::TransportSettings;
use cv_net::rpc;
use cv_net::tls::{ClusterCa, Identity};
use cv_wire::msg::{Done, Role};
use cv_wire::{Kind, Limits};

fn identity(ca: &ClusterCa, usage: CertRole) -> Identity {
    let issued = ca.issue("test", &usage, &[]).unwrap();
    Identity::from_pem(&ca.cert_pem(), &issued.cert_pem, &issued.key_pem).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_retried_after_a_lost_reply_keeps_its_request_id() {
    let ca = ClusterCa::generate("retry").unwrap();
    let settings = TransportSettings::default();
    let ep = rpc::server_endpoint("127.0.0.1:0".parse().unwrap(), &identity(&ca, CertRole::Node), &settings).unwrap();
    let addr = ep.local_addr().unwrap();
    let (seen, mut mkdirs) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut lost_one = false;
        while let Some(incoming) = ep.accept().await {
            let conn = incoming.await.unwrap();
            rpc::accept_hello(&conn, Role::Master, "m", &Limits::DEFAULT).await.unwrap();
            while let Ok((mut send, mut recv)) = conn.accept_bi().await {
                let frame = rpc::read_frame(&mut recv, &Limits::DEFAULT).await.unwrap();
                let id = frame.header().request_id;
                if frame.kind() == Kind::Mkdir {
                    seen.send(id).unwrap();
                    if !lost_one {
                        lost_one = true;
                        conn.close(0u32.into(), b"reply lost");
                        break;
                    }
                }
                let reply = cv_wire::encode(&Done {}, id, &[]).unwrap();
                rpc::write_frame(&mut send, &reply, &[]).await.unwrap();
            }
        }
    });

    let client_settings = ClientSettings { master: addr, ..ClientSettings::default() };
    let client = Client::connect(client_settings, &identity(&ca, CertRole::Client), &settings).await.unwrap();
    client.mkdir("/x", false).await.unwrap();
    let (first, retry) = (mkdirs.recv().await.unwrap(), mkdirs.recv().await.unwrap());
    assert_eq!(first, retry, "the retry must carry the first attempt's request id");
    client.mkdir("/y", false).await.unwrap();
    assert_ne!(mkdirs.recv().await.unwrap(), first, "a new call gets a new id");
    client.close();
}
