//! `[gateway]`: where the endpoint listens, which cv directories it serves as
//! buckets, who may sign requests, and how HTTPS is set up. Parsed once into
//! typed values and validated before the gateway starts; errors name the field.
//!
//! ```toml
//! [gateway]
//! bind = "127.0.0.1:9000"
//! region = "us-east-1"
//! uploads = "/.cv-gateway/uploads"   # multipart parts in progress (a cv directory)
//! multipart_expiry = "7d"             # an upload neither completed nor aborted this long is removed ("0s": never)
//! tls = "cluster"                     # or "off" (default), or { cert = "…", key = "…" }
//! open_ttl = "0s"                     # reuse an opened file this long (0: ask the master every time)
//! cache = "512MiB"                    # hot object bytes kept in memory (0: off)
//!
//! [[gateway.buckets]]
//! name = "lake"
//! path = "/warehouse"
//! public = false                      # true: unsigned reads (GET, HEAD, LIST) are allowed
//!
//! [[gateway.keys]]
//! access_key = "AKIA…"
//! secret_key = "…"                    # or secret_key_file = "/etc/cv/gateway.secret"
//! ```

use cv_net::config::{ByteSize, ConfigError, Dur, MetricsAddr};
use serde::Deserialize;
use std::collections::HashSet;
use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;

/// The `[gateway]` section.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GatewaySettings {
    /// Address of the HTTP(S) listener.
    #[serde(default = "default_bind")]
    pub bind: SocketAddr,
    /// Where `cvctl gateway` serves Prometheus `/metrics` over HTTP (loopback by default), or
    /// `"off"`.
    #[serde(default = "default_metrics")]
    pub metrics: MetricsAddr,
    /// The region clients sign for (SigV4 scopes name it).
    #[serde(default = "default_region")]
    pub region: String,
    /// cv directory holding the parts of multipart uploads until they complete; hidden from
    /// listings and out of reach of keys when a bucket's directory holds it.
    #[serde(default = "default_uploads")]
    pub uploads: String,
    /// An upload neither completed nor aborted this long after it started is removed with its
    /// parts, as S3's lifecycle rule for incomplete uploads does (0: never). Its parts are
    /// cv-only files, pinned and replicated: a crashed client's would otherwise hold their
    /// space for ever.
    #[serde(default = "default_multipart_expiry")]
    pub multipart_expiry: Dur,
    /// How long an opened file may serve later requests for the same object without asking
    /// the master again (0, the default: every HEAD and GET asks, so every write anywhere is
    /// seen at once, as S3 promises). See `opened.rs` for what a longer one allows.
    #[serde(default)]
    pub open_ttl: Dur,
    /// Memory for hot object bytes, in 256 KiB chunks keyed by file id and version, so what
    /// is served from it is always the current version's (0: off). Without it every GET
    /// reads a worker's disk: cv's data files bypass the kernel's page cache (O_DIRECT).
    #[serde(default = "default_cache")]
    pub cache: ByteSize,
    /// HTTPS, or plain HTTP.
    #[serde(default)]
    pub tls: GatewayTls,
    /// How long a connection may take to send a request's headers, counted from the TLS
    /// handshake's start or from the last answer on a kept-alive connection: a client that
    /// connects and says nothing, or trickles its headers, is closed after this.
    #[serde(default = "default_header_timeout")]
    pub header_timeout: Dur,
    /// Connections served at once; beyond them new ones wait in the listen backlog until one
    /// ends, so a crowd cannot take the gateway's memory.
    #[serde(default = "default_max_connections")]
    pub max_connections: u32,
    /// Buckets, each a cv directory.
    #[serde(default)]
    pub buckets: Vec<Bucket>,
    /// Access keys that may sign requests (every key may use every bucket).
    #[serde(default)]
    pub keys: Vec<AccessKey>,
}

/// How the listener speaks.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum GatewayTls {
    /// `"off"` (plain HTTP, the default) or `"cluster"` (the node certificate and key of `[tls]`).
    Named(TlsMode),
    /// A given certificate chain and key (PEM).
    Files { cert: PathBuf, key: PathBuf },
}

impl GatewayTls {
    /// Plain HTTP.
    pub const OFF: GatewayTls = GatewayTls::Named(TlsMode::Off);
}

impl Default for GatewayTls {
    fn default() -> Self {
        GatewayTls::OFF
    }
}

/// The named TLS choices.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TlsMode {
    Off,
    Cluster,
}

/// One bucket: an S3 name for a cv directory.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Bucket {
    pub name: String,
    /// Absolute cv path of the directory whose files are the bucket's objects.
    pub path: String,
    /// Unsigned reads allowed (writes always need a key).
    #[serde(default)]
    pub public: bool,
}

