//! `cvctl doctor`: checks that a node's config can run on this host now, before systemd starts
//! the server (`ExecStartPre`) or when an operator asks. Each check yields [`Finding`]s: what
//! was looked at (a file, an address, a directory, a master), whether it is fine, and when it
//! is not, a typed [`Problem`] with the detail. Nothing here changes the host beyond temporary
//! files it removes again.
//!
//! One file per kind of check: `certs.rs`, `ports.rs`, `dirs.rs` (with the O_DIRECT probe in
//! `direct_io.rs`), `clock.rs`.

pub(crate) mod certs;
mod clock;
mod direct_io;
mod dirs;
mod ports;

use crate::config::CvConfig;
use std::path::Path;

/// How a check came out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Status {
    /// Fine.
    Ok,
    /// Works now but deserves attention (a certificate expiring soon, a master not answering).
    Warn,
    /// The server would fail or misbehave: the doctor exits non-zero.
    Fail,
}

impl Status {
    /// As printed: `ok`, `warn`, `FAIL` (upper case so it stands out in a terminal and a journal).
    pub fn label(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Warn => "warn",
            Status::Fail => "FAIL",
        }
    }
}

/// Which check a finding comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Check {
    /// The file parses and validates with the loader the servers use.
    Config,
    /// `[tls]`: the CA, the certificate and its key.
    Cert,
    /// An address a server of this config binds.
    Port,
    /// A worker data directory.
    DataDir,
    /// The master's journal directory.
    Journal,
    /// This host's clock against a master's.
    Clock,
}

impl Check {
    /// Stable name, for the text and JSON output.
    pub fn name(self) -> &'static str {
        match self {
            Check::Config => "config",
            Check::Cert => "cert",
            Check::Port => "port",
            Check::DataDir => "data_dir",
            Check::Journal => "journal",
            Check::Clock => "clock",
        }
    }
}

/// What is wrong, when something is (the kind; the finding's detail says the rest).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Problem {
    /// The config does not parse or validate.
    Invalid,
    /// A file cannot be read.
    Unreadable,
    /// A file is not PEM of the expected kind, or not a certificate webpki can read.
    Unparsable,
    /// A certificate's notAfter has passed.
    Expired,
    /// A certificate's notAfter is near.
    ExpiresSoon,
    /// A certificate's notBefore has not come yet.
    NotYetValid,
    /// The certificate does not chain to the configured CA.
    WrongCa,
    /// The certificate does not name what the role needs, or lacks the usage.
    WrongRole,
    /// The private key is not the certificate's.
    KeyMismatch,
    /// A private key file others than its owner may read.
    KeyExposed,
    /// Something else listens on an address a server binds.
    InUse,
    /// The address cannot be bound for another reason (not this host's, privileged).
    Unbindable,
    /// A directory cannot be made or written.
    NotWritable,
    /// O_DIRECT I/O does not work there, or needs more alignment than the store's.
    NoDirectIo,
    /// Less free space than the configuration needs.
    NoSpace,
    /// The clocks differ by more than leases and TTLs tolerate.
    ClockSkew,
    /// A master could not be asked.
    Unreachable,
    /// A master older than this cvctl: it does not report its time.
    NoTime,
    /// Nothing of that kind is configured (a note, never a failure).
    NotConfigured,
}

impl Problem {
    /// Stable name, for JSON.
    pub fn name(self) -> &'static str {
        match self {
            Problem::Invalid => "invalid",
            Problem::Unreadable => "unreadable",
            Problem::Unparsable => "unparsable",
            Problem::Expired => "expired",
            Problem::ExpiresSoon => "expires_soon",
            Problem::NotYetValid => "not_yet_valid",
            Problem::WrongCa => "wrong_ca",
            Problem::WrongRole => "wrong_role",
            Problem::KeyMismatch => "key_mismatch",
            Problem::KeyExposed => "key_exposed",
            Problem::InUse => "in_use",
            Problem::Unbindable => "unbindable",
            Problem::NotWritable => "not_writable",
            Problem::NoDirectIo => "no_direct_io",
            Problem::NoSpace => "no_space",
            Problem::ClockSkew => "clock_skew",
            Problem::Unreachable => "unreachable",
            Problem::NoTime => "no_time",
            Problem::NotConfigured => "not_configured",
        }
    }
}

