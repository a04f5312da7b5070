//! `cvctl bench …`: each benchmark prints the baseline and cv side by side
//! from one run, with their ratio; `--json` prints the same as JSON.

mod rtt;
mod wire;

use super::CmdResult;
use clap::Subcommand;

/// Benchmarks.
#[derive(Subcommand, Debug)]
pub enum Bench {
    /// Frame encode + validate + access of an open reply with a 64 KiB tail,
    /// against a bincode serialize + deserialize copy.
    Wire(wire::WireArgs),
    /// QUIC loopback round trip of a 64-byte request: bare quinn echo against a
    /// cv Ping call (the latency floor).
    Rtt(rtt::RttArgs),
}

impl Bench {
    /// Runs the benchmark.
    pub fn run(self) -> CmdResult {
        match self {
            Bench::Wire(a) => a.run(),
            Bench::Rtt(a) => a.run(),
        }
    }
}
