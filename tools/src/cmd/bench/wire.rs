//! `cvctl bench wire`.

use crate::cmd::CmdResult;
use clap::Args;

/// Arguments of `cvctl bench wire`.
#[derive(Args, Debug)]
pub struct WireArgs {
    /// Frames per series.
    #[arg(long, default_value_t = 20_000)]
    iterations: u32,
    /// Blocks in the open reply's block map.
    #[arg(long, default_value_t = 16)]
    blocks: usize,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

impl WireArgs {
    /// Runs it.
    pub fn run(self) -> CmdResult {
        let r = cv_benches::wire_codec::run(self.iterations, self.blocks);
        if self.json {
            println!("{}", serde_json::to_string_pretty(&r)?);
        } else {
            cv_benches::wire_codec::print(&r);
        }
        Ok(())
    }
}
