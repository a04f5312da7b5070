//! cv's Hadoop FileSystem (`capi/hadoop/`, issue 22) on a real local cluster: cv-hadoop.jar is
//! built by `scripts/build-hadoop-jar` against the Hadoop client jars from the pyspark sdist
//! (`scripts/install-hadoop-jars`), and a Java program (`tests/java/CvHadoopContract.java`)
//! runs contract checks modelled on Hadoop's through `FileSystem.newInstance("cv://…")`,
//! which finds the class by its scheme (META-INF/services), and through FileContext
//! (`CvAbstractFileSystem`): openFile() options, read-ahead, IOStatistics, `fs.cv.*` keys; and
//! what issue 40 found (`tests/java/Issue40.java`): paths below a file, setTimes and co, append,
//! the block size, `-df`, open of a file being written, FileContexts' native clients.

mod common;

use common::{crate_dir, hadoop_jar, hadoop_jars, run, shared_lib};
use cv_tools::cluster::{ClusterOptions, LocalCluster};
use std::path::PathBuf;
use std::process::Command;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hadoop_loads_cv_by_scheme_and_keeps_its_contract() {
    let jars = hadoop_jars();
    let dir = tempfile::tempdir().unwrap();
    let jar = hadoop_jar(dir.path());
    let classes = dir.path().join("classes");
    let mut cp: Vec<PathBuf> = jars.clone();
    cp.push(jar.clone());
    let cp = std::env::join_paths(&cp).unwrap();
    run(Command::new("javac")
        .args(["-Xlint:all", "-Werror", "-d"])
        .arg(&classes)
        .arg("-cp")
        .arg(&cp)
        .arg(crate_dir().join("tests/java/CvHadoopContract.java"))
        .arg(crate_dir().join("tests/java/Issue40.java")));

    let cluster = LocalCluster::start(&ClusterOptions::ephemeral(dir.path())).await.unwrap();
    let config = cluster.client_config().to_path_buf();
    // The same settings as fs.cv.* keys, for the checks that give no file.
    let cfg = cv_client::ClientConfig::load(&config).unwrap();
    let keys: Vec<String> = [cfg.client.master.to_string()]
        .into_iter()
        .chain([&cfg.tls.ca, &cfg.tls.cert, &cfg.tls.key].map(|p| p.display().to_string()))
        .collect();
    let mut full = jars;
    full.push(jar);
    full.push(classes);
    let full = std::env::join_paths(&full).unwrap();
    let out = tokio::task::spawn_blocking(move || {
        run(Command::new("java")
            .arg(format!("-Dcv.native.library={}", shared_lib().display()))
            .arg("-cp")
            .arg(full)
            .arg("CvHadoopContract")
            .arg(config)
            .args(keys))
    })
    .await
    .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("hadoop contract ok"));

    // What Hadoop left behind, through the Rust SDK: the refused rename's source, intact.
    let client = cluster.client().await.unwrap();
    let f = client.open("/hc/other").await.unwrap();
    assert_eq!(f.len(), 1);
    assert!(client.stat("/hc/d").await.is_err(), "the recursively deleted directory is still there");
    client.close();
    cluster.shutdown().await.unwrap();
}
