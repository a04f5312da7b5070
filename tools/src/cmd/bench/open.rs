//! `cvctl bench open`.

use crate::cmd::CmdResult;
use clap::Args;
use cv_benches::master_bench::Reads;
use std::path::PathBuf;

/// Arguments of `cvctl bench open`.
#[derive(Args, Debug)]
pub struct OpenArgs {
    /// Files created beforehand, opened round robin.
    #[arg(long, default_value_t = 1_000)]
    files: u32,
    /// Length of each file in bytes.
    #[arg(long, default_value_t = 256 << 10)]
    file_len: u32,
    /// Parquet footer length of each file (the tail is footer + 8 bytes).
    #[arg(long, default_value_t = 1_024)]
    footer: u32,
    /// Measured opens (and as many pings, interleaved).
    #[arg(long, default_value_t = 20_000)]
    requests: u32,
    /// Unmeasured open + ping pairs first.
    #[arg(long, default_value_t = 1_000)]
    warmup: u32,
    /// Directory for the master's journal (a real disk; a temporary subdirectory is removed).
    #[arg(long, default_value_os_t = std::env::temp_dir())]
    dir: PathBuf,
    /// Master counts to measure in the run: 1, and Raft groups (3, 5), each group once with
    /// lease reads and once with ReadIndex reads.
    #[arg(long, value_delimiter = ',', default_values_t = [1usize])]
    masters: Vec<usize>,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

impl OpenArgs {
    /// Runs it.
    pub fn run(self) -> CmdResult {
        let opts = cv_benches::master_bench::OpenOptions {
            files: self.files,
            file_len: self.file_len,
            footer: self.footer,
            requests: self.requests,
            warmup: self.warmup,
            dir: self.dir,
            groups: self
                .masters
                .iter()
                .flat_map(|&n| match n {
                    0 | 1 => vec![(1, Reads::Lease)],
                    n => vec![(n, Reads::Lease), (n, Reads::ReadIndex)],
                })
                .collect(),
        };
        let rows = cv_benches::master_bench::run_open(&opts, &crate::bench_masters::start_masters)
            .map_err(|e| e.to_string())?;
        if self.json {
            println!("{}", serde_json::to_string_pretty(&rows)?);
        } else {
            cv_benches::report::print_latency_table(
                "master open (block map + Parquet footer in one reply) vs null RPC, 1 client, QUIC loopback",
                &rows,
            );
            // Each group's open against one master's, where the run measured both.
            if let Some(one) = rows.get(1).filter(|_| self.masters.contains(&1)) {
                for r in rows.iter().skip(3).step_by(2) {
                    println!(
                        "{} / 1 master: p50 {:.2}×, p99 {:.2}×",
                        r.name,
                        r.p50_us / one.p50_us.max(1e-9),
                        r.p99_us / one.p99_us.max(1e-9)
                    );
                }
            }
        }
        Ok(())
    }
}
