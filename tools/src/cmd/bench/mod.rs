//! `cvctl bench …`: each benchmark prints the baseline and cv side by side
//! from one run, with their ratio; `--json` prints the same as JSON.

mod meta;
mod open;
mod open_latency;
mod read;
mod rtt;
mod wire;

use super::CmdResult;
use clap::Subcommand;

/// Benchmarks.
#[derive(Subcommand, Debug)]
pub enum Bench {
    /// cv's main job: open N real Parquet files and read their footers through
    /// cv and straight from their source (OpenDAL), with a null RPC as the
    /// floor. Starts an embedded cluster unless `--master` is given.
    OpenLatency(open_latency::OpenLatencyArgs),
    /// Frame encode + validate + access of an open reply with a 64 KiB tail,
    /// against a bincode serialize + deserialize copy.
    Wire(wire::WireArgs),
    /// QUIC loopback round trip of a 64-byte request: bare quinn echo against a
    /// cv Ping call (the latency floor).
    Rtt(rtt::RttArgs),
    /// Master open latency (block map + footer in one reply) next to a null RPC.
    Open(open::OpenArgs),
    /// Master metadata ops/s and p99 at concurrency 1 and 40, journal fsync on.
    Meta(meta::MetaArgs),
    /// Cached sequential 1 MiB and random 64 KiB reads through cv, next to the
    /// device limit (fio/io_uring O_DIRECT) and bare QUIC (quinn) in one run.
    Read(read::ReadArgs),
}

impl Bench {
    /// Runs the benchmark.
    pub fn run(self) -> CmdResult {
        match self {
            Bench::OpenLatency(a) => a.run(),
            Bench::Wire(a) => a.run(),
            Bench::Rtt(a) => a.run(),
            Bench::Open(a) => a.run(),
            Bench::Meta(a) => a.run(),
            Bench::Read(a) => a.run(),
        }
    }
}
