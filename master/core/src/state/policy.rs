//! What a mount's options say about cache mode, parsed once: when the mount is applied or the
//! state is loaded (the journal keeps the options as the strings the user gave).

use std::time::Duration;

use super::types::MountEntry;
use crate::error::{Error, ErrorKind, Result};

/// How long fetched metadata is trusted when the mount does not say (`cv.ttl`).
pub const DEFAULT_TTL: Duration = Duration::from_secs(60);
/// How long a revalidation may take before cv serves its copy (`cv.revalidate_timeout`).
pub const DEFAULT_REVALIDATE_WITHIN: Duration = Duration::from_secs(1);
/// How stale a copy may be served when its store fails (`cv.max_stale`; 0: never).
pub const DEFAULT_MAX_STALE: Duration = Duration::from_secs(3600);

/// A mount's cache-mode options, typed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CachePolicy {
    /// What was read from the store is served without asking it again for this long.
    pub ttl: Duration,
    /// A revalidation of something cv holds may take this long before cv serves what it holds.
    pub revalidate_within: Duration,
    /// How long after its last validation a copy may still be served when the store fails.
    pub max_stale: Duration,
}

impl Default for CachePolicy {
    fn default() -> Self {
        Self { ttl: DEFAULT_TTL, revalidate_within: DEFAULT_REVALIDATE_WITHIN, max_stale: DEFAULT_MAX_STALE }
    }
}

impl CachePolicy {
    /// The policy of a mount's options; a value that does not parse is an `InvalidArgument`
    /// naming the option.
    pub fn parse(options: &[(String, String)]) -> Result<Self> {
        Ok(Self {
            ttl: duration_option(options, "cv.ttl", DEFAULT_TTL)?,
            revalidate_within: duration_option(options, "cv.revalidate_timeout", DEFAULT_REVALIDATE_WITHIN)?,
            max_stale: duration_option(options, "cv.max_stale", DEFAULT_MAX_STALE)?,
        })
    }

    pub fn of(mount: &MountEntry) -> Result<Self> {
        Self::parse(&mount.options)
    }
}

fn duration_option(options: &[(String, String)], key: &str, default: Duration) -> Result<Duration> {
    match options.iter().find(|(k, _)| k == key) {
        None => Ok(default),
        Some((_, v)) => parse_duration(v)
            .map_err(|e| Error::new(ErrorKind::InvalidArgument, format!("mount option {key}={v}: {e}"))),
    }
}

/// A duration as cv's configuration writes it (`250ms`, `10s`, `5m`, a bare number of
/// milliseconds): the grammar of cv-net's `Dur`, which this crate may not depend on
/// (`cv-master`'s tests check that the two agree).
pub fn parse_duration(s: &str) -> std::result::Result<Duration, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: u64 = num.parse().map_err(|_| format!("`{s}` is not a duration (e.g. 250ms, 10s)"))?;
    Ok(match unit.trim() {
        "" | "ms" => Duration::from_millis(n),
        "us" | "µs" => Duration::from_micros(n),
        "s" => Duration::from_secs(n),
        "m" | "min" => Duration::from_secs(n.saturating_mul(60)),
        "h" => Duration::from_secs(n.saturating_mul(3600)),
        "d" => Duration::from_secs(n.saturating_mul(86_400)),
        "w" => Duration::from_secs(n.saturating_mul(7 * 86_400)),
        other => return Err(format!("unknown duration unit `{other}` in `{s}` (units: us, ms, s, m, h, d, w)")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(kv: &[(&str, &str)]) -> Vec<(String, String)> {
        kv.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    #[test]
    fn defaults_and_values() {
        assert_eq!(CachePolicy::parse(&[]).unwrap(), CachePolicy::default());
        let p =
            CachePolicy::parse(&opts(&[("cv.ttl", "5s"), ("cv.max_stale", "0"), ("cv.revalidate_timeout", "250ms")]))
                .unwrap();
        assert_eq!(p.ttl, Duration::from_secs(5));
        assert_eq!(p.max_stale, Duration::ZERO);
        assert_eq!(p.revalidate_within, Duration::from_millis(250));
    }

    #[test]
    fn a_bad_value_names_its_option() {
        let e = CachePolicy::parse(&opts(&[("cv.ttl", "soon")])).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        assert_eq!(e.context(), "mount option cv.ttl=soon: `soon` is not a duration (e.g. 250ms, 10s)");
    }
}
