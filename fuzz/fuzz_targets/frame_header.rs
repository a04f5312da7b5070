//! Header parsing: any 32 bytes give a header or a typed error.
#![no_main]
use cv_wire::{FrameHeader, Limits};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(h) = FrameHeader::parse(data, &Limits::DEFAULT) {
        assert!(h.body_len <= Limits::DEFAULT.max_body);
        assert!(h.payload_len <= Limits::DEFAULT.max_payload);
    }
});