/// One line of the doctor's output.
#[derive(Clone, Debug)]
pub struct Finding {
    pub check: Check,
    pub status: Status,
    /// What was looked at: a file path, an address (`udp 0.0.0.0:7100`), a directory, a master.
    pub subject: String,
    /// With `Warn` and `Fail`, what is wrong (with `Ok` sometimes a note, `NotConfigured`).
    pub problem: Option<Problem>,
    /// What was found, in words.
    pub detail: String,
}

impl Finding {
    pub(crate) fn ok(check: Check, subject: impl Into<String>, detail: impl Into<String>) -> Finding {
        Finding { check, status: Status::Ok, subject: subject.into(), problem: None, detail: detail.into() }
    }

    pub(crate) fn warn(check: Check, subject: impl Into<String>, p: Problem, detail: impl Into<String>) -> Finding {
        Finding { check, status: Status::Warn, subject: subject.into(), problem: Some(p), detail: detail.into() }
    }

    pub(crate) fn fail(check: Check, subject: impl Into<String>, p: Problem, detail: impl Into<String>) -> Finding {
        Finding { check, status: Status::Fail, subject: subject.into(), problem: Some(p), detail: detail.into() }
    }

    /// `FAIL cert     /etc/cv/node.pem: expired on 2026-01-01`.
    pub fn line(&self) -> String {
        format!("{:<4} {:<8} {}: {}", self.status.label(), self.check.name(), self.subject, self.detail)
    }

    /// The finding as a JSON object.
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "check": self.check.name(),
            "status": self.status.label().to_ascii_lowercase(),
            "subject": self.subject,
            "problem": self.problem.map(Problem::name),
            "detail": self.detail,
        })
    }
}

/// Every finding of one run, in the order checked.
#[derive(Clone, Debug, Default)]
pub struct Report {
    pub findings: Vec<Finding>,
}

impl Report {
    /// How many findings failed.
    pub fn failures(&self) -> usize {
        self.findings.iter().filter(|f| f.status == Status::Fail).count()
    }

    /// The report as JSON: `{"ok": bool, "failures": n, "checks": [...]}`.
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "ok": self.failures() == 0,
            "failures": self.failures(),
            "checks": self.findings.iter().map(Finding::json).collect::<Vec<_>>(),
        })
    }
}

/// Runs every check that applies to the config at `path`. A config that does not load is one
/// failure and nothing else is checked: every other check reads it.
pub fn examine(path: &Path) -> Report {
    let subject = path.display().to_string();
    let cfg = match CvConfig::load(path) {
        Ok(cfg) => cfg,
        Err(e) => {
            return Report { findings: vec![Finding::fail(Check::Config, subject, Problem::Invalid, e.to_string())] };
        }
    };
    let mut findings = vec![Finding::ok(Check::Config, subject, format!("parses and validates ({})", roles(&cfg)))];
    findings.extend(certs::check(&cfg, std::time::SystemTime::now()));
    // The port probe and the clock check talk QUIC: one small runtime for both.
    match crate::connect::runtime() {
        Ok(rt) => {
            findings.extend(rt.block_on(ports::check(&cfg)));
            findings.extend(dirs::check(&cfg));
            findings.extend(rt.block_on(clock::check(&cfg)));
        }
        Err(e) => findings.push(Finding::fail(Check::Clock, "runtime", Problem::Unreachable, e.to_string())),
    }
    Report { findings }
}

/// The roles the file configures, for the config line.
fn roles(cfg: &CvConfig) -> String {
    let mut r: Vec<&str> = Vec::new();
    if cfg.master.is_some() {
        r.push("master");
    }
    if cfg.worker.is_some() {
        r.push("worker");
    }
    if cfg.gateway.is_some() {
        r.push("gateway");
    }
    if r.is_empty() { "client only".into() } else { r.join(", ") }
}

/// Whether the file's identity must be a node's: servers (masters, workers) present it to
/// peers that check for `cv.cluster`, and a gateway serving HTTPS as `cluster` presents it too.
fn needs_node_identity(cfg: &CvConfig) -> bool {
    let gateway_uses_it = cfg
        .gateway
        .as_ref()
        .is_some_and(|g| matches!(g.tls, cv_gateway::GatewayTls::Named(cv_gateway::TlsMode::Cluster)));
    cfg.master.is_some() || cfg.worker.is_some() || gateway_uses_it
}

/// Bytes as `12.3 GiB`, for details.
pub(crate) fn human(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 { format!("{bytes} B") } else { format!("{v:.1} {}", UNITS[u]) }
}
