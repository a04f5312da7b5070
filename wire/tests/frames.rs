//! Round trips of every message, and refusal of damaged frames.

use cv_wire::msg::*;
use cv_wire::{
    Frame, HEADER_LEN, Kind, Limits, Message, TRAILER_LEN, WireErrorKind, encode, encode_streamed, encode_with,
    encode_with_crc, trailer,
};
use std::collections::HashSet;

fn status(path: &str) -> FileStatus {
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

fn loc(id: u64) -> BlockLoc {
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
    }
}

/// Encodes, decodes, validates and copies back; returns the kind exercised.
fn round_trip<M: Message + PartialEq + Clone>(msg: M, payload: &[u8]) -> Kind {
    let enc = encode(&msg, 99, payload).expect("encode");
    let mut wire = enc.head().to_vec();
    wire.extend_from_slice(payload);
    let frame = Frame::decode(&wire, &Limits::DEFAULT).expect("decode");
    assert_eq!(frame.kind(), M::KIND);
    assert_eq!(frame.header().request_id, 99);
    assert_eq!(frame.payload(), payload);
    let back: M = frame.decode_body().expect("body");
    assert_eq!(back, msg);
    M::KIND
}

#[test]
fn every_message_round_trips() {
    let tail = vec![0xAB; 64 << 10];
    let kv = KeyValue { key: "region".into(), value: "us-east-1".into() };
    let kinds = [
        round_trip(Hello { min_version: 1, max_version: 1, role: Role::Client, node: "n".into() }, &[]),
        round_trip(HelloOk { version: 1, role: Role::Master, node: "m".into() }, &[]),
        round_trip(ErrorReply { code: 19, message: "moved".into(), redirect: Some("h:1".into()) }, &[]),
        round_trip(Ping { nonce: 5 }, &[]),
        round_trip(Pong { nonce: 5 }, &[]),
        round_trip(Done {}, &[]),
        round_trip(Open { path: "/a/b.parquet".into() }, &[]),
        round_trip(
            OpenOk {
                status: status("/a"),
                blocks: (0..3).map(loc).collect(),
                tail_cached: true,
                tail_offset: 9,
                ufs: Some(ufs_ref()),
            },
            &tail,
        ),
        round_trip(Stat { path: "/a".into() }, &[]),
        round_trip(StatOk { status: status("/a") }, &[]),
        round_trip(List { path: "/".into(), start_after: Some("b".into()), limit: 100 }, &[]),
        round_trip(ListOk { entries: vec![status("/a"), status("/b")], more: true }, &[]),
        round_trip(Mkdir { path: "/d".into(), parents: true, mode: 0o755 }, &[]),
        round_trip(Create { path: "/f".into(), overwrite: false, mode: 0o644, block_size: 0 }, &[]),
        round_trip(CreateOk { file_id: 1, block_size: 4 << 20, pin_blocks: true }, &[]),
        round_trip(AddBlock { file_id: 1, index: 0, exclude: vec![4] }, &[]),
        round_trip(AddBlockOk { block: loc(1) }, &[]),
        round_trip(
            Complete { file_id: 1, length: 10, blocks: vec![BlockLen { block_id: 1, len: 10 }], tail_offset: 0 },
            b"0123456789",
        ),
        round_trip(Rename { src: "/a".into(), dst: "/b".into() }, &[]),
        round_trip(Delete { path: "/a".into(), recursive: true }, &[]),
        round_trip(
            Mount {
                ufs_url: "s3://b/p".into(),
                cv_path: "/m".into(),
                mode: MountMode::Cache,
                options: vec![kv.clone()],
            },
            &[],
        ),
        round_trip(Unmount { cv_path: "/m".into(), force: true }, &[]),
        round_trip(ListMounts {}, &[]),
        round_trip(
            ListMountsOk {
                mounts: vec![MountInfo {
                    ufs_url: "s3://b".into(),
                    cv_path: "/m".into(),
                    mode: MountMode::Fs,
                    options: vec![kv.clone()],
                }],
            },
            &[],
        ),
        round_trip(
            RegisterWorker {
                worker_id: None,
                host: "127.0.0.1".into(),
                shard_ports: vec![7000, 7001],
                capacity: 1,
                used: 0,
                zone: String::new(),
            },
            &[],
        ),
        round_trip(RegisterOk { worker_id: 3, heartbeat_ms: 1000 }, &[]),
        round_trip(
            Heartbeat {
                worker_id: 3,
                capacity: 10,
                used: 5,
                added: vec![BlockReport { block_id: 1, len: 2, shard: 0 }],
                removed: vec![4, 5],
                memory: TierCounters { hits: 1, misses: 2, evictions: 3, bytes_used: 4, capacity: 5 },
                disk: TierCounters::default(),
                full: true,
            },
            &[],
        ),
        round_trip(
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
                ],
            },
            &[],
        ),
        round_trip(ReadBlock { block_id: 1, offset: 0, len: 4096, source: None, fill_only: false, verify: true }, &[]),
        round_trip(
            ReadBlock {
                block_id: 1,
                offset: 0,
                len: 0,
                source: Some(BlockSource { object: ufs_ref(), offset: 1 << 26, len: 1 << 26 }),
                fill_only: true,
                verify: false,
            },
            &[],
        ),
        round_trip(GetMount { cv_path: "/data".into() }, &[]),
        round_trip(
            GetMountOk {
                mount: Mount {
                    ufs_url: "s3://b/p".into(),
                    cv_path: "/data".into(),
                    mode: MountMode::Cache,
                    options: vec![kv.clone()],
                },
            },
            &[],
        ),
        round_trip(SyncMount { cv_path: "/data".into() }, &[]),
        round_trip(Free { path: "/data/x".into() }, &[]),
        round_trip(FreeOk { files: 1, blocks: 2, skipped: 3 }, &[]),
        round_trip(ReadBlockOk { block_len: 4096 }, &[7u8; 4096]),
        round_trip(WriteBlock { block_id: 1, pinned: true }, &[1u8; 5000]),
        round_trip(WriteBlockOk { len: 5000, crc32: 0xdead_beef }, &[]),
        round_trip(DeleteBlocks { block_ids: vec![1, 2, 3] }, &[]),
        round_trip(StatBlock { block_id: 1 }, &[]),
        round_trip(StatBlockOk { len: 1, pinned: false, in_memory: true }, &[]),
        round_trip(LocalHello {}, &[]),
        round_trip(
            LocalHelloOk { boot_id: "b7c1".into(), socket: "/data/local.sock".into(), token: vec![7; 32], shard: 1 },
            &[],
        ),
        round_trip(LeaseBlock { block_id: 65_537 }, &[]),
        round_trip(
            LeaseBlockOk {
                dir: 0,
                disk_offset: 1 << 20,
                len: 70_000,
                chunk_size: 65_536,
                crcs: vec![1, 2],
                lease_ms: 5000,
            },
            &[],
        ),
        round_trip(LocalOpen { token: vec![7; 32], shard: 1 }, &[]),
        round_trip(LocalOpenOk { dirs: 2 }, &[]),
        round_trip(LocalRevoke { block_id: 9 }, &[]),
        round_trip(Report {}, &[]),
        round_trip(
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
        ),
        round_trip(DrainWorker { worker_id: 2, drain: true }, &[]),
        round_trip(
            RaftAppend {
                vote: RaftVote { term: 3, node: 1, committed: true },
                prev: Some(RaftLogId { term: 2, node: 1, index: 9 }),
                commit: None,
                entries: 2,
            },
            &[5u8; 300],
        ),
        round_trip(
            RaftAppendOk { outcome: 1, matched: Some(RaftLogId { term: 3, node: 1, index: 10 }), vote: None },
            &[],
        ),
        round_trip(RaftVoteReq { vote: RaftVote { term: 4, node: 2, committed: false }, last: None }, &[]),
        round_trip(
            RaftVoteOk { vote: RaftVote { term: 4, node: 2, committed: false }, granted: true, last: None },
            &[],
        ),
        round_trip(
            RaftSnapshot {
                vote: RaftVote { term: 4, node: 2, committed: true },
                last: Some(RaftLogId { term: 4, node: 2, index: 100 }),
                membership_log: Some(RaftLogId { term: 1, node: 1, index: 0 }),
                membership: vec![1, 2, 3],
                snapshot_id: "4-2-100".into(),
                offset: 4 << 20,
                done: false,
            },
            &[9u8; 1000],
        ),
        round_trip(ChangeMasters { add: true, id: 4, addr: "10.0.0.4:7700".into() }, &[]),
        round_trip(ListMasters {}, &[]),
        round_trip(MasterTime {}, &[]),
        round_trip(MasterTimeOk { unix_ms: 1_764_960_000_000 }, &[]),
        round_trip(
            ListMastersOk {
                this: 1,
                leader: Some(2),
                members: vec![MasterMember { id: 1, addr: "a:1".into(), voter: true }],
                applied: Some(7),
            },
            &[],
        ),
        round_trip(RaftSnapshotOk { vote: RaftVote { term: 4, node: 2, committed: true } }, &[]),
    ];
    let seen: HashSet<Kind> = kinds.into_iter().collect();
    for k in Kind::ALL {
        assert!(seen.contains(k), "no round-trip test for {}", k.name());
    }
}

