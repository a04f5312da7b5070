//! The handle layer under concurrency, against a real local cluster: a
//! file handle closed while other threads read through it gives those
//! threads correct bytes or `BadHandle`, nothing else, and every handle is
//! freed exactly once.

mod common;

use common::pattern;
use cv_capi::{ErrorKind, ops};
use cv_tools::cluster::{ClusterOptions, LocalCluster};
use std::time::Duration;

#[test]
fn close_racing_reads_is_reported_not_crashed() {
    // The cluster runs on its own runtime; the blocking calls come from
    // plain threads, as they do from C or Java.
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cluster = rt.block_on(LocalCluster::start(&ClusterOptions::ephemeral(dir.path()))).unwrap();
    let client = ops::client_from_file(cluster.client_config().to_str().unwrap()).unwrap();

    let len = 5 << 20;
    let data: Vec<u8> = (0..len as u64).map(pattern).collect();
    let w = ops::create(client, "/race", false).unwrap();
    ops::write(w, &data).unwrap();
    assert_eq!(ops::writer_close(w).unwrap().length, len as u64);
    assert_eq!(ops::write(w, b"x").unwrap_err().kind(), ErrorKind::BadHandle);

    for round in 0..3u64 {
        let f = ops::open(client, "/race").unwrap();
        let readers: Vec<_> = (0..3u64)
            .map(|t| {
                std::thread::spawn(move || {
                    let mut reads = 0u32;
                    let mut buf = vec![0u8; 32 << 10];
                    loop {
                        let off = ((round * 7 + t * 13 + u64::from(reads) * 977) << 12) % (len as u64 - 40_000);
                        match ops::pread(f, off, &mut buf) {
                            Ok(n) => {
                                assert_eq!(n, buf.len());
                                assert!(buf.iter().zip(off..).all(|(b, i)| *b == pattern(i)), "bytes at {off}");
                                reads += 1;
                            }
                            Err(e) => {
                                assert_eq!(e.kind(), ErrorKind::BadHandle, "{e}");
                                return reads;
                            }
                        }
                    }
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(30));
        ops::file_close(f).unwrap();
        let reads: u32 = readers.into_iter().map(|h| h.join().unwrap()).sum();
        assert!(reads > 0, "round {round}: no read finished before the close");
        assert_eq!(ops::file_close(f).unwrap_err().kind(), ErrorKind::BadHandle);
    }

    ops::client_close(client).unwrap();
    assert_eq!(ops::client_close(client).unwrap_err().kind(), ErrorKind::BadHandle);
    assert_eq!(ops::live_handles(), (0, 0, 0), "every handle freed");
    rt.block_on(cluster.shutdown()).unwrap();
}
