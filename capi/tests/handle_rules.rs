//! What an independent test of the bindings found (issue 22), against a real local cluster
//! over QUIC: calls on files of a closed client fail at once with `BadHandle` (tail reads
//! too); an aborted writer's file is gone; a certificate from another CA, a worker's address
//! given as the master, and an over-long path are permanent errors of the right kind; closing
//! a writer of a closed client frees it all the same (issue 40).

mod common;

use cv_capi::{ErrorKind, ops};
use cv_client::ErrorKind as K;
use cv_tools::cluster::{ClusterOptions, LocalCluster};
use std::time::{Duration, Instant};

fn toml(certs: &std::path::Path, master: std::net::SocketAddr) -> String {
    let p = |f: &str| certs.join(f).display().to_string();
    format!(
        "[tls]\nca = \"{}\"\ncert = \"{}\"\nkey = \"{}\"\n[client]\nmaster = \"{master}\"\ndeadline = \"5s\"\n",
        p("ca.pem"),
        p("client.pem"),
        p("client.key")
    )
}

#[test]
fn closed_clients_aborted_writers_and_bad_peers_fail_as_they_should() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cluster = rt.block_on(LocalCluster::start(&ClusterOptions::ephemeral(dir.path()))).unwrap();
    let config = cluster.client_config().to_str().unwrap().to_string();
    let client = ops::client_from_file(&config).unwrap();

    // A file with a tail in memory and a block before it.
    let data: Vec<u8> = (0..(5u64 << 20)).map(common::pattern).collect();
    let w = ops::create(client, "/f", false).unwrap();
    ops::write(w, &data).unwrap();
    ops::writer_close(w).unwrap();
    let f = ops::open(client, "/f").unwrap();
    let info = ops::file_info(f).unwrap();
    assert!(info.tail_offset < info.length, "no tail came with the open");

    // An aborted writer's file is gone: not listed, not there to stat or open.
    let w = ops::create(client, "/aborted", false).unwrap();
    ops::write(w, b"half").unwrap();
    ops::writer_abort(w).unwrap();
    assert_eq!(ops::stat(client, "/aborted").unwrap_err().kind(), ErrorKind::Client(K::NotFound));
    assert!(ops::list(client, "/").unwrap().iter().all(|s| s.path != "/aborted"), "the aborted file is listed");
    assert_eq!(ops::open(client, "/aborted").unwrap_err().kind(), ErrorKind::Client(K::NotFound));

    // A path over the limit is an invalid path, not a protocol error.
    let long = format!("/{}", "x".repeat(5000));
    assert_eq!(ops::stat(client, &long).unwrap_err().kind(), ErrorKind::Client(K::InvalidPath));
    assert_eq!(ops::create(client, &long, false).unwrap_err().kind(), ErrorKind::Client(K::InvalidPath));

    // After the client closes, its file's calls fail at once: the tail (no round trip) and
    // the blocks alike.
    let w2 = ops::create(client, "/open-writer", false).unwrap();
    let w3 = ops::create(client, "/unclosed-writer", false).unwrap();
    ops::write(w3, &data[..1 << 20]).unwrap();
    ops::client_close(client).unwrap();
    let mut buf = vec![0u8; 100];
    let t = Instant::now();
    assert_eq!(ops::pread(f, info.tail_offset, &mut buf).unwrap_err().kind(), ErrorKind::BadHandle);
    assert_eq!(ops::pread(f, 0, &mut buf).unwrap_err().kind(), ErrorKind::BadHandle);
    assert_eq!(ops::file_info(f).unwrap_err().kind(), ErrorKind::BadHandle);
    assert_eq!(ops::write(w2, b"x").unwrap_err().kind(), ErrorKind::BadHandle);
    assert!(t.elapsed() < Duration::from_millis(500), "calls after close took {:?}", t.elapsed());
    ops::file_close(f).unwrap();
    assert_eq!(ops::writer_abort(w2).unwrap_err().kind(), ErrorKind::BadHandle);
    // Closing a writer of a closed client fails, and still frees the handle and its block
    // buffer (cv.h: "frees the handle even when it fails"): a second close finds nothing.
    assert_eq!(ops::live_handles().2, 1, "the writer made before the client closed");
    assert_eq!(ops::writer_close(w3).unwrap_err().kind(), ErrorKind::BadHandle);
    assert_eq!(ops::live_handles().2, 0, "a failed close kept the writer and its buffers");
    let e = ops::writer_close(w3).unwrap_err();
    assert!(e.message().contains("closed or was never opened"), "{e}");

    // A certificate from another CA: a configuration error, not retried.
    let other = dir.path().join("other-ca");
    cv_net::tls::ClusterCa::init_dir(&other, "other", &["localhost".into(), "127.0.0.1".into()]).unwrap();
    let t = Instant::now();
    let e = ops::client_from_toml(&toml(&other, cluster.master_addr())).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Client(K::Config), "{e}");
    assert!(e.to_string().contains("TLS handshake was refused"), "{e}");
    assert!(t.elapsed() < Duration::from_secs(3), "the refused handshake was retried for {:?}", t.elapsed());

    // A worker's shard given as the master: its hello says what it is.
    let shard = cluster.shard_addrs()[0];
    let e = ops::client_from_toml(&toml(&dir.path().join("certs"), shard)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Client(K::Config), "{e}");
    assert!(e.to_string().contains("not as a master"), "{e}");

    assert_eq!(ops::live_handles(), (0, 0, 0), "every handle freed");
    rt.block_on(cluster.shutdown()).unwrap();
}
