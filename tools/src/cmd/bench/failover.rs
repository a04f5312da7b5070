//! `cvctl bench failover`: kill -9 one worker of three on the multi-host rig while readers
//! loop over cache-mode files. The work is in `cv_benches::failover`; this file is the
//! command line. Needs root and a build with feature `embedded-s3`.

use crate::cmd::CmdResult;
use clap::Args;
use cv_benches::failover::{self, FailoverOptions};
use cv_net::config::{ByteSize, Dur};

/// Arguments of `cvctl bench failover`.
#[derive(Args, Debug)]
pub struct FailoverArgs {
    /// Concurrent readers (half keep their files open across the kill, half open per read).
    #[arg(long, default_value_t = 4)]
    readers: usize,
    /// Objects in the cache-mode mount.
    #[arg(long, default_value_t = 8)]
    files: usize,
    /// Bytes per read.
    #[arg(long, default_value = "256KiB")]
    read_size: ByteSize,
    /// Reading before the kill (the baseline).
    #[arg(long, default_value = "20s")]
    before: Dur,
    /// Reading after the kill.
    #[arg(long, default_value = "40s")]
    after: Dur,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

impl FailoverArgs {
    /// Runs the benchmark.
    pub fn run(self) -> CmdResult {
        let opts = FailoverOptions {
            readers: self.readers.max(1),
            files: self.files.max(1),
            read_len: self.read_size.bytes() as usize,
            before: self.before.get(),
            after: self.after.get(),
            ..FailoverOptions::new(std::env::current_exe()?)
        };
        let report = failover::run(&opts)?;
        failover::print(&report, self.json);
        Ok(())
    }
}

/// Arguments of `cvctl bench master-crash`.
#[derive(Args, Debug)]
pub struct MasterCrashArgs {
    /// Concurrent writers, each putting files one after another.
    #[arg(long, default_value_t = 4)]
    writers: usize,
    /// Bytes per file.
    #[arg(long, default_value = "1MiB")]
    file_size: ByteSize,
    /// Writing before the kill (the baseline).
    #[arg(long, default_value = "10s")]
    before: Dur,
    /// How long the master stays down.
    #[arg(long, default_value = "3s")]
    down: Dur,
    /// Writing after the master is back.
    #[arg(long, default_value = "20s")]
    after: Dur,
    /// Masters: 1, or a Raft group of 3 or 5 whose leader is the one killed.
    #[arg(long, default_value_t = 1)]
    masters: usize,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

impl MasterCrashArgs {
    /// Runs the benchmark.
    pub fn run(self) -> CmdResult {
        let opts = failover::MasterCrashOptions {
            writers: self.writers.max(1),
            file_len: self.file_size.bytes() as usize,
            before: self.before.get(),
            down: self.down.get(),
            after: self.after.get(),
            masters: self.masters.max(1),
            ..failover::MasterCrashOptions::new(std::env::current_exe()?)
        };
        let report = failover::run_master_crash(&opts)?;
        failover::print_master_crash(&report, self.json);
        Ok(())
    }
}

/// Arguments of `cvctl bench join`.
#[derive(Args, Debug)]
pub struct JoinArgs {
    /// Objects in the cache-mode mount.
    #[arg(long, default_value_t = 8)]
    files: usize,
    /// Bytes per object.
    #[arg(long, default_value = "8MiB")]
    file_size: ByteSize,
    /// The master's block size.
    #[arg(long, default_value = "64KiB")]
    block_size: ByteSize,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

impl JoinArgs {
    /// Runs the benchmark.
    pub fn run(self) -> CmdResult {
        let opts = failover::JoinOptions {
            files: self.files.max(1),
            file_len: self.file_size.bytes() as usize,
            block_size: self.block_size.bytes(),
            ..failover::JoinOptions::new(std::env::current_exe()?)
        };
        let report = failover::run_join(&opts)?;
        failover::print_join(&report, self.json);
        Ok(())
    }
}

/// Arguments of `cvctl bench fill`.
#[derive(Args, Debug)]
pub struct FillArgs {
    /// Each worker's capacity.
    #[arg(long, default_value = "64MiB")]
    capacity: ByteSize,
    /// Bytes per file.
    #[arg(long, default_value = "5MiB")]
    file_size: ByteSize,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

impl FillArgs {
    /// Runs the benchmark.
    pub fn run(self) -> CmdResult {
        let opts = failover::FillOptions {
            capacity: self.capacity.bytes(),
            file_len: self.file_size.bytes() as usize,
            ..failover::FillOptions::new(std::env::current_exe()?)
        };
        let report = failover::run_fill(&opts)?;
        failover::print_fill(&report, self.json);
        Ok(())
    }
}
