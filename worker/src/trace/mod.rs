//! Block access traces: what shards record when `[worker] trace` is on (`format.rs`,
//! worker/TRACE-FORMAT.md) and the simulator that replays one against cv's eviction policy,
//! LRU and Belady's optimal at several cache sizes (`sim.rs`; `cvctl trace sim`).

pub mod format;
pub mod sim;
mod writer;

pub use writer::{TraceSink, start};
