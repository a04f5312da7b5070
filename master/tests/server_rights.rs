//! What a peer may do at the master follows from its certificate's role (cv_net::identity),
//! never from its hello: a client certificate that says `Admin` is refused at the hello, one
//! that says `Client` is refused every change to the cluster, and an admin certificate may
//! make them whatever its hello said. Each refusal names the right and the certificate.

mod server_support;

use cv_net::identity::CertRole;
use cv_wire::ErrorCode;
use cv_wire::msg::{
    ChangeMasters, Done, DrainWorker, Free, ListMounts, ListMountsOk, Mkdir, Mount, MountMode, Role, SyncMount, Unmount,
};
use server_support::{Harness, call, call_frame};

fn fs_mount(dir: &std::path::Path, at: &str) -> Mount {
    Mount { ufs_url: format!("fs://{}", dir.display()), cv_path: at.into(), mode: MountMode::Cache, options: vec![] }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changes_to_the_cluster_need_an_admin_certificate_whatever_the_hello_says() {
    let h = Harness::new();
    let server = h.start().await;
    let store = tempfile::tempdir().unwrap();
    std::fs::write(store.path().join("secret.key"), b"not for clients").unwrap();

    // A client certificate cannot claim the admin role.
    let e = h.connect_as(&server, CertRole::Client, Role::Admin, "evil").await.expect_err("client as admin");
    assert_eq!(e.code(), Some(ErrorCode::PermissionDenied), "{e}");
    assert!(e.message().contains("needs an admin certificate"), "{e}");
    // Nor can a node certificate.
    let e = h.connect_as(&server, CertRole::Node, Role::Admin, "evil").await.expect_err("node as admin");
    assert_eq!(e.code(), Some(ErrorCode::PermissionDenied), "{e}");

    // As a client, every change to the cluster is refused, naming the right and the certificate.
    for cert in [CertRole::Client, CertRole::Node, CertRole::Worker("test-peer".into())] {
        let c = h.connect_as(&server, cert.clone(), Role::Client, "test-peer").await.unwrap();
        let m = fs_mount(store.path(), "/x");
        let refused: Vec<(&str, Result<_, _>)> = vec![
            ("Mount", call_frame(&c, &m, &[]).await),
            ("Unmount", call_frame(&c, &Unmount { cv_path: "/x".into(), force: true }, &[]).await),
            ("SyncMount", call_frame(&c, &SyncMount { cv_path: "/x".into() }, &[]).await),
            ("Free", call_frame(&c, &Free { path: "/".into() }, &[]).await),
            ("DrainWorker", call_frame(&c, &DrainWorker { worker_id: 1, drain: true }, &[]).await),
            ("ChangeMasters", call_frame(&c, &ChangeMasters { add: false, id: 2, addr: String::new() }, &[]).await),
        ];
        for (what, r) in refused {
            let e = r.expect_err(what);
            assert_eq!(e.code(), Some(ErrorCode::PermissionDenied), "{cert}: {what}: {e}");
            assert!(e.message().contains(&format!("{what} needs an admin certificate")), "{e}");
            assert!(e.message().contains(&cert.to_string()), "the refusal names the certificate: {e}");
        }
        // Files are a client's to use.
        let _: (Done, _) =
            call(&c, &Mkdir { path: format!("/d-{}", cert.to_string().len()), parents: true, mode: 0o755 }, &[]).await;
        // Nothing changed.
        let (list, _): (ListMountsOk, _) = call(&c, &ListMounts {}, &[]).await;
        assert!(list.mounts.is_empty(), "{cert} mounted something");
    }

    // An admin certificate makes the same changes, even with a client's hello.
    for role in [Role::Admin, Role::Client] {
        let admin = h.connect_as(&server, CertRole::Admin, role, "ops").await.unwrap();
        let at = format!("/m-{role:?}");
        let _: (Done, _) = call(&admin, &fs_mount(store.path(), &at), &[]).await;
        let _: (Done, _) = call(&admin, &Unmount { cv_path: at, force: false }, &[]).await;
    }
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_named_node_certificate_speaks_only_as_its_node() {
    let h = Harness::new();
    let server = h.start().await;
    // A worker certificate may register as the worker it names, not as another, and not as a
    // master.
    h.connect_as(&server, CertRole::Worker("w7".into()), Role::Worker, "w7").await.unwrap();
    let e = h.connect_as(&server, CertRole::Worker("w7".into()), Role::Worker, "w8").await.expect_err("w7 as w8");
    assert_eq!(e.code(), Some(ErrorCode::PermissionDenied), "{e}");
    assert!(e.message().contains("may not speak as node \"w8\""), "{e}");
    let e =
        h.connect_as(&server, CertRole::Worker("w7".into()), Role::Master, "w7").await.expect_err("worker as master");
    assert_eq!(e.code(), Some(ErrorCode::PermissionDenied), "{e}");
    // Admin and client certificates are no nodes.
    for cert in [CertRole::Admin, CertRole::Client] {
        for role in [Role::Worker, Role::Master] {
            let e = h.connect_as(&server, cert.clone(), role, "n").await.expect_err("not a node");
            assert_eq!(e.code(), Some(ErrorCode::PermissionDenied), "{cert} as {role:?}: {e}");
        }
    }
    // A master certificate speaks as its master; the role-less node certificate of older
    // clusters as either.
    h.connect_as(&server, CertRole::Master("m1".into()), Role::Master, "m1").await.unwrap();
    h.connect_as(&server, CertRole::Node, Role::Master, "any").await.unwrap();
    h.connect_as(&server, CertRole::Node, Role::Worker, "any").await.unwrap();
    server.shutdown().await;
}

/// By default only buckets at their own endpoint may be mounted; whatever the operator allows,
/// never the master's own directory (its journal holds every mount's credentials).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mounts_are_limited_to_what_the_operator_allows() {
    let h = Harness::new();
    let cfg = cv_master::server::ServerConfig { mounts: Default::default(), ..h.config() };
    let server = h.start_with(&cfg, None).await;
    let admin = h.connect_as(&server, CertRole::Admin, Role::Admin, "ops").await.unwrap();
    let store = tempfile::tempdir().unwrap();
    let refused = |r: Result<cv_wire::Frame, cv_net::NetError>, why: &str| {
        let e = r.expect_err("mounted");
        assert_eq!(e.code(), Some(ErrorCode::PermissionDenied), "{e}");
        assert!(e.message().contains(why), "{e}");
    };
    refused(call_frame(&admin, &fs_mount(store.path(), "/x"), &[]).await, "not among the mountable locations");
    let imds = Mount {
        ufs_url: "s3://b".into(),
        cv_path: "/y".into(),
        mode: MountMode::Cache,
        options: vec![cv_wire::msg::KeyValue { key: "endpoint".into(), value: "http://169.254.169.254".into() }],
    };
    refused(call_frame(&admin, &imds, &[]).await, "not among the endpoints");
    let (list, _): (ListMountsOk, _) = call(&admin, &ListMounts {}, &[]).await;
    assert!(list.mounts.is_empty());
    server.shutdown().await;

    // With local directories allowed: its own journal directory, or one holding it, still not.
    let open = cv_master::server::ServerConfig {
        mounts: cv_master::server::MountPolicy { allow: vec!["fs://".into()], ..Default::default() },
        ..h.config()
    };
    let server = h.start_with(&open, None).await;
    let admin = h.connect_as(&server, CertRole::Admin, Role::Admin, "ops").await.unwrap();
    for dir in [h.journal_dir(), h.dir.path().to_path_buf()] {
        refused(call_frame(&admin, &fs_mount(&dir, "/j"), &[]).await, "the master's own files");
    }
    let _: (Done, _) = call(&admin, &fs_mount(store.path(), "/x"), &[]).await;
    server.shutdown().await;
}
