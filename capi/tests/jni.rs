//! A Java program, compiled with `javac` and run with `java` (with
//! -Xcheck:jni), drives the JNI binding against a real local cluster: writes
//! from direct buffers and arrays, byte-exact positioned and vectored reads
//! into direct buffers, a Parquet footer, the namespace calls, and the
//! exception of each documented error.

mod common;

use common::{compile_java, java, pattern, run};
use cv_tools::cluster::{ClusterOptions, LocalCluster};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn java_program_against_a_real_cluster() {
    let dir = tempfile::tempdir().unwrap();
    let classes = dir.path().join("classes");
    compile_java("CvJavaTest", &classes);
    let cluster = LocalCluster::start(&ClusterOptions::ephemeral(dir.path())).await.unwrap();
    let parquet = dir.path().join("t.parquet");
    cv_benches::parquet_gen::write_file(&parquet, 2 << 20, 11).unwrap();

    let config = cluster.client_config().to_path_buf();
    let out = tokio::task::spawn_blocking(move || run(java("CvJavaTest", &classes, true).arg(config).arg(parquet)))
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("checks ok"), "{stdout}");
    // -Xcheck:jni reports misuse as warnings rather than failures.
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("WARNING in native method"), "{stderr}");

    // What Java wrote, read through the Rust SDK.
    let client = cluster.client().await.unwrap();
    let f = client.open("/j/sub/moved").await.unwrap();
    let mut all = vec![0u8; f.len() as usize];
    assert_eq!(f.read_at(0, &mut all).await.unwrap(), 9 * 1024 * 1024 + 12345);
    assert!(all.iter().enumerate().all(|(i, b)| *b == pattern(i as u64)), "bytes written through JNI differ");
    client.close();
    cluster.shutdown().await.unwrap();
}