/// An access key and its secret. The secret never appears in `Debug` output or logs.
#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AccessKey {
    pub access_key: String,
    #[serde(default)]
    pub secret_key: Option<String>,
    /// A file holding the secret (trailing white space ignored), so it need not sit in the config.
    #[serde(default)]
    pub secret_key_file: Option<PathBuf>,
}

impl fmt::Debug for AccessKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AccessKey").field("access_key", &self.access_key).field("secret_key", &"<redacted>").finish()
    }
}

fn default_bind() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 9000))
}

fn default_metrics() -> MetricsAddr {
    MetricsAddr::loopback(9467)
}

fn default_header_timeout() -> Dur {
    Dur::secs(30)
}

fn default_max_connections() -> u32 {
    4096
}

fn default_cache() -> ByteSize {
    ByteSize::mib(512)
}

fn default_region() -> String {
    "us-east-1".into()
}

fn default_multipart_expiry() -> Dur {
    Dur::secs(7 * 24 * 3600)
}

fn default_uploads() -> String {
    "/.cv-gateway/uploads".into()
}

impl Default for GatewaySettings {
    fn default() -> Self {
        GatewaySettings {
            bind: default_bind(),
            metrics: default_metrics(),
            region: default_region(),
            uploads: default_uploads(),
            multipart_expiry: default_multipart_expiry(),
            open_ttl: Dur::default(),
            cache: default_cache(),
            tls: GatewayTls::OFF,
            header_timeout: default_header_timeout(),
            max_connections: default_max_connections(),
            buckets: Vec::new(),
            keys: Vec::new(),
        }
    }
}

impl AccessKey {
    /// The secret, read from the file if it is given that way.
    pub fn secret(&self, field: &str) -> Result<String, ConfigError> {
        match (&self.secret_key, &self.secret_key_file) {
            (Some(s), None) => Ok(s.clone()),
            (None, Some(p)) => std::fs::read_to_string(p)
                .map(|s| s.trim_end().to_string())
                .map_err(|e| ConfigError::new(field, format!("cannot read {}: {e}", p.display()))),
            _ => Err(ConfigError::new(field, "give exactly one of secret_key and secret_key_file")),
        }
    }
}

/// Whether `name` is a valid S3 bucket name (3-63 of `a-z 0-9 . -`, starting and
/// ending with a letter or digit, no `..`, not an IPv4 address).
pub fn valid_bucket_name(name: &str) -> bool {
    let alnum = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    let b = name.as_bytes();
    (3..=63).contains(&b.len())
        && b.iter().all(|&c| alnum(c) || c == b'.' || c == b'-')
        && alnum(b[0])
        && alnum(b[b.len() - 1])
        && !name.contains("..")
        && name.parse::<std::net::Ipv4Addr>().is_err()
}

fn valid_dir(path: &str) -> bool {
    path.starts_with('/') && !path.split('/').any(|c| c == "." || c == "..")
}

/// `path` without a trailing `/` (the root stays `/`).
pub(crate) fn normalized(path: &str) -> String {
    let t = path.trim_end_matches('/');
    if t.is_empty() { "/".into() } else { t.into() }
}

