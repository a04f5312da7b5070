//! One sample of every message kind, with values in every field, shared by the golden frames
//! (`golden.rs`) and the round trips (`frames.rs`); each test file includes this module and
//! walks the samples with its own [`Visit`].
//!
//! The values are part of the golden fixtures (`fixtures/v<version>/frames.txt`): do not edit
//! them for a version that has fixtures (add a sample instead). Values a test needs beyond
//! these (other options, bigger payloads) belong in that test, next to its check.

use cv_wire::Message;
use cv_wire::msg::*;

/// A message a sample can hold: comparable, printable (as every [`Message`] is), and owned.
pub trait Sample: Message + PartialEq + 'static {}

impl<M: Message + PartialEq + 'static> Sample for M {}

/// A check run on every sample, in the order [`visit`] gives them.
pub trait Visit {
    /// A frame of `msg` with `payload`; `streamed`, the payload's crc after the payload
    /// (`PAYLOAD_CRC_AFTER`, as a block reply sent while its bytes arrive), else in the header.
    fn sample<M: Sample>(&mut self, msg: M, payload: &[u8], streamed: bool);

    /// A frame of `msg` with `payload`, the payload's crc in the header.
    fn msg<M: Sample>(&mut self, msg: M, payload: &[u8]) {
        self.sample(msg, payload, false);
    }

    /// A frame of `msg` with `payload`, the payload's crc after the payload.
    fn streamed<M: Sample>(&mut self, msg: M, payload: &[u8]) {
        self.sample(msg, payload, true);
    }
}

/// The bytes of a frame of `msg` with `payload` as a sender writes them: header, body,
/// payload and, `streamed`, the payload's crc after it.
pub fn frame<M: Message>(msg: &M, request_id: u64, payload: &[u8], streamed: bool) -> Vec<u8> {
    let enc = if streamed {
        cv_wire::encode_streamed(msg, request_id, payload.len() as u64)
    } else {
        cv_wire::encode(msg, request_id, payload)
    }
    .expect("encode");
    let mut bytes = enc.head().to_vec();
    bytes.extend_from_slice(payload);
    if streamed {
        bytes.extend_from_slice(&cv_wire::trailer(crc32fast::hash(payload)));
    }
    bytes
}

