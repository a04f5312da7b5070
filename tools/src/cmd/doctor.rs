//! `cvctl doctor --config cv.toml`: checks a node's config against this host (config,
//! certificates, ports, directories, clock; see [`crate::doctor`]), one line per finding,
//! and exits non-zero when any failed. The systemd units run it before every start.

use super::CmdResult;
use crate::doctor::{self, Status};
use clap::Args;
use std::path::PathBuf;

/// Arguments of `cvctl doctor`.
#[derive(Args, Debug)]
pub struct DoctorArgs {
    /// The config file to check (a node's whole file, or a client's).
    #[arg(long, env = "CV_CONFIG")]
    config: PathBuf,
    /// Print JSON: `{"ok", "failures", "checks": [{"check", "status", "subject", "problem", "detail"}]}`.
    #[arg(long)]
    json: bool,
}

/// Some checks failed: the exit status says so, the lines above say which.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DoctorFailed {
    pub failures: usize,
}

impl std::fmt::Display for DoctorFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "doctor: {} check(s) failed", self.failures)
    }
}

impl std::error::Error for DoctorFailed {}

impl DoctorArgs {
    /// Runs it.
    pub fn run(self) -> CmdResult {
        let report = doctor::examine(&self.config);
        if self.json {
            println!("{}", report.json());
        } else {
            for f in &report.findings {
                println!("{}", f.line());
            }
            let warnings = report.findings.iter().filter(|f| f.status == Status::Warn).count();
            println!("{} checks: {} failed, {warnings} warnings", report.findings.len(), report.failures());
        }
        match report.failures() {
            0 => Ok(()),
            failures => Err(DoctorFailed { failures }.into()),
        }
    }
}
