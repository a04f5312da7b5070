//! Golden frames: one encoded frame of every message kind, checked in under
//! `tests/fixtures/v<version>/`, decoded by today's decoder and compared with the values
//! they were made from, and compared byte for byte with today's encoding of those values.
//! A change to a message's layout (a field added, removed, reordered or retyped; a new rkyv)
//! without a protocol version bump fails here. A bump keeps the old directory: it is the
//! compatibility window's test data (wire/FORMAT.md, "Compatibility").
//!
//! Regenerate after adding a kind (or an error code), with the version unchanged:
//!
//! ```sh
//! CV_WIRE_GOLDEN=write cargo test -p cv-wire --test golden
//! ```
//!
//! Writing adds the new lines and refuses to change an existing one: a changed layout
//! needs a new version, whose directory is written afresh.

use cv_wire::msg::*;
use cv_wire::{ErrorCode, Frame, Kind, Limits, Message, PROTOCOL_VERSION, encode, encode_streamed, trailer};
use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;

/// Checks that a decoded frame holds the values a golden frame was made from.
type Check = Box<dyn Fn(&Frame) -> Result<(), String>>;

/// One golden frame: its label in the fixture file, its bytes as encoded today, and a check
/// that a decoded frame holds the values it was made from.
struct Golden {
    label: String,
    kind: Kind,
    bytes: Vec<u8>,
    check: Check,
}

/// A frame of `msg` with `payload`; its request id is its kind's number.
fn golden<M: Message + PartialEq + Clone + 'static>(msg: M, payload: &[u8]) -> Golden {
    let enc = encode(&msg, M::KIND as u64, payload).expect("encode");
    let mut bytes = enc.head().to_vec();
    bytes.extend_from_slice(payload);
    let want = payload.to_vec();
    Golden {
        label: format!("{} {}", M::KIND as u16, M::KIND.name()),
        kind: M::KIND,
        bytes,
        check: Box::new(move |f| same(f, &msg, &want)),
    }
}

/// As [`golden`], the payload's crc after the payload (`PAYLOAD_CRC_AFTER`).
fn golden_streamed<M: Message + PartialEq + Clone + 'static>(msg: M, payload: &[u8]) -> Golden {
    let enc = encode_streamed(&msg, M::KIND as u64, payload.len() as u64).expect("encode");
    let mut bytes = enc.head().to_vec();
    bytes.extend_from_slice(payload);
    bytes.extend_from_slice(&trailer(crc32fast::hash(payload)));
    let want = payload.to_vec();
    Golden {
        label: format!("{} {}.streamed", M::KIND as u16, M::KIND.name()),
        kind: M::KIND,
        bytes,
        check: Box::new(move |f| same(f, &msg, &want)),
    }
}

fn same<M: Message + PartialEq>(f: &Frame, msg: &M, payload: &[u8]) -> Result<(), String> {
    let got: M = f.decode_body().map_err(|e| e.to_string())?;
    if &got != msg {
        return Err(format!("decoded {got:?}, made from {msg:?}"));
    }
    if f.payload() != payload {
        return Err("the payload differs".into());
    }
    if f.header().request_id != M::KIND as u64 {
        return Err(format!("request id {}", f.header().request_id));
    }
    Ok(())
}

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

fn ufs_ref() -> UfsRef {
    UfsRef { mount: "/data".into(), key: "t/a.parquet".into(), version: "\"etag\"".into() }
}

fn vote() -> RaftVote {
    RaftVote { term: 4, node: 2, committed: true }
}