/// Every kind, once (`ReadBlockOk` also streamed), each with the payload its frame carries.
pub fn visit(v: &mut impl Visit) {
    let kv = KeyValue { key: "region".into(), value: "us-east-1".into() };
    let mount = Mount {
        ufs_url: "s3://b/p".into(),
        cv_path: "/data".into(),
        mode: MountMode::Cache,
        options: vec![kv.clone()],
    };
    v.msg(Hello { min_version: 8, max_version: 8, role: Role::Worker, node: "worker-1".into() }, &[]);
    v.msg(HelloOk { version: 8, role: Role::Master, node: "master-1".into() }, &[]);
    v.msg(ErrorReply { code: 25, message: "not the leader".into(), redirect: Some("10.0.0.2:7700".into()) }, &[]);
    v.msg(Ping { nonce: 5 }, b"ping");
    v.msg(Pong { nonce: 5 }, b"ping");
    v.msg(Done {}, &[]);
    v.msg(Open { path: "/a/b.parquet".into() }, &[]);
    v.msg(open_ok(), b"PAR1 footer PAR1");
    v.msg(Stat { path: "/a".into() }, &[]);
    v.msg(StatOk { status: status("/a") }, &[]);
    v.msg(List { path: "/".into(), start_after: Some("b".into()), limit: 100 }, &[]);
    v.msg(ListOk { entries: vec![status("/a"), status("/b")], more: true }, &[]);
    v.msg(Mkdir { path: "/d".into(), parents: true, mode: 0o755 }, &[]);
    v.msg(Create { path: "/f".into(), overwrite: false, mode: 0o644, block_size: 1 << 20 }, &[]);
    v.msg(CreateOk { file_id: 1, block_size: 4 << 20, pin_blocks: true }, &[]);
    v.msg(AddBlock { file_id: 1, index: 2, exclude: vec![4] }, &[]);
    v.msg(AddBlockOk { block: loc(2) }, &[]);
    v.msg(
        Complete { file_id: 1, length: 10, blocks: vec![BlockLen { block_id: 1, len: 10 }], tail_offset: 0 },
        b"0123456789",
    );
    v.msg(Rename { src: "/a".into(), dst: "/b".into() }, &[]);
    v.msg(Delete { path: "/a".into(), recursive: true }, &[]);
    v.msg(Abandon { file_id: 7 }, &[]);
    v.msg(Compose { path: "/t/big".into(), sources: vec!["/u/part-1".into(), "/u/part-2".into()] }, &[]);
    let done = Complete { file_id: 1, length: 4, blocks: vec![BlockLen { block_id: 3, len: 4 }], tail_offset: 0 };
    v.msg(CompleteIf { complete: done, expect: Expect::Version { file_id: 5, version: 9 } }, b"PAR1");
    v.msg(mount.clone(), &[]);
    v.msg(Unmount { cv_path: "/data".into(), force: true }, &[]);
    v.msg(ListMounts {}, &[]);
    v.msg(
        ListMountsOk {
            mounts: vec![MountInfo {
                ufs_url: "s3://b".into(),
                cv_path: "/m".into(),
                mode: MountMode::Fs,
                options: vec![kv.clone()],
            }],
        },
        &[],
    );
    v.msg(GetMount { cv_path: "/data".into() }, &[]);
    v.msg(GetMountOk { mount }, &[]);
    v.msg(SyncMount { cv_path: "/data".into() }, &[]);
    v.msg(Free { path: "/data/x".into() }, &[]);
    v.msg(FreeOk { files: 1, blocks: 2, skipped: 3 }, &[]);
    v.msg(register_worker(), &[]);
    v.msg(RegisterOk { worker_id: 3, heartbeat_ms: 1000, keys: cap_keys() }, &[]);
    v.msg(
        Heartbeat {
            worker_id: 3,
            capacity: 10,
            used: 5,
            added: vec![BlockReport { block_id: 1, len: 2, shard: 0 }],
            removed: vec![4, 5],
            memory: TierCounters { hits: 1, misses: 2, evictions: 3, bytes_used: 4, capacity: 5 },
            disk: TierCounters { hits: 6, misses: 7, evictions: 8, bytes_used: 9, capacity: 10 },
            full: true,
            cap_keys: 7,
        },
        &[],
    );
    v.msg(
        HeartbeatOk {
            commands: vec![
                WorkerCommand::DeleteBlocks(vec![1, 2]),
                WorkerCommand::Reregister,
                WorkerCommand::Unpin(vec![3]),
                WorkerCommand::Copy(vec![CopyOrder {
                    block_id: 5,
                    len: 4096,
                    from_worker: 2,
                    from: ShardAddr::new(([10, 0, 0, 3], 7001).into()),
                }]),
                WorkerCommand::CapabilityKeys(cap_keys()),
            ],
        },
        &[],
    );
    v.msg(read_block(), &[]);
    v.msg(ReadBlockOk { block_len: 4096 }, &[7u8; 16]);
    v.streamed(ReadBlockOk { block_len: 1 << 26 }, &[9u8; 16]);
    v.msg(WriteBlock { block_id: 1, pinned: true, cap: cap(2) }, &[1u8; 16]);
    v.msg(WriteBlockOk { len: 16, crc32: 0xdead_beef }, &[]);
    v.msg(DeleteBlocks { block_ids: vec![1, 2, 3] }, &[]);
    v.msg(StatBlock { block_id: 1 }, &[]);
    v.msg(StatBlockOk { len: 1, pinned: false, in_memory: true }, &[]);
    v.msg(LocalHello {}, &[]);
    v.msg(
        LocalHelloOk { boot_id: "b7c1".into(), socket: "/data/local.sock".into(), token: vec![7; 32], shard: 1 },
        &[],
    );
    v.msg(LeaseBlock { block_id: 65_537, cap: cap(3) }, &[]);
    v.msg(
        LeaseBlockOk {
            dir: 0,
            disk_offset: 1 << 20,
            len: 70_000,
            chunk_size: 65_536,
            crcs: vec![1, 2],
            lease_ms: 5000,
        },
        &[],
    );
    v.msg(LocalOpen { token: vec![7; 32], shard: 1 }, &[]);
    v.msg(LocalOpenOk { dirs: 2 }, &[]);
    v.msg(LocalRevoke { block_id: 9 }, &[]);
    v.msg(Report {}, &[]);
    v.msg(
        ReportOk {
            workers: vec![WorkerInfo {
                worker_id: 1,
                host: "h".into(),
                shard_ports: vec![1, 2],
                capacity: 3,
                used: 1,
                live: true,
                last_heartbeat_age_ms: 10,
                memory: TierCounters::default(),
                disk: TierCounters { hits: 9, ..TierCounters::default() },
                blocks: 4,
                only_copies: 2,
                only_copy_bytes: 8 << 20,
                zone: "rack-1".into(),
                draining: true,
                replicas_owed: 3,
                bytes_to_move: 4 << 20,
            }],
            inodes: 1,
            blocks: 2,
            tail_bytes: 3,
            tail_budget: 4,
            tail_hits: 5,
            tail_misses: 6,
            export_backlog: 7,
            export_backlog_bytes: 8,
            export_lag_ms: 9,
            exported: 10,
            export_failures: 11,
            lost_files: 1,
            lost_blocks: 2,
            lost_paths: vec!["/lost/f".into()],
            replicas: 2,
            under_replicated_files: 1,
            under_replicated_blocks: 1,
            under_replicated_paths: vec!["/short/f".into()],
        },
        &[],
    );
    v.msg(DrainWorker { worker_id: 2, drain: true }, &[]);
    v.msg(ChangeMasters { add: true, id: 4, addr: "10.0.0.4:7700".into() }, &[]);
    v.msg(ListMasters {}, &[]);
    v.msg(
        ListMastersOk {
            this: 1,
            leader: Some(2),
            members: vec![MasterMember { id: 1, addr: "10.0.0.1:7700".into(), voter: true }],
            applied: Some(7),
        },
        &[],
    );
    v.msg(MasterTime {}, &[]);
    v.msg(MasterTimeOk { unix_ms: 1_764_960_000_000 }, &[]);
    v.msg(RevokeCert { serial: "7f3a09".into(), name: String::new() }, &[]);
    v.msg(RevokeCertOk { entry: revoked(), generation: 3 }, &[]);
    v.msg(ListRevoked { since: 2 }, &[]);
    v.msg(RevokedList { generation: 3, changed: true, entries: vec![revoked()] }, &[]);
    v.msg(raft_append(), &[5u8; 16]);
    v.msg(RaftAppendOk { outcome: 1, matched: Some(RaftLogId { term: 3, node: 1, index: 10 }), vote: None }, &[]);
    v.msg(RaftVoteReq { vote: vote(), last: Some(RaftLogId { term: 3, node: 1, index: 10 }) }, &[]);
    v.msg(RaftVoteOk { vote: vote(), granted: true, last: None }, &[]);
    v.msg(raft_snapshot(), &[9u8; 16]);
    v.msg(RaftSnapshotOk { vote: vote() }, &[]);
    v.msg(RaftProbe { from: 2 }, &[]);
    v.msg(RaftProbeOk { this: 1 }, &[]);
}

