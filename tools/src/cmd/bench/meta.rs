//! `cvctl bench meta`.

use crate::cmd::CmdResult;
use clap::Args;
use std::path::PathBuf;
use std::time::Duration;

/// Arguments of `cvctl bench meta`.
#[derive(Args, Debug)]
pub struct MetaArgs {
    /// Concurrency levels: requests in flight on one connection.
    #[arg(long, value_delimiter = ',', default_values_t = [1u32, 40])]
    concurrency: Vec<u32>,
    /// Milliseconds each operation runs at each level.
    #[arg(long, default_value_t = 1_000)]
    phase_ms: u64,
    /// Most files created per level.
    #[arg(long, default_value_t = 100_000)]
    max_files: u64,
    /// fdatasync samples for the baseline row.
    #[arg(long, default_value_t = 200)]
    fsync_samples: u32,
    /// Directory for the master's journal (a real disk; a temporary subdirectory is removed).
    #[arg(long, default_value_os_t = std::env::temp_dir())]
    dir: PathBuf,
    /// Master counts to measure in the run: 1, and Raft groups (3, 5) on the same disk.
    #[arg(long, value_delimiter = ',', default_values_t = [1usize])]
    masters: Vec<usize>,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

impl MetaArgs {
    /// Runs it.
    pub fn run(self) -> CmdResult {
        let opts = cv_benches::master_bench::MetaOptions {
            concurrency: self.concurrency,
            phase: Duration::from_millis(self.phase_ms),
            max_files: self.max_files,
            fsync_samples: self.fsync_samples,
            dir: self.dir,
            masters: self.masters,
        };
        let rows = cv_benches::master_bench::run_meta(&opts, &crate::bench_masters::start_masters)
            .map_err(|e| e.to_string())?;
        if self.json {
            println!("{}", serde_json::to_string_pretty(&rows)?);
        } else {
            cv_benches::master_bench::print_meta_table(&rows);
        }
        Ok(())
    }
}