fn ufs_ref() -> UfsRef {
    UfsRef { mount: "/data".into(), key: "t/a.parquet".into(), version: "\"etag\"".into() }
}

fn open_frame() -> Vec<u8> {
    let msg = OpenOk {
        status: status("/t.parquet"),
        blocks: (0..4).map(loc).collect(),
        tail_cached: true,
        tail_offset: 1,
        ufs: None,
    };
    let payload = vec![0x5A; 1000];
    let enc = encode(&msg, 1, &payload).unwrap();
    let mut wire = enc.head().to_vec();
    wire.extend_from_slice(&payload);
    wire
}

fn err_kind(bytes: &[u8], limits: &Limits) -> WireErrorKind {
    match Frame::decode(bytes, limits) {
        Ok(f) => f.access::<OpenOk>().map(|_| ()).expect_err("damaged frame accepted").kind(),
        Err(e) => e.kind(),
    }
}

#[test]
fn truncated_frames_are_refused_at_every_length() {
    let wire = open_frame();
    for cut in 0..wire.len() {
        assert_eq!(err_kind(&wire[..cut], &Limits::DEFAULT), WireErrorKind::Truncated, "cut at {cut}");
    }
}

#[test]
fn every_single_bit_flip_is_refused() {
    let wire = open_frame();
    for bit in 0..wire.len() * 8 {
        let mut bad = wire.clone();
        bad[bit / 8] ^= 1 << (bit % 8);
        // Flips in the header fields are refused by their own check (magic,
        // version, kind, lengths); everything else by the crc.
        let kind = err_kind(&bad, &Limits::DEFAULT);
        assert_ne!(kind, WireErrorKind::Encode, "bit {bit}");
    }
}

