//! Deadlines and retries for object-store calls.

use std::time::Duration;

/// How long one object-store call may take, and how often it is retried.
/// The defaults give up on a dead store within about 15 s.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UfsSettings {
    /// Deadline of one attempt of a metadata call (stat, list, delete).
    pub op_timeout: Duration,
    /// Deadline of each read or write of data within an attempt.
    pub io_timeout: Duration,
    /// Retries after the first attempt, for errors that may pass.
    pub retries: usize,
    /// First backoff; it doubles up to `max_backoff`.
    pub min_backoff: Duration,
    pub max_backoff: Duration,
}

impl Default for UfsSettings {
    fn default() -> Self {
        UfsSettings {
            op_timeout: Duration::from_secs(4),
            io_timeout: Duration::from_secs(4),
            retries: 2,
            min_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(2),
        }
    }
}

impl UfsSettings {
    /// The longest a failing call can take with these settings.
    pub fn worst_case(&self) -> Duration {
        let attempts = self.retries as u32 + 1;
        let mut backoff = Duration::ZERO;
        let mut b = self.min_backoff;
        for _ in 0..self.retries {
            backoff += b;
            b = (b * 2).min(self.max_backoff);
        }
        self.op_timeout.max(self.io_timeout) * attempts + backoff
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_give_up_within_fifteen_seconds() {
        assert!(UfsSettings::default().worst_case() <= Duration::from_secs(15));
    }
}
