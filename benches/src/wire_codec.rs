//! Frame encode + validate + access for an open reply carrying a 64 KiB tail,
//! against a plain serde (bincode) serialize + deserialize copy of the same
//! content.

use cv_wire::msg::{BlockLoc, FileKind, FileStatus, OpenOk};
use cv_wire::{Frame, Limits};
use serde::{Deserialize, Serialize};
use std::hint::black_box;
use std::time::Instant;

/// A block location for the serde baseline: id, offset, len, worker, shard, ip, port.
type SerdeBlock = (u64, u64, u64, u64, u16, [u8; 16], u16);

/// The same open reply as a serde type, with the tail inline (what a
/// conventional RPC would carry).
#[derive(Serialize, Deserialize)]
struct SerdeOpenOk {
    id: u64,
    path: String,
    length: u64,
    mtime_ms: u64,
    version: u64,
    mode: u32,
    blocks: Vec<SerdeBlock>,
    tail_offset: u64,
    // As bytes, not a sequence of u8: the fast serde path, a fair baseline.
    #[serde(with = "serde_bytes")]
    tail: Vec<u8>,
}

/// Result of the codec benchmark.
#[derive(Debug, serde::Serialize)]
pub struct CodecResult {
    /// Tail bytes carried.
    pub tail_bytes: usize,
    /// Blocks in the block map.
    pub blocks: usize,
    /// Baseline: bincode serialize + deserialize, ns per frame.
    pub bincode_ns: f64,
    /// cv: encode + header/crc check + rkyv validate + access, ns per frame.
    pub cv_ns: f64,
    /// cv without the crc (encode + validate + access), ns per frame, to show
    /// what the checksum costs.
    pub cv_no_crc_ns: f64,
}

fn sample(blocks: usize) -> OpenOk {
    OpenOk {
        status: FileStatus {
            id: 12345,
            path: "/warehouse/db/table/part-00042-3f1c.parquet".into(),
            kind: FileKind::File,
            length: 256 << 20,
            mtime_ms: 1_764_000_000_000,
            version: 3,
            mode: 0o644,
            complete: true,
            block_size: 4 << 20,
        },
        blocks: (0..blocks as u64)
            .map(|i| BlockLoc {
                block_id: 1000 + i,
                offset: i << 22,
                len: 4 << 20,
                worker_id: i % 3,
                shard: (i % 2) as u16,
                addr: cv_wire::msg::ShardAddr::new(([10, 0, 0, (i % 3) as u8], 7200).into()),
                lost: false,
                replicas: Vec::new(),
                cap: cv_wire::msg::BlockCap { key_id: 7, expires_ms: 1_800_000_000_000, source: [3; 16], tag: [9; 16] },
            })
            .collect(),
        tail_cached: true,
        tail_offset: (256 << 20) - (64 << 10),
        ufs: None,
    }
}

/// Runs `iters` iterations of each side.
pub fn run(iters: u32, blocks: usize) -> CodecResult {
    let msg = sample(blocks);
    let tail = vec![0x42u8; 64 << 10];
    let limits = Limits::DEFAULT;

    let serde_msg = SerdeOpenOk {
        id: msg.status.id,
        path: msg.status.path.clone(),
        length: msg.status.length,
        mtime_ms: msg.status.mtime_ms,
        version: msg.status.version,
        mode: msg.status.mode,
        blocks: msg
            .blocks
            .iter()
            .map(|b| (b.block_id, b.offset, b.len, b.worker_id, b.shard, b.addr.ip, b.addr.port))
            .collect(),
        tail_offset: msg.tail_offset,
        tail: tail.clone(),
    };
    let t = Instant::now();
    for _ in 0..iters {
        let bytes = bincode::serialize(black_box(&serde_msg)).expect("bincode");
        let back: SerdeOpenOk = bincode::deserialize(black_box(&bytes)).expect("bincode");
        black_box(back.tail.len() + back.blocks.len());
    }
    let bincode_ns = t.elapsed().as_nanos() as f64 / f64::from(iters);

    // cv: what a sender and a receiver do per open reply. The receiver gets
    // the frame as one buffer (as read from the stream) and copies the body
    // into an aligned buffer; the tail stays in the payload.
    let t = Instant::now();
    for _ in 0..iters {
        let enc = cv_wire::encode(black_box(&msg), 1, &tail).expect("encode");
        let mut wire = Vec::with_capacity(enc.head().len() + tail.len());
        wire.extend_from_slice(enc.head());
        wire.extend_from_slice(&tail);
        let frame = Frame::decode(black_box(&wire), &limits).expect("decode");
        let open = frame.access::<OpenOk>().expect("access");
        black_box(open.blocks.len() + frame.payload().len());
    }
    let cv_ns = t.elapsed().as_nanos() as f64 / f64::from(iters);

    let t = Instant::now();
    for _ in 0..iters {
        let mut head = cv_wire::rkyv::util::AlignedVec::<16>::new();
        head = cv_wire::Message::archive_into(black_box(&msg), head).expect("encode");
        let open = <OpenOk as cv_wire::Message>::access(black_box(&head)).expect("access");
        black_box(open.blocks.len());
    }
    let cv_no_crc_ns = t.elapsed().as_nanos() as f64 / f64::from(iters);

    CodecResult { tail_bytes: tail.len(), blocks, bincode_ns, cv_ns, cv_no_crc_ns }
}

/// Prints the result as a table.
pub fn print(r: &CodecResult) {
    println!("open reply with a {} KiB tail and {} blocks, ns per frame", r.tail_bytes >> 10, r.blocks);
    println!("{:<58} {:>12} {:>9}", "series", "ns/frame", "×");
    println!("{:<58} {:>12.0} {:>9.2}", "baseline: bincode serialize + deserialize (tail inline)", r.bincode_ns, 1.0);
    println!(
        "{:<58} {:>12.0} {:>9.2}",
        "cv: encode + crc + decode + validate + access",
        r.cv_ns,
        r.cv_ns / r.bincode_ns
    );
    println!(
        "{:<58} {:>12.0} {:>9.2}",
        "cv: archive + validate + access (no crc, no frame copy)",
        r.cv_no_crc_ns,
        r.cv_no_crc_ns / r.bincode_ns
    );
    println!("(× = ratio to the baseline row, same run; lower is faster)");
}
