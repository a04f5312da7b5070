//! Whole-frame decoding: header, lengths, crc, then the body as its kind.
#![no_main]
use cv_wire::{Frame, Limits};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(frame) = Frame::decode(data, &Limits::DEFAULT) {
        let _ = frame.validate();
    }
});