impl GatewaySettings {
    /// Checks every field; `section` prefixes the field names in errors.
    pub fn validate(&self, section: &str) -> Result<(), ConfigError> {
        let field = |f: &str| format!("{section}.{f}");
        if self.region.is_empty() || !self.region.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-') {
            return Err(ConfigError::new(field("region"), "letters, digits and '-' only"));
        }
        if !valid_dir(&self.uploads) || normalized(&self.uploads) == "/" {
            return Err(ConfigError::new(field("uploads"), "an absolute cv directory other than /"));
        }
        if self.open_ttl.get() > std::time::Duration::from_secs(3600) {
            return Err(ConfigError::new(field("open_ttl"), "at most 1h"));
        }
        let t = self.header_timeout.get();
        if t < std::time::Duration::from_millis(100) || t > std::time::Duration::from_secs(600) {
            return Err(ConfigError::new(field("header_timeout"), "between 100ms and 10m"));
        }
        if self.max_connections == 0 {
            return Err(ConfigError::new(field("max_connections"), "at least 1"));
        }
        if self.buckets.is_empty() {
            return Err(ConfigError::new(field("buckets"), "name at least one bucket ([[gateway.buckets]])"));
        }
        let mut names = HashSet::new();
        for (i, b) in self.buckets.iter().enumerate() {
            let f = field(&format!("buckets[{i}]"));
            if !valid_bucket_name(&b.name) {
                return Err(ConfigError::new(
                    format!("{f}.name"),
                    format!("`{}` is not a valid S3 bucket name", b.name),
                ));
            }
            if !names.insert(b.name.as_str()) {
                return Err(ConfigError::new(format!("{f}.name"), format!("bucket `{}` is named twice", b.name)));
            }
            if !valid_dir(&b.path) {
                return Err(ConfigError::new(format!("{f}.path"), "an absolute cv path without . or .."));
            }
        }
        let mut keys = HashSet::new();
        for (i, k) in self.keys.iter().enumerate() {
            let f = field(&format!("keys[{i}]"));
            if k.access_key.is_empty() || !keys.insert(k.access_key.as_str()) {
                return Err(ConfigError::new(format!("{f}.access_key"), "empty or named twice"));
            }
            if k.secret(&f)?.is_empty() {
                return Err(ConfigError::new(f, "the secret is empty"));
            }
        }
        if self.keys.is_empty()
            && let Some(b) = self.buckets.iter().find(|b| !b.public)
        {
            return Err(ConfigError::new(
                field("keys"),
                format!("bucket `{}` is not public and no access key is configured ([[gateway.keys]])", b.name),
            ));
        }
        if let GatewayTls::Files { cert, key } = &self.tls {
            for (name, p) in [("cert", cert), ("key", key)] {
                if !p.is_file() {
                    return Err(ConfigError::new(
                        field(&format!("tls.{name}")),
                        format!("{} is not a file", p.display()),
                    ));
                }
            }
        }
        Ok(())
    }

    /// The TLS choice with the named forms folded: `None` for plain HTTP.
    pub fn https(&self) -> Option<&GatewayTls> {
        match &self.tls {
            GatewayTls::Named(TlsMode::Off) => None,
            t => Some(t),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<GatewaySettings, String> {
        #[derive(Deserialize)]
        struct File {
            gateway: GatewaySettings,
        }
        let f: File = toml::from_str(text).map_err(|e| e.to_string())?;
        f.gateway.validate("gateway").map_err(|e| e.to_string())?;
        Ok(f.gateway)
    }

    const OK: &str = r#"
[gateway]
tls = "cluster"
[[gateway.buckets]]
name = "lake"
path = "/warehouse/"
[[gateway.keys]]
access_key = "AK"
secret_key = "very-secret"
"#;

    #[test]
    fn a_valid_section_parses_with_defaults() {
        let g = parse(OK).unwrap();
        assert_eq!(g.bind, default_bind());
        assert_eq!(g.tls, GatewayTls::Named(TlsMode::Cluster));
        assert!(g.https().is_some());
        assert_eq!(normalized(&g.buckets[0].path), "/warehouse");
        assert!(!format!("{g:?}").contains("very-secret"), "secrets are not in Debug output");
    }

    #[test]
    fn errors_name_the_field() {
        let e = parse(&OK.replace("\"lake\"", "\"Lake_1\"")).unwrap_err();
        assert!(e.contains("gateway.buckets[0].name"), "{e}");
        let e = parse(&OK.replace("/warehouse/", "warehouse")).unwrap_err();
        assert!(e.contains("gateway.buckets[0].path"), "{e}");
        let no_keys = OK.split("[[gateway.keys]]").next().unwrap();
        let e = parse(no_keys).unwrap_err();
        assert!(e.contains("gateway.keys") && e.contains("not public"), "{e}");
        assert!(parse(&no_keys.replace("path = \"/warehouse/\"", "path = \"/w\"\npublic = true")).is_ok());
        let e = parse(&OK.replace("tls = \"cluster\"", "uploads = \"/\"")).unwrap_err();
        assert!(e.contains("gateway.uploads"), "{e}");
        let e = parse(&OK.replace("secret_key = \"very-secret\"", "")).unwrap_err();
        assert!(e.contains("gateway.keys[0]"), "{e}");
        let e =
            parse(&OK.replace("tls = \"cluster\"", "tls = { cert = \"/nonexistent.pem\", key = \"/k\" }")).unwrap_err();
        assert!(e.contains("gateway.tls.cert"), "{e}");
    }

    #[test]
    fn bucket_names() {
        for ok in ["abc", "my.lake-1", "a1b"] {
            assert!(valid_bucket_name(ok), "{ok}");
        }
        for bad in ["ab", "ABC", "-abc", "abc-", "a..b", "192.168.1.1", "a_b", &"a".repeat(64)] {
            assert!(!valid_bucket_name(bad), "{bad}");
        }
    }
}