/// Every kind with values in every field. The values are part of the fixtures: do not edit
/// them for a version that has fixtures (add a sample instead).
fn catalogue() -> Vec<Golden> {
    let kv = KeyValue { key: "region".into(), value: "us-east-1".into() };
    let mount = Mount {
        ufs_url: "s3://b/p".into(),
        cv_path: "/data".into(),
        mode: MountMode::Cache,
        options: vec![kv.clone()],
    };
    vec![
        golden(Hello { min_version: 8, max_version: 8, role: Role::Worker, node: "worker-1".into() }, &[]),
        golden(HelloOk { version: 8, role: Role::Master, node: "master-1".into() }, &[]),
        golden(ErrorReply { code: 25, message: "not the leader".into(), redirect: Some("10.0.0.2:7700".into()) }, &[]),
        golden(Ping { nonce: 5 }, b"ping"),
        golden(Pong { nonce: 5 }, b"ping"),
        golden(Done {}, &[]),
        golden(Open { path: "/a/b.parquet".into() }, &[]),
        golden(
            OpenOk {
                status: status("/a/b.parquet"),
                blocks: (0..3).map(loc).collect(),
                tail_cached: true,
                tail_offset: 9,
                ufs: Some(ufs_ref()),
            },
            b"PAR1 footer PAR1",
        ),
        golden(Stat { path: "/a".into() }, &[]),
        golden(StatOk { status: status("/a") }, &[]),
        golden(List { path: "/".into(), start_after: Some("b".into()), limit: 100 }, &[]),
        golden(ListOk { entries: vec![status("/a"), status("/b")], more: true }, &[]),
        golden(Mkdir { path: "/d".into(), parents: true, mode: 0o755 }, &[]),
        golden(Create { path: "/f".into(), overwrite: false, mode: 0o644, block_size: 1 << 20 }, &[]),
        golden(CreateOk { file_id: 1, block_size: 4 << 20, pin_blocks: true }, &[]),
        golden(AddBlock { file_id: 1, index: 2, exclude: vec![4] }, &[]),
        golden(AddBlockOk { block: loc(2) }, &[]),
        golden(
            Complete { file_id: 1, length: 10, blocks: vec![BlockLen { block_id: 1, len: 10 }], tail_offset: 0 },
            b"0123456789",
        ),
        golden(Rename { src: "/a".into(), dst: "/b".into() }, &[]),
        golden(Delete { path: "/a".into(), recursive: true }, &[]),
        golden(mount.clone(), &[]),
        golden(Unmount { cv_path: "/data".into(), force: true }, &[]),
        golden(ListMounts {}, &[]),
        golden(
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
        golden(GetMount { cv_path: "/data".into() }, &[]),
        golden(GetMountOk { mount }, &[]),
        golden(SyncMount { cv_path: "/data".into() }, &[]),
        golden(Free { path: "/data/x".into() }, &[]),
        golden(FreeOk { files: 1, blocks: 2, skipped: 3 }, &[]),
        golden(
            RegisterWorker {
                worker_id: Some(3),
                host: "10.0.0.3".into(),
                shard_ports: vec![7000, 7001],
                capacity: 1 << 40,
                used: 1 << 30,
                zone: "rack-1".into(),
            },
            &[],
        ),
        golden(RegisterOk { worker_id: 3, heartbeat_ms: 1000 }, &[]),
        golden(
            Heartbeat {
                worker_id: 3,
                capacity: 10,
                used: 5,
                added: vec![BlockReport { block_id: 1, len: 2, shard: 0 }],
                removed: vec![4, 5],
                memory: TierCounters { hits: 1, misses: 2, evictions: 3, bytes_used: 4, capacity: 5 },
                disk: TierCounters { hits: 6, misses: 7, evictions: 8, bytes_used: 9, capacity: 10 },
                full: true,
            },
            &[],
        ),
        golden(
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
        golden(
            ReadBlock {
                block_id: 1,
                offset: 0,
                len: 4096,
                source: Some(BlockSource { object: ufs_ref(), offset: 1 << 26, len: 1 << 26 }),
                fill_only: false,
                verify: true,
            },
            &[],
        ),
        golden(ReadBlockOk { block_len: 4096 }, &[7u8; 16]),
        golden_streamed(ReadBlockOk { block_len: 1 << 26 }, &[9u8; 16]),
        golden(WriteBlock { block_id: 1, pinned: true }, &[1u8; 16]),
        golden(WriteBlockOk { len: 16, crc32: 0xdead_beef }, &[]),
        golden(DeleteBlocks { block_ids: vec![1, 2, 3] }, &[]),
        golden(StatBlock { block_id: 1 }, &[]),
        golden(StatBlockOk { len: 1, pinned: false, in_memory: true }, &[]),
        golden(LocalHello {}, &[]),
        golden(
            LocalHelloOk { boot_id: "b7c1".into(), socket: "/data/local.sock".into(), token: vec![7; 32], shard: 1 },
            &[],
        ),
        golden(LeaseBlock { block_id: 65_537 }, &[]),
        golden(
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
        golden(LocalOpen { token: vec![7; 32], shard: 1 }, &[]),
        golden(LocalOpenOk { dirs: 2 }, &[]),
        golden(LocalRevoke { block_id: 9 }, &[]),
        golden(Report {}, &[]),
        golden(
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
        golden(DrainWorker { worker_id: 2, drain: true }, &[]),
        golden(ChangeMasters { add: true, id: 4, addr: "10.0.0.4:7700".into() }, &[]),
        golden(ListMasters {}, &[]),
        golden(
            ListMastersOk {
                this: 1,
                leader: Some(2),
                members: vec![MasterMember { id: 1, addr: "10.0.0.1:7700".into(), voter: true }],
                applied: Some(7),
            },
            &[],
        ),
        golden(MasterTime {}, &[]),
        golden(MasterTimeOk { unix_ms: 1_764_960_000_000 }, &[]),
        golden(
            RaftAppend {
                vote: vote(),
                prev: Some(RaftLogId { term: 2, node: 1, index: 9 }),
                commit: Some(RaftLogId { term: 2, node: 1, index: 8 }),
                entries: 2,
            },
            &[5u8; 16],
        ),
        golden(RaftAppendOk { outcome: 1, matched: Some(RaftLogId { term: 3, node: 1, index: 10 }), vote: None }, &[]),
        golden(RaftVoteReq { vote: vote(), last: Some(RaftLogId { term: 3, node: 1, index: 10 }) }, &[]),
        golden(RaftVoteOk { vote: vote(), granted: true, last: None }, &[]),
        golden(
            RaftSnapshot {
                vote: vote(),
                last: Some(RaftLogId { term: 4, node: 2, index: 100 }),
                membership_log: Some(RaftLogId { term: 1, node: 1, index: 0 }),
                membership: vec![1, 2, 3],
                snapshot_id: "4-2-100".into(),
                offset: 4 << 20,
                done: false,
            },
            &[9u8; 16],
        ),
        golden(RaftSnapshotOk { vote: vote() }, &[]),
    ]
}

/// The error codes as the fixture file lists them: number, name, whether retryable.
fn codes() -> Vec<String> {
    ErrorCode::ALL
        .iter()
        .map(|&c| format!("{} {} {}", c as u16, c.name(), if c.retryable() { "retry" } else { "permanent" }))
        .collect()
}

fn dir(version: u16) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("tests/fixtures/v{version}"))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex")).collect()
}

/// `label hex` lines of a fixture file (comments and blank lines skipped), by label.
fn read_frames(text: &str) -> BTreeMap<String, Vec<u8>> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let (label, hex) = l.rsplit_once(' ').expect("a `label hex` line");
            (label.to_string(), unhex(hex))
        })
        .collect()
}

