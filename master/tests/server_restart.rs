//! A master restarted on the same journal directory keeps every acknowledged mutation, and
//! tells workers it does not know to register again.

mod server_support;

use cv_wire::msg::*;
use server_support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_keeps_acknowledged_mutations_and_asks_strangers_to_reregister() {
    let h = Harness::new();
    let server = h.start().await;
    let worker = h.connect(&server, Role::Worker).await;
    let reg = RegisterWorker {
        worker_id: None,
        host: "127.0.0.1".into(),
        shard_ports: vec![7001],
        capacity: 1 << 30,
        used: 0,
        zone: String::new(),
    };
    let (registered, _): (RegisterOk, _) = call(&worker, &reg, &[]).await;
    let c = h.connect(&server, Role::Client).await;

    // Acknowledged mutations, issued concurrently so they share group commits.
    let _: (Done, _) = call(&c, &Mkdir { path: "/d".into(), parents: false, mode: 0o755 }, &[]).await;
    let mut tasks = Vec::new();
    for i in 0..24u32 {
        let c = c.clone();
        tasks.push(tokio::spawn(async move {
            let path = format!("/d/f{i:02}");
            let (cr, _): (CreateOk, _) =
                call(&c, &Create { path: path.clone(), overwrite: false, mode: 0o644, block_size: 0 }, &[]).await;
            let bytes = parquet_bytes(1000 + i as usize, 50);
            let (ab, _): (AddBlockOk, _) =
                call(&c, &AddBlock { file_id: cr.file_id, index: 0, exclude: vec![] }, &[]).await;
            let len = bytes.len() as u64;
            let done = Complete {
                file_id: cr.file_id,
                length: len,
                blocks: vec![BlockLen { block_id: ab.block.block_id, len }],
                tail_offset: 0,
            };
            let _: (Done, _) = call(&c, &done, &bytes).await;
            (path, cr.file_id, len)
        }));
    }
    let mut files = Vec::new();
    for t in tasks {
        files.push(t.await.unwrap());
    }
    let _: (Done, _) = call(&c, &Rename { src: "/d/f00".into(), dst: "/moved".into() }, &[]).await;
    let _: (Done, _) = call(&c, &Delete { path: "/d/f01".into(), recursive: false }, &[]).await;
    server.shutdown().await;
    assert!(c.call(&Ping { nonce: 1 }, &[]).await.is_err(), "the old server still answers");

    let server = h.start().await;
    let c = h.connect(&server, Role::Client).await;
    for (path, id, len) in &files[2..] {
        let (st, _): (StatOk, _) = call(&c, &Stat { path: path.clone() }, &[]).await;
        assert_eq!((st.status.id, st.status.length, st.status.complete), (*id, *len, true), "{path}");
    }
    let (st, _): (StatOk, _) = call(&c, &Stat { path: "/moved".into() }, &[]).await;
    assert_eq!(st.status.id, files[0].1);
    assert_eq!(call_err(&c, &Stat { path: "/d/f00".into() }).await, cv_wire::ErrorCode::NotFound);
    assert_eq!(call_err(&c, &Stat { path: "/d/f01".into() }).await, cv_wire::ErrorCode::NotFound);
    // The tail cache came back from the `tails` file the clean stop saved: f05's footer is in
    // the open reply, byte for byte.
    let (open, tail): (OpenOk, _) = call(&c, &Open { path: "/d/f05".into() }, &[]).await;
    let f05 = parquet_bytes(1005, 50);
    assert!(open.tail_cached && !tail.is_empty(), "the tail was not taken back");
    assert_eq!(&f05[f05.len() - tail.len()..], &tail[..]);
    assert_eq!(open.blocks.len(), 1);
    // Without the file (a crash before the first save), open says "read the footer from the
    // workers".
    server.shutdown().await;
    std::fs::remove_file(h.journal_dir().join("tails")).unwrap();
    let server = h.start().await;
    let c = h.connect(&server, Role::Client).await;
    let (open, tail): (OpenOk, _) = call(&c, &Open { path: "/d/f05".into() }, &[]).await;
    assert!(!open.tail_cached && tail.is_empty());

    // The registered worker is remembered; an id this master never gave out is told to register.
    let worker = h.connect(&server, Role::Worker).await;
    let hb = |worker_id| Heartbeat {
        worker_id,
        capacity: 1 << 30,
        used: 0,
        added: vec![],
        removed: vec![],
        memory: Default::default(),
        disk: Default::default(),
        full: false,
        cap_keys: 0,
    };
    let (ok, _): (HeartbeatOk, _) = call(&worker, &hb(registered.worker_id), &[]).await;
    assert!(!ok.commands.contains(&WorkerCommand::Reregister), "{:?}", ok.commands);
    let (ok, _): (HeartbeatOk, _) = call(&worker, &hb(registered.worker_id + 1000), &[]).await;
    assert_eq!(ok.commands, vec![WorkerCommand::Reregister]);
    server.shutdown().await;

    // A master that lost its journal (a new directory) knows no worker at all.
    let fresh = h.dir.path().join("other");
    let server = h.start_with(&config_in(&fresh), None).await;
    let worker = h.connect(&server, Role::Worker).await;
    let (ok, _): (HeartbeatOk, _) = call(&worker, &hb(registered.worker_id), &[]).await;
    assert_eq!(ok.commands, vec![WorkerCommand::Reregister]);
    let (again, _): (RegisterOk, _) =
        call(&worker, &RegisterWorker { worker_id: Some(registered.worker_id), ..reg }, &[]).await;
    assert!(again.worker_id > 0);
    // Registered again, it holds the new master's capability keys: nothing to do.
    let beat = Heartbeat { cap_keys: again.keys.generation, ..hb(again.worker_id) };
    let (ok, _): (HeartbeatOk, _) = call(&worker, &beat, &[]).await;
    assert!(ok.commands.is_empty(), "{:?}", ok.commands);
    server.shutdown().await;
}