#[test]
fn flips_in_body_and_payload_fail_the_checksum() {
    let wire = open_frame();
    for i in [HEADER_LEN, HEADER_LEN + 10, wire.len() - 1] {
        let mut bad = wire.clone();
        bad[i] ^= 0x40;
        assert_eq!(err_kind(&bad, &Limits::DEFAULT), WireErrorKind::Checksum);
    }
}

#[test]
fn header_checks_name_the_failure() {
    let wire = open_frame();
    let mut bad = wire.clone();
    bad[0] = b'X';
    assert_eq!(err_kind(&bad, &Limits::DEFAULT), WireErrorKind::BadMagic);
    let mut bad = wire.clone();
    bad[4..6].copy_from_slice(&(cv_wire::PROTOCOL_VERSION + 1).to_le_bytes());
    let e = Frame::decode(&bad, &Limits::DEFAULT).unwrap_err();
    assert_eq!(e.kind(), WireErrorKind::UnsupportedVersion);
    assert_eq!(e.code(), cv_wire::ErrorCode::VersionMismatch);
    let mut bad = wire.clone();
    bad[6..8].copy_from_slice(&999u16.to_le_bytes());
    assert_eq!(err_kind(&bad, &Limits::DEFAULT), WireErrorKind::UnknownKind);
    let mut bad = wire.clone();
    bad[8] = 2; // a flag bit this version does not know
    assert_eq!(err_kind(&bad, &Limits::DEFAULT), WireErrorKind::BadHeader);
    let mut long = wire.clone();
    long.push(0);
    assert_eq!(err_kind(&long, &Limits::DEFAULT), WireErrorKind::BadHeader);
}