// The parts the samples share, and the samples `frames.rs` also round-trips with other
// values or bigger payloads.

/// A file's status, at `path`.
pub fn status(path: &str) -> FileStatus {
    FileStatus {
        id: 42,
        path: path.into(),
        kind: FileKind::File,
        length: 3 << 20,
        mtime_ms: 1_700_000_000_000,
        version: 7,
        mode: 0o644,
        complete: true,
        block_size: 4 << 20,
    }
}

/// Block `id`: lost if odd, with `id % 3` replicas.
pub fn loc(id: u64) -> BlockLoc {
    BlockLoc {
        block_id: id,
        offset: id * 4096,
        len: 4096,
        worker_id: 3,
        shard: 1,
        addr: ShardAddr::new(([127, 0, 0, 1], 7001).into()),
        lost: id % 2 == 1,
        replicas: (0..id % 3)
            .map(|r| Replica { worker_id: 4 + r, addr: ShardAddr::new(([10, 0, 0, 2], 7001).into()) })
            .collect(),
        cap: cap(id as u8),
    }
}

/// A capability whose every field is told by `n`.
pub fn cap(n: u8) -> BlockCap {
    BlockCap {
        key_id: 0x0a0b_0c00 | u32::from(n),
        expires_ms: 1_800_000_000_000 + u64::from(n),
        source: [n; 16],
        tag: [!n; 16],
    }
}

pub fn cap_keys() -> CapKeys {
    CapKeys {
        generation: 0x1122_3344_5566_7788,
        keys: (1..3u8)
            .map(|n| CapKey { key_id: u32::from(n), secret: [n; 32], not_after_ms: 1_800_000_000_000 })
            .collect(),
    }
}

pub fn ufs_ref() -> UfsRef {
    UfsRef { mount: "/data".into(), key: "t/a.parquet".into(), version: "\"etag\"".into() }
}

pub fn vote() -> RaftVote {
    RaftVote { term: 4, node: 2, committed: true }
}

pub fn open_ok() -> OpenOk {
    OpenOk {
        status: status("/a/b.parquet"),
        blocks: (0..3).map(loc).collect(),
        tail_cached: true,
        tail_offset: 9,
        ufs: Some(ufs_ref()),
    }
}

pub fn register_worker() -> RegisterWorker {
    RegisterWorker {
        worker_id: Some(3),
        host: "10.0.0.3".into(),
        shard_ports: vec![7000, 7001],
        capacity: 1 << 40,
        used: 1 << 30,
        zone: "rack-1".into(),
    }
}

pub fn read_block() -> ReadBlock {
    ReadBlock {
        block_id: 1,
        offset: 0,
        len: 4096,
        source: Some(BlockSource { object: ufs_ref(), offset: 1 << 26, len: 1 << 26 }),
        fill_only: false,
        verify: true,
        cap: cap(1),
    }
}

pub fn raft_append() -> RaftAppend {
    RaftAppend {
        vote: vote(),
        prev: Some(RaftLogId { term: 2, node: 1, index: 9 }),
        commit: Some(RaftLogId { term: 2, node: 1, index: 8 }),
        entries: 2,
    }
}

pub fn raft_snapshot() -> RaftSnapshot {
    RaftSnapshot {
        vote: vote(),
        last: Some(RaftLogId { term: 4, node: 2, index: 100 }),
        membership_log: Some(RaftLogId { term: 1, node: 1, index: 0 }),
        membership: vec![1, 2, 3],
        snapshot_id: "4-2-100".into(),
        offset: 4 << 20,
        done: false,
    }
}

fn revoked() -> RevokedCert {
    RevokedCert {
        serial: String::new(),
        name: "alice".into(),
        issued_before: 1_764_960_000,
        at_ms: 1_764_960_000_123,
        by: "operator (serial 1c)".into(),
    }
}