const FRAMES: &str = "frames.txt";
const CODES: &str = "codes.txt";

#[test]
fn the_catalogue_covers_every_kind() {
    let covered: HashSet<Kind> = catalogue().iter().map(|g| g.kind).collect();
    for k in Kind::ALL {
        assert!(covered.contains(k), "no golden frame of {}: add one to the catalogue and regenerate", k.name());
    }
}

#[test]
fn golden_frames_of_this_version_decode_to_their_values_and_encode_the_same() {
    write_if_asked();
    let d = dir(PROTOCOL_VERSION);
    let text = std::fs::read_to_string(d.join(FRAMES)).unwrap_or_else(|e| {
        panic!("{}: {e}; a new protocol version needs its golden frames: CV_WIRE_GOLDEN=write", d.display())
    });
    let fixtures = read_frames(&text);
    let catalogue = catalogue();
    let labels: HashSet<&str> = catalogue.iter().map(|g| g.label.as_str()).collect();
    for label in fixtures.keys() {
        assert!(
            labels.contains(label.as_str()),
            "fixture {label} is no longer in the catalogue (kinds are never removed)"
        );
    }
    for g in &catalogue {
        let Some(bytes) = fixtures.get(&g.label) else {
            panic!("no golden frame {} in {}: regenerate with CV_WIRE_GOLDEN=write", g.label, d.display());
        };
        let frame = Frame::decode(bytes, &Limits::DEFAULT).unwrap_or_else(|e| panic!("{}: {e}", g.label));
        assert_eq!(frame.header().version, PROTOCOL_VERSION, "{}", g.label);
        assert_eq!(frame.kind(), g.kind, "{}", g.label);
        frame.validate().unwrap_or_else(|e| panic!("{}: {e}", g.label));
        (g.check)(&frame).unwrap_or_else(|e| panic!("{}: {e}", g.label));
        assert!(
            *bytes == g.bytes,
            "{}: today's encoding differs from the golden frame of version {PROTOCOL_VERSION}: a changed \
             layout needs a new protocol version (wire/FORMAT.md, \"Compatibility\")",
            g.label
        );
    }
}

