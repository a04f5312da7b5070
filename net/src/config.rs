//! Typed configuration values shared by every role: sizes and durations are
//! parsed once from strings like `"64KiB"` or `"250ms"`, and validation errors
//! name the field that is wrong.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

/// A configuration value that failed validation, with the field it came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    /// Dotted field name, e.g. `worker.capacity`.
    pub field: String,
    /// What is wrong with it.
    pub problem: String,
}

impl ConfigError {
    /// A problem with `field`.
    pub fn new(field: impl Into<String>, problem: impl Into<String>) -> Self {
        ConfigError { field: field.into(), problem: problem.into() }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "config field `{}`: {}", self.field, self.problem)
    }
}

impl std::error::Error for ConfigError {}

/// A size in bytes. Parses `4096`, `"4096"`, `"64KiB"`, `"4MiB"`, `"1GiB"`,
/// `"2TiB"` (also `K`/`M`/`G`/`T` and `KB`..., all powers of two).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ByteSize(pub u64);

impl ByteSize {
    /// `n` kibibytes.
    pub const fn kib(n: u64) -> Self {
        ByteSize(n << 10)
    }
    /// `n` mebibytes.
    pub const fn mib(n: u64) -> Self {
        ByteSize(n << 20)
    }
    /// `n` gibibytes.
    pub const fn gib(n: u64) -> Self {
        ByteSize(n << 30)
    }
    /// The number of bytes.
    pub const fn bytes(self) -> u64 {
        self.0
    }
}

/// Splits `"64 KiB"` into `(64, "KiB")`; `example` goes into the error.
fn number_and_unit<'a>(s: &'a str, example: &str) -> Result<(u64, &'a str), String> {
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n = num.parse().map_err(|_| format!("`{s}` is not a {example}"))?;
    Ok((n, unit.trim()))
}

/// A value written either as a bare integer or as a string with a unit.
#[derive(Deserialize)]
#[serde(untagged)]
enum IntOrStr {
    N(u64),
    S(String),
}

impl IntOrStr {
    fn parse<T: FromStr<Err = String>, E: serde::de::Error>(self, from_int: fn(u64) -> T) -> Result<T, E> {
        match self {
            IntOrStr::N(n) => Ok(from_int(n)),
            IntOrStr::S(s) => s.parse().map_err(E::custom),
        }
    }
}

impl FromStr for ByteSize {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim();
        let (n, unit) = number_and_unit(s, "size (e.g. 64KiB, 4MiB)")?;
        let shift = match unit.to_ascii_lowercase().as_str() {
            "" | "b" => 0,
            "k" | "kb" | "kib" => 10,
            "m" | "mb" | "mib" => 20,
            "g" | "gb" | "gib" => 30,
            "t" | "tb" | "tib" => 40,
            other => return Err(format!("unknown size unit `{other}` in `{s}`")),
        };
        n.checked_mul(1u64 << shift).map(ByteSize).ok_or_else(|| format!("`{s}` overflows 64 bits"))
    }
}

impl fmt::Display for ByteSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [(u32, &str); 4] = [(40, "TiB"), (30, "GiB"), (20, "MiB"), (10, "KiB")];
        for (shift, name) in UNITS {
            if self.0 >= 1 << shift && self.0.is_multiple_of(1 << shift) {
                return write!(f, "{}{name}", self.0 >> shift);
            }
        }
        write!(f, "{}B", self.0)
    }
}

impl<'de> Deserialize<'de> for ByteSize {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        IntOrStr::deserialize(d)?.parse(ByteSize)
    }
}

impl Serialize for ByteSize {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// A duration. Parses `"250ms"`, `"10s"`, `"5m"`, `"1h"`, `"7d"`, `"2w"`, `"100us"`; a bare
/// integer is milliseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Dur(pub Duration);

impl Dur {
    /// `n` milliseconds.
    pub const fn millis(n: u64) -> Self {
        Dur(Duration::from_millis(n))
    }
    /// `n` seconds.
    pub const fn secs(n: u64) -> Self {
        Dur(Duration::from_secs(n))
    }
    /// The value.
    pub const fn get(self) -> Duration {
        self.0
    }
}

impl FromStr for Dur {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim();
        let (n, unit) = number_and_unit(s, "duration (e.g. 250ms, 10s)")?;
        let d = match unit {
            "" | "ms" => Duration::from_millis(n),
            "us" | "µs" => Duration::from_micros(n),
            "s" => Duration::from_secs(n),
            "m" | "min" => Duration::from_secs(n.saturating_mul(60)),
            "h" => Duration::from_secs(n.saturating_mul(3600)),
            "d" => Duration::from_secs(n.saturating_mul(86_400)),
            "w" => Duration::from_secs(n.saturating_mul(7 * 86_400)),
            other => {
                return Err(format!("unknown duration unit `{other}` in `{s}` (units: us, ms, s, m, h, d, w)"));
            }
        };
        Ok(Dur(d))
    }
}

impl fmt::Display for Dur {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = self.0.as_millis();
        if ms > 0 && ms.is_multiple_of(1000) {
            write!(f, "{}s", ms / 1000)
        } else if self.0.subsec_nanos().is_multiple_of(1_000_000) {
            write!(f, "{ms}ms")
        } else {
            write!(f, "{}us", self.0.as_micros())
        }
    }
}

impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        IntOrStr::deserialize(d)?.parse(Dur::millis)
    }
}

