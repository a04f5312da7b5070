//! Round trips of every message, and refusal of damaged frames.

#[path = "common/samples.rs"]
mod samples;

use cv_wire::Frame;
use cv_wire::msg::*;
use cv_wire::{
    HEADER_LEN, Kind, Limits, TRAILER_LEN, WireErrorKind, encode, encode_streamed, encode_with, encode_with_crc,
    trailer,
};
use samples::{Sample, Visit, loc, status};
use std::collections::HashSet;

/// Encodes (`streamed`, with the payload's crc after the payload), decodes, validates and
/// copies back; returns the kind exercised.
fn round_trip<M: Sample>(msg: M, payload: &[u8], streamed: bool) -> Kind {
    let wire = samples::frame(&msg, 99, payload, streamed);
    let frame = Frame::decode(&wire, &Limits::DEFAULT).expect("decode");
    assert_eq!(frame.kind(), M::KIND);
    assert_eq!(frame.header().request_id, 99);
    assert_eq!(frame.header().flags.payload_crc_after(), streamed);
    assert_eq!(frame.payload(), payload);
    let back: M = frame.decode_body().expect("body");
    assert_eq!(back, msg);
    M::KIND
}

/// Round-trips every sample, collecting the kinds exercised.
#[derive(Default)]
struct RoundTrips(HashSet<Kind>);

impl Visit for RoundTrips {
    fn sample<M: Sample>(&mut self, msg: M, payload: &[u8], streamed: bool) {
        self.0.insert(round_trip(msg, payload, streamed));
    }
}

#[test]
fn every_message_round_trips() {
    let mut seen = RoundTrips::default();
    samples::visit(&mut seen);
    for k in Kind::ALL {
        assert!(seen.0.contains(k), "no round-trip test for {}: add a sample to common/samples.rs", k.name());
    }
}

/// What the samples do not have: the other side of their options, flags and enums, and
/// payloads of kilobytes rather than bytes.
#[test]
fn other_values_and_bigger_payloads_round_trip() {
    round_trip(Hello { min_version: 1, max_version: 1, role: Role::Client, node: "n".into() }, &[], false);
    round_trip(samples::open_ok(), &vec![0xAB; 64 << 10], false);
    round_trip(RegisterWorker { worker_id: None, zone: String::new(), ..samples::register_worker() }, &[], false);
    round_trip(ReadBlock { source: None, ..samples::read_block() }, &[], false);
    round_trip(ReadBlock { len: 0, fill_only: true, verify: false, ..samples::read_block() }, &[], false);
    round_trip(ReadBlockOk { block_len: 4096 }, &[7u8; 4096], false);
    round_trip(WriteBlock { block_id: 1, pinned: true, cap: Default::default() }, &[1u8; 5000], false);
    round_trip(WriteBlockOk { len: 5000, crc32: 0xdead_beef }, &[], false);
    round_trip(RaftAppend { commit: None, ..samples::raft_append() }, &[5u8; 300], false);
    let uncommitted = RaftVote { committed: false, ..samples::vote() };
    round_trip(RaftVoteReq { vote: uncommitted, last: None }, &[], false);
    round_trip(RaftVoteOk { vote: uncommitted, granted: true, last: None }, &[], false);
    round_trip(samples::raft_snapshot(), &[9u8; 1000], false);
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
