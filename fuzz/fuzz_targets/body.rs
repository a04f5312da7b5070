//! Body validation of every message kind, without the crc in the way: the
//! first two bytes pick the kind, the rest is the body.
#![no_main]
use cv_wire::{Kind, Limits};
use libfuzzer_sys::fuzz_target;
use rkyv::util::AlignedVec;

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    let kind = Kind::ALL[usize::from(u16::from_le_bytes([data[0], data[1]])) % Kind::ALL.len()];
    let mut body = AlignedVec::<16>::with_capacity(data.len() - 2);
    body.extend_from_slice(&data[2..]);
    let _ = kind.validate_body(&body, &Limits::DEFAULT);
});