#[test]
fn oversized_frames_are_refused_before_allocation() {
    let wire = open_frame();
    let small = Limits { max_payload: 999, ..Limits::DEFAULT };
    assert_eq!(err_kind(&wire, &small), WireErrorKind::LimitExceeded);
    let small = Limits { max_body: 64, ..Limits::DEFAULT };
    assert_eq!(err_kind(&wire, &small), WireErrorKind::LimitExceeded);
    // A header claiming 4 GiB is refused from its 32 bytes alone.
    let mut huge = wire[..HEADER_LEN].to_vec();
    huge[12..16].copy_from_slice(&u32::MAX.to_le_bytes());
    assert_eq!(cv_wire::FrameHeader::parse(&huge, &Limits::DEFAULT).unwrap_err().kind(), WireErrorKind::LimitExceeded);
}

#[test]
fn semantic_limits_are_checked_on_access() {
    let long = "/".to_string() + &"a".repeat(5000);
    let enc = encode(&Open { path: long }, 1, &[]).unwrap();
    let frame = Frame::decode(enc.head(), &Limits::DEFAULT).unwrap();
    assert_eq!(frame.access::<Open>().unwrap_err().kind(), WireErrorKind::LimitExceeded);

    let many = DeleteBlocks { block_ids: (0..100).collect() };
    let enc = encode(&many, 1, &[]).unwrap();
    let tight = Limits { max_list: 10, ..Limits::DEFAULT };
    let frame = Frame::decode(enc.head(), &tight).unwrap();
    assert_eq!(frame.access::<DeleteBlocks>().unwrap_err().kind(), WireErrorKind::LimitExceeded);
}

#[test]
fn wrong_kind_and_garbage_bodies_are_refused() {
    let enc = encode(&Ping { nonce: 1 }, 1, &[]).unwrap();
    let frame = Frame::decode(enc.head(), &Limits::DEFAULT).unwrap();
    assert_eq!(frame.access::<Pong>().unwrap_err().kind(), WireErrorKind::UnexpectedKind);

    // A frame whose checksum is right but whose body is not an archive of
    // its kind: rkyv's validation must catch it.
    // An 8-byte Ping body is too short to hold a Mkdir (16 bytes).
    let enc = encode(&Ping { nonce: 1 }, 1, &[]).unwrap();
    let mut bytes = enc.head().to_vec();
    bytes[6..8].copy_from_slice(&(Kind::Mkdir as u16).to_le_bytes());
    let crc = {
        let mut h = crc32fast::Hasher::new();
        h.update(&bytes[..28]);
        h.update(&bytes[HEADER_LEN..]);
        h.finalize()
    };
    bytes[28..32].copy_from_slice(&crc.to_le_bytes());
    let frame = Frame::decode(&bytes, &Limits::DEFAULT).unwrap();
    assert_eq!(frame.access::<Mkdir>().unwrap_err().kind(), WireErrorKind::Malformed);
}

#[test]
fn payload_in_slices_equals_payload_in_one() {
    let a = [1u8; 100];
    let b = [2u8; 50];
    let joined: Vec<u8> = a.iter().chain(b.iter()).copied().collect();
    let one = encode(&ReadBlockOk { block_len: 150 }, 3, &joined).unwrap();
    let two = encode_with(&ReadBlockOk { block_len: 150 }, 3, &[&a, &b]).unwrap();
    assert_eq!(one.head(), two.head());
}

