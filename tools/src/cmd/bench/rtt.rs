//! `cvctl bench rtt`.

use crate::cmd::CmdResult;
use clap::Args;

/// Arguments of `cvctl bench rtt`.
#[derive(Args, Debug)]
pub struct RttArgs {
    /// Measured round trips per series.
    #[arg(long, default_value_t = 20_000)]
    requests: u32,
    /// Unmeasured round trips first.
    #[arg(long, default_value_t = 1_000)]
    warmup: u32,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

impl RttArgs {
    /// Runs it.
    pub fn run(self) -> CmdResult {
        let rows = cv_benches::rtt::run(self.requests, self.warmup);
        if self.json {
            println!("{}", serde_json::to_string_pretty(&rows)?);
        } else {
            cv_benches::report::print_latency_table(
                "64-byte request/response over QUIC on loopback, one connection",
                &rows,
            );
        }
        Ok(())
    }
}
