//! The masters' Raft bytes (master/raft): the log file scan, the entries of a `RaftAppend`
//! payload, the vote file and the snapshot file. The first byte picks the decoder.
#![no_main]
use cv_master_raft::{codec, snapshot};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&pick, rest)) = data.split_first() else { return };
    match pick % 4 {
        0 => drop(codec::scan(rest)),
        1 => drop(codec::decode_entries(rest, usize::from(pick / 4))),
        2 => drop(codec::decode_vote(rest)),
        _ => drop(snapshot::decode(rest)),
    }
});
