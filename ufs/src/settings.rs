//! Deadlines and retries for object-store calls, and the mount options that change them.

use std::time::Duration;

use crate::{UfsError, UfsErrorKind};

/// Mount options that are cv's own (never passed to OpenDAL), with what each means.
pub const CV_OPTIONS: &[(&str, &str)] = &[
    ("cv.ttl", "how long the master trusts an object's metadata and listing (e.g. 60s)"),
    ("cv.revalidate_timeout", "after cv.ttl, how long a revalidation may take before cv serves what it holds (1s)"),
    (
        "cv.max_stale",
        "how long after its last validation what cv holds is served when the store fails or hangs (1h; 0s: never)",
    ),
    ("cv.op_timeout", "deadline of one attempt of a metadata call (e.g. 4s)"),
    ("cv.io_timeout", "deadline of each data read or write within an attempt (e.g. 4s)"),
    ("cv.retries", "retries after a failed attempt that may pass (0..=10)"),
    ("cv.min_backoff", "first wait before a retry; it doubles (e.g. 100ms)"),
    ("cv.max_backoff", "longest wait before a retry (e.g. 2s)"),
];

/// Whether `key` is one of cv's own mount options rather than the store's.
pub fn is_cv_option(key: &str) -> bool {
    key.starts_with("cv.")
}

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
    /// These settings changed by a mount's `cv.*` options (see [`CV_OPTIONS`]); store options
    /// are ignored. An unknown `cv.` key, a malformed value or an inconsistent result is a
    /// `Config` error naming the key.
    pub fn with_mount_options(mut self, options: &[(String, String)]) -> Result<UfsSettings, UfsError> {
        for (k, v) in options.iter().filter(|(k, _)| is_cv_option(k)) {
            let bad = |why: &str| UfsError::new(UfsErrorKind::Config, format!("mount option {k}={v}: {why}"));
            match k.as_str() {
                // The master's, parsed and checked there (they take h, d and w too).
                "cv.ttl" | "cv.max_stale" | "cv.revalidate_timeout" => {}
                "cv.op_timeout" => self.op_timeout = timeout(v).map_err(|e| bad(&e))?,
                "cv.io_timeout" => self.io_timeout = timeout(v).map_err(|e| bad(&e))?,
                "cv.retries" => {
                    self.retries = match v.parse::<usize>() {
                        Ok(n) if n <= 10 => n,
                        _ => return Err(bad("a whole number from 0 to 10")),
                    }
                }
                "cv.min_backoff" => self.min_backoff = parse_duration(v).map_err(|e| bad(&e))?,
                "cv.max_backoff" => self.max_backoff = parse_duration(v).map_err(|e| bad(&e))?,
                _ => {
                    let known: Vec<&str> = CV_OPTIONS.iter().map(|(k, _)| *k).collect();
                    return Err(bad(&format!("unknown cv option; known: {}", known.join(", "))));
                }
            }
        }
        if self.min_backoff > self.max_backoff {
            return Err(UfsError::new(
                UfsErrorKind::Config,
                format!(
                    "mount options: cv.min_backoff {:?} exceeds cv.max_backoff {:?}",
                    self.min_backoff, self.max_backoff
                ),
            ));
        }
        Ok(self)
    }

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

/// A duration above zero.
fn timeout(v: &str) -> Result<Duration, String> {
    match parse_duration(v)? {
        d if d.is_zero() => Err("must be above zero".to_owned()),
        d => Ok(d),
    }
}

/// `250ms`, `4s`, `2m`: a whole number and a unit.
fn parse_duration(v: &str) -> Result<Duration, String> {
    let v = v.trim();
    let split = v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len());
    let (n, unit) = v.split_at(split);
    let n: u64 = n.parse().map_err(|_| "a whole number and a unit (ms, s, m), e.g. 4s".to_owned())?;
    match unit.trim() {
        "ms" => Ok(Duration::from_millis(n)),
        "s" => Ok(Duration::from_secs(n)),
        "m" => Ok(Duration::from_secs(n.saturating_mul(60))),
        u => Err(format!("unknown unit {u:?}; use ms, s or m")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(kv: &[(&str, &str)]) -> Vec<(String, String)> {
        kv.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn mount_options_set_deadlines_and_retries() {
        let s = UfsSettings::default()
            .with_mount_options(&opts(&[
                ("endpoint", "http://x"),
                ("cv.ttl", "5s"),
                ("cv.op_timeout", "500ms"),
                ("cv.io_timeout", "2s"),
                ("cv.retries", "0"),
                ("cv.min_backoff", "10ms"),
                ("cv.max_backoff", "1m"),
            ]))
            .unwrap();
        assert_eq!(s.op_timeout, Duration::from_millis(500));
        assert_eq!(s.io_timeout, Duration::from_secs(2));
        assert_eq!(s.retries, 0);
        assert_eq!((s.min_backoff, s.max_backoff), (Duration::from_millis(10), Duration::from_secs(60)));
        assert_eq!(s.worst_case(), Duration::from_secs(2));
        assert_eq!(
            UfsSettings::default().with_mount_options(&opts(&[("region", "x")])).unwrap(),
            UfsSettings::default()
        );
    }

    #[test]
    fn bad_mount_options_are_config_errors_naming_the_key() {
        for (k, v) in [
            ("cv.op_timeout", "0s"),
            ("cv.io_timeout", "4"),
            ("cv.io_timeout", "4h"),
            ("cv.retries", "11"),
            ("cv.retries", "-1"),
            ("cv.retires", "1"),
            ("cv.min_backoff", "5s"),
        ] {
            let e = UfsSettings::default().with_mount_options(&opts(&[(k, v)])).unwrap_err();
            assert_eq!(e.kind(), UfsErrorKind::Config, "{k}={v}");
            assert!(e.to_string().contains(k) || k == "cv.min_backoff", "{e}");
        }
    }

    #[test]
    fn defaults_give_up_within_fifteen_seconds() {
        assert!(UfsSettings::default().worst_case() <= Duration::from_secs(15));
    }
}