#[test]
fn payload_crc_given_equals_payload_checksummed() {
    let a = [1u8; 100];
    let b = [2u8; 50];
    // As a store would hold them: one crc per piece, combined.
    let mut crc = crc32fast::Hasher::new_with_initial_len(crc32fast::hash(&a), 100);
    crc.combine(&crc32fast::Hasher::new_with_initial_len(crc32fast::hash(&b), 50));
    let given = encode_with_crc(&ReadBlockOk { block_len: 150 }, 3, 150, crc.finalize()).unwrap();
    let summed = encode_with(&ReadBlockOk { block_len: 150 }, 3, &[&a, &b]).unwrap();
    assert_eq!(given.head(), summed.head());
    let mut bytes = given.head().to_vec();
    bytes.extend_from_slice(&a);
    bytes.extend_from_slice(&b);
    Frame::decode(&bytes, &Limits::DEFAULT).unwrap();
    // An empty payload has crc 0.
    let empty = encode_with_crc(&ReadBlockOk { block_len: 0 }, 4, 0, 0).unwrap();
    assert_eq!(empty.head(), encode(&ReadBlockOk { block_len: 0 }, 4, &[]).unwrap().head());
}

/// A block reply sent while its bytes arrive: header, body, payload, payload crc32.
fn streamed_frame(payload: &[u8]) -> Vec<u8> {
    let enc = encode_streamed(&ReadBlockOk { block_len: 1 << 20 }, 9, payload.len() as u64).unwrap();
    assert!(enc.header().flags.payload_crc_after());
    let mut wire = enc.head().to_vec();
    wire.extend_from_slice(payload);
    wire.extend_from_slice(&trailer(crc32fast::hash(payload)));
    wire
}

#[test]
fn a_streamed_frame_carries_its_payload_crc_after_the_payload() {
    let payload: Vec<u8> = (0..3000u32).map(|i| (i * 7) as u8).collect();
    let wire = streamed_frame(&payload);
    let frame = Frame::decode(&wire, &Limits::DEFAULT).unwrap();
    assert_eq!(frame.payload(), &payload[..]);
    assert_eq!(frame.header().frame_len(), wire.len());
    assert_eq!(frame.access::<ReadBlockOk>().unwrap().block_len.to_native(), 1 << 20);
    assert_eq!(frame.to_bytes(), wire, "re-encoded with its trailer");
    // An empty streamed payload is just the trailer of crc 0.
    let empty = streamed_frame(&[]);
    assert_eq!(
        empty.len(),
        HEADER_LEN + Frame::decode(&empty, &Limits::DEFAULT).unwrap().header().body_len as usize + 4
    );

    let decode = |b: &[u8]| Frame::decode(b, &Limits::DEFAULT).map(|_| ()).unwrap_err().kind();
    for cut in 0..wire.len() {
        assert_eq!(decode(&wire[..cut]), WireErrorKind::Truncated, "cut at {cut}");
    }
    // The header crc no longer covers the payload; the trailer does.
    let body_end = wire.len() - payload.len() - TRAILER_LEN;
    for i in [body_end, body_end + 1500, wire.len() - TRAILER_LEN - 1, wire.len() - 1] {
        let mut bad = wire.clone();
        bad[i] ^= 0x10;
        assert_eq!(decode(&bad), WireErrorKind::Checksum, "flip at {i}");
    }
    for bit in 0..body_end * 8 {
        let mut bad = wire.clone();
        bad[bit / 8] ^= 1 << (bit % 8);
        assert!(Frame::decode(&bad, &Limits::DEFAULT).is_err(), "bit {bit} of header or body flipped, accepted");
    }
    // Clearing the flag makes the trailer four stray bytes, refused.
    let mut plain = wire.clone();
    plain[8] = 0;
    assert!(Frame::decode(&plain, &Limits::DEFAULT).is_err());
}

#[test]
fn random_bytes_never_panic() {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
    let valid = open_frame();
    for _ in 0..20_000 {
        let mut bytes = valid.clone();
        for _ in 0..rng.gen_range(1..8) {
            let i = rng.gen_range(0..bytes.len());
            bytes[i] = rng.r#gen();
        }
        // Either refused with a kind, or (a no-op mutation) accepted intact.
        if let Ok(f) = Frame::decode(&bytes, &Limits::DEFAULT) {
            let _ = f.access::<OpenOk>();
            assert_eq!(bytes, valid);
        }
    }
}
