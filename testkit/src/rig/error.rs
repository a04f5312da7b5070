//! The rig's one error type.

use std::fmt;
use std::io;

/// What went wrong setting up, driving or tearing down a rig.
#[derive(Debug)]
pub enum RigError {
    /// The rig cannot run here (not root, no `ip`): the reason, for a test to print before it skips.
    Unavailable(String),
    /// A command could not start, or exited with an error.
    Command {
        /// The command line.
        cmd: String,
        /// Its exit status and stderr, or why it did not start.
        detail: String,
    },
    /// Every subnet `10.210.1..=254.0/24` is taken by a live rig or by something else on the machine.
    NoSubnet,
    /// A file of the rig (config, log, temp dir) could not be written or read.
    Io {
        /// What was being done.
        what: String,
        /// The cause.
        source: io::Error,
    },
    /// A condition was not reached by its deadline; `logs` holds every process's output.
    Timeout {
        /// What was waited for, and the last state seen.
        what: String,
        /// The logs of every process the rig started.
        logs: String,
    },
    /// A host or process the rig does not have.
    Unknown(String),
    /// `cvctl report --json` printed something this rig cannot read.
    Report(String),
}

impl RigError {
    pub(crate) fn io(what: impl Into<String>, source: io::Error) -> RigError {
        RigError::Io { what: what.into(), source }
    }
}

impl fmt::Display for RigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RigError::Unavailable(why) => write!(f, "the multi-host rig cannot run here: {why}"),
            RigError::Command { cmd, detail } => write!(f, "`{cmd}` failed: {detail}"),
            RigError::NoSubnet => f.write_str("no free rig subnet in 10.210.1.0/24..10.210.254.0/24"),
            RigError::Io { what, source } => write!(f, "{what}: {source}"),
            RigError::Timeout { what, logs } => write!(f, "timed out waiting for {what}\n{logs}"),
            RigError::Unknown(what) => write!(f, "no such {what} in this rig"),
            RigError::Report(why) => write!(f, "unreadable `cvctl report --json`: {why}"),
        }
    }
}

impl std::error::Error for RigError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RigError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}