#[test]
fn error_codes_of_this_version_keep_their_numbers_and_retry_flags() {
    write_if_asked();
    let d = dir(PROTOCOL_VERSION);
    let text = std::fs::read_to_string(d.join(CODES)).unwrap_or_else(|e| panic!("{}: {e}", d.display()));
    let fixed: Vec<&str> = text.lines().filter(|l| !l.starts_with('#') && !l.trim().is_empty()).collect();
    let today = codes();
    // Codes are only added: the fixture's lines are today's first lines, unchanged.
    assert!(fixed.len() <= today.len(), "an error code was removed");
    for (f, t) in fixed.iter().zip(&today) {
        assert_eq!(f, t, "an error code changed its number, name or retry flag");
    }
}

/// With `CV_WIRE_GOLDEN=write`, writes the fixtures once, before any test reads them.
fn write_if_asked() {
    static WRITE: std::sync::Once = std::sync::Once::new();
    if std::env::var("CV_WIRE_GOLDEN").as_deref() == Ok("write") {
        WRITE.call_once(write_fixtures);
    }
}

/// Writes this version's fixtures: new lines are added, existing ones must not change.
fn write_fixtures() {
    let d = dir(PROTOCOL_VERSION);
    std::fs::create_dir_all(&d).expect("fixture directory");
    let old = std::fs::read_to_string(d.join(FRAMES)).map(|t| read_frames(&t)).unwrap_or_default();
    let mut out = format!(
        "# cv wire protocol version {PROTOCOL_VERSION}: one frame of every message kind, `<kind> <name> <hex>`.\n\
         # Written by `CV_WIRE_GOLDEN=write cargo test -p cv-wire --test golden` (wire/tests/golden.rs);\n\
         # never edited by hand. Lines are only added within a version.\n"
    );
    for g in catalogue() {
        if let Some(before) = old.get(&g.label) {
            assert!(
                *before == g.bytes,
                "{}: its layout changed under version {PROTOCOL_VERSION}: bump PROTOCOL_VERSION",
                g.label
            );
        }
        out.push_str(&format!("{} {}\n", g.label, hex(&g.bytes)));
    }
    std::fs::write(d.join(FRAMES), out).expect("write frames");
    let mut codes_text = format!(
        "# cv wire protocol version {PROTOCOL_VERSION}: error codes, `<number> <name> <retry|permanent>`.\n\
         # Written with frames.txt; codes are only added.\n"
    );
    for line in codes() {
        codes_text.push_str(&line);
        codes_text.push('\n');
    }
    std::fs::write(d.join(CODES), codes_text).expect("write codes");
}
