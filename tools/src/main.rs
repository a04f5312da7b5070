//! `cvctl` entry point: parses the command line and dispatches.

use clap::Parser;
use cv_tools::cmd::Command;
use std::process::ExitCode;

/// cv — a cache volume for analytical engines.
#[derive(Parser, Debug)]
#[command(name = "cvctl", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Log lines as text or as JSON objects (one per line, on stderr).
    #[arg(long, global = true, env = "CV_LOG_FORMAT", value_enum, default_value_t)]
    log_format: cv_tools::logging::LogFormat,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    cv_tools::logging::init("warn", cli.command.log_layer(), cli.log_format);
    match cli.command.run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("cvctl: {e}");
            ExitCode::FAILURE
        }
    }
}