impl Serialize for Dur {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// Where this node's TLS identity lives: the cluster CA and its own
/// certificate and key, all PEM.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsConfig {
    /// The cluster CA certificate every peer must chain to.
    pub ca: PathBuf,
    /// This node's certificate.
    pub cert: PathBuf,
    /// This node's private key.
    pub key: PathBuf,
}

impl TlsConfig {
    /// The conventional file names inside a directory made by `cvctl cert init`,
    /// for identity `name` (`node` or `client`).
    pub fn in_dir(dir: &std::path::Path, name: &str) -> Self {
        TlsConfig {
            ca: dir.join("ca.pem"),
            cert: dir.join(format!("{name}.pem")),
            key: dir.join(format!("{name}.key")),
        }
    }

    /// Checks that the files exist, naming the field that is wrong.
    pub fn validate(&self, section: &str) -> Result<(), ConfigError> {
        for (name, path) in [("ca", &self.ca), ("cert", &self.cert), ("key", &self.key)] {
            if !path.is_file() {
                return Err(ConfigError::new(
                    format!("{section}.{name}"),
                    format!("{} is not a readable file (create one with `cvctl cert init`)", path.display()),
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse() {
        assert_eq!("64KiB".parse::<ByteSize>().unwrap(), ByteSize::kib(64));
        assert_eq!("4 MiB".parse::<ByteSize>().unwrap(), ByteSize::mib(4));
        assert_eq!("1g".parse::<ByteSize>().unwrap(), ByteSize::gib(1));
        assert_eq!("123".parse::<ByteSize>().unwrap(), ByteSize(123));
        assert!("12 furlongs".parse::<ByteSize>().is_err());
        assert!("99999999999999999999".parse::<ByteSize>().is_err());
        assert!("17179869184TiB".parse::<ByteSize>().is_err());
        assert_eq!(ByteSize::mib(4).to_string(), "4MiB");
        assert_eq!(ByteSize(1000).to_string(), "1000B");
    }

    #[test]
    fn durations_parse() {
        assert_eq!("250ms".parse::<Dur>().unwrap(), Dur::millis(250));
        assert_eq!("10s".parse::<Dur>().unwrap(), Dur::secs(10));
        assert_eq!("2m".parse::<Dur>().unwrap(), Dur::secs(120));
        assert_eq!("100us".parse::<Dur>().unwrap().get(), Duration::from_micros(100));
        assert!("soon".parse::<Dur>().is_err());
        assert!("5 fortnights".parse::<Dur>().unwrap_err().contains("d, w"));
        // A mount's cv.ttl of a week, as users write it.
        assert_eq!("7d".parse::<Dur>().unwrap(), Dur::secs(7 * 86_400));
        assert_eq!("2w".parse::<Dur>().unwrap(), Dur::secs(14 * 86_400));
        assert_eq!(Dur::secs(3).to_string(), "3s");
    }

    #[test]
    fn toml_values_and_field_names_in_errors() {
        #[derive(Deserialize, Debug)]
        #[allow(dead_code)]
        struct S {
            size: ByteSize,
            wait: Dur,
        }
        let s: S = toml::from_str("size = \"8MiB\"\nwait = 1500").unwrap();
        assert_eq!(s.size, ByteSize::mib(8));
        assert_eq!(s.wait, Dur::millis(1500));
        let err = toml::from_str::<S>("size = \"8 parsecs\"\nwait = 1").unwrap_err().to_string();
        assert!(err.contains("size") && err.contains("parsecs"), "{err}");
    }
}

/// Where a process serves its Prometheus `/metrics` over HTTP: `"127.0.0.1:9464"`, or `"off"`
/// (also `""`) for not at all. An IP address, not a host name, so the bind never waits on DNS.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MetricsAddr(pub Option<std::net::SocketAddr>);

impl MetricsAddr {
    /// Served on loopback at `port`: metrics say much about a cluster, so other hosts reach
    /// them only when the operator binds a wider address.
    pub const fn loopback(port: u16) -> Self {
        MetricsAddr(Some(std::net::SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), port)))
    }
    /// Not served.
    pub const OFF: MetricsAddr = MetricsAddr(None);
    /// The address, unless turned off.
    pub const fn get(self) -> Option<std::net::SocketAddr> {
        self.0
    }
}

impl FromStr for MetricsAddr {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim();
        if s.is_empty() || s.eq_ignore_ascii_case("off") {
            return Ok(MetricsAddr::OFF);
        }
        s.parse()
            .map(|a| MetricsAddr(Some(a)))
            .map_err(|_| format!("`{s}` is not an ip:port (e.g. 127.0.0.1:9464) or \"off\""))
    }
}

impl fmt::Display for MetricsAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(a) => write!(f, "{a}"),
            None => f.write_str("off"),
        }
    }
}

impl<'de> Deserialize<'de> for MetricsAddr {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

impl Serialize for MetricsAddr {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

#[cfg(test)]
mod metrics_addr_tests {
    use super::MetricsAddr;

    #[test]
    fn parses_addresses_and_off() {
        assert_eq!("127.0.0.1:9464".parse::<MetricsAddr>().unwrap(), MetricsAddr::loopback(9464));
        assert_eq!("off".parse::<MetricsAddr>().unwrap(), MetricsAddr::OFF);
        assert_eq!("".parse::<MetricsAddr>().unwrap(), MetricsAddr::OFF);
        assert!("localhost:9464".parse::<MetricsAddr>().is_err());
        assert!("127.0.0.1".parse::<MetricsAddr>().is_err());
    }
}
