//! A C program, compiled here with the system compiler, drives the C ABI
//! against a real local cluster (master + worker, QUIC with mutual TLS,
//! O_DIRECT stores): writes, byte-exact pread and vectored pread, a Parquet
//! footer, the namespace calls, and the documented errors for a missing
//! file, reads past the end, bad arguments and bad handles.

mod common;

use common::{compile_c, lib_dir, pattern, run};
use cv_tools::cluster::{ClusterOptions, LocalCluster};
use std::process::Command;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c_program_against_a_real_cluster() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = LocalCluster::start(&ClusterOptions::ephemeral(dir.path())).await.unwrap();
    let parquet = dir.path().join("t.parquet");
    cv_benches::parquet_gen::write_file(&parquet, 2 << 20, 7).unwrap();

    let exe = compile_c("cv_test.c", dir.path(), false);
    let config = cluster.client_config().to_path_buf();
    let out = tokio::task::spawn_blocking(move || run(Command::new(exe).arg(config).arg(parquet))).await.unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("checks ok"));

    // The file the C program wrote, read back through the Rust SDK.
    let client = cluster.client().await.unwrap();
    let f = client.open("/c/sub/moved").await.unwrap();
    let mut all = vec![0u8; f.len() as usize];
    assert_eq!(f.read_at(0, &mut all).await.unwrap(), all.len());
    assert_eq!(all.len(), 9 * 1024 * 1024 + 12345);
    assert!(all.iter().enumerate().all(|(i, b)| *b == pattern(i as u64)), "bytes written through C differ");
    // The aborted writer left no visible file behind.
    let names: Vec<String> = client.list("/c").await.unwrap().into_iter().map(|s| s.path).collect();
    assert!(!names.contains(&"/c/t.parquet".to_string()), "{names:?}");
    client.close();
    cluster.shutdown().await.unwrap();
}

/// The static library links into a C program on its own.
#[test]
fn static_library_links_and_runs() {
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("cv_static");
    run(Command::new("cc")
        .args(["-std=c11", "-Wall", "-Werror", "-I"])
        .arg(common::crate_dir().join("include"))
        .arg(common::crate_dir().join("tests/c/cv_static.c"))
        .arg(lib_dir().join("libcv_capi.a"))
        .args(["-lpthread", "-ldl", "-lm", "-lrt", "-o"])
        .arg(&exe));
    let out = run(&mut Command::new(&exe));
    assert!(String::from_utf8_lossy(&out.stdout).contains("static ok"));
}
