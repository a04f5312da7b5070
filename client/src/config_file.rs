//! The client part of the cv config file, the one loader of it: `cvctl`
//! embeds it in the node's whole file and the C and Java bindings read a
//! client's file with it. `[tls]` is required, `[transport]` and `[client]`
//! are optional (defaults apply). Other sections (`[master]`, `[worker]`) are
//! left to whoever reads them, so a node's whole file can be handed to a
//! client. Relative paths are taken as given, i.e. from the process's working
//! directory.

use crate::config::ClientSettings;
use cv_net::config::{ConfigError, TlsConfig};
use cv_net::quic::TransportSettings;
use serde::Deserialize;
use std::path::Path;

/// What a client needs from the file, typed and validated.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct ClientConfig {
    /// This process's identity under the cluster CA.
    pub tls: TlsConfig,
    /// QUIC settings of every connection the process makes or takes.
    #[serde(default)]
    pub transport: TransportSettings,
    /// Master address, deadlines, retries, read-ahead.
    #[serde(default)]
    pub client: ClientSettings,
}

impl ClientConfig {
    /// The top-level sections this type reads.
    pub const SECTIONS: [&'static str; 3] = ["tls", "transport", "client"];

    /// Reads, parses and validates `path`.
    pub fn load(path: &Path) -> Result<ClientConfig, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError::new("(file)", format!("cannot read {}: {e}", path.display())))?;
        ClientConfig::from_toml_str(&text)
    }

    /// Parses and validates TOML text; errors name the field.
    pub fn from_toml_str(text: &str) -> Result<ClientConfig, ConfigError> {
        let cfg: ClientConfig = toml::from_str(text).map_err(|e| toml_error(text, &e))?;
        cfg.validate()?;
        Ok(cfg)
    }

    /// The file's text (if any) with `overrides` (TOML text) laid over it, key by key inside
    /// each section: how the Hadoop binding adds `fs.cv.*` settings to a config file.
    pub fn from_layers(base: Option<&str>, overrides: &str) -> Result<ClientConfig, ConfigError> {
        let parse = |text: &str| text.parse::<toml::Table>().map_err(|e| toml_error(text, &e));
        let mut table = match base {
            Some(text) => parse(text)?,
            None => toml::Table::new(),
        };
        merge(&mut table, parse(overrides)?);
        let text = toml::to_string(&table).map_err(|e| ConfigError::new("(file)", e.to_string()))?;
        ClientConfig::from_toml_str(&text)
    }

    /// Checks the values, naming the field that is wrong.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.tls.validate("tls")?;
        self.transport.validate("transport")?;
        self.client.validate("client")
    }
}

/// Lays `top` over `base`: tables merge key by key, anything else is replaced.
fn merge(base: &mut toml::Table, top: toml::Table) {
    for (k, v) in top {
        match (base.get_mut(&k), v) {
            (Some(toml::Value::Table(b)), toml::Value::Table(t)) => merge(b, t),
            (_, v) => {
                base.insert(k, v);
            }
        }
    }
}

/// A TOML error of `text` as a config error whose field is "section.key (line N: <the line>)"
/// where the line is a key in a section, else "line N: <the line>", so the field is visible
/// even where the error has no dotted name.
pub fn toml_error(text: &str, e: &toml::de::Error) -> ConfigError {
    let field = e.span().map(|s| describe_span(text, s)).unwrap_or_else(|| "(file)".into());
    ConfigError::new(field, e.message().to_string())
}

fn describe_span(text: &str, span: std::ops::Range<usize>) -> String {
    let line_no = text[..span.start.min(text.len())].matches('\n').count() + 1;
    let line = text.lines().nth(line_no - 1).unwrap_or("").trim();
    let section = text.lines().take(line_no).filter_map(|l| l.trim().strip_prefix('[')?.strip_suffix(']')).last();
    match (section, line.split_once('=')) {
        (Some(sec), Some((key, _))) if !line.starts_with('[') => {
            format!("{sec}.{} (line {line_no}: {line})", key.trim())
        }
        _ => format!("line {line_no}: {line}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn certs() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        cv_net::tls::ClusterCa::init_dir(dir.path(), "t", &[]).unwrap();
        dir
    }

    fn tls(dir: &Path) -> String {
        format!("[tls]\nca = \"{0}/ca.pem\"\ncert = \"{0}/client.pem\"\nkey = \"{0}/client.key\"\n", dir.display())
    }

    #[test]
    fn defaults_apply_and_other_sections_are_ignored() {
        let dir = certs();
        let text = tls(dir.path()) + "[client]\nmaster = \"127.0.0.1:9\"\n[worker]\nshards = 3\n";
        let cfg = ClientConfig::from_toml_str(&text).unwrap();
        assert_eq!(cfg.client.master.port(), 9);
        assert_eq!(cfg.client.retries, ClientSettings::default().retries);
        assert_eq!(cfg.transport, TransportSettings::default());
    }

    #[test]
    fn overrides_lie_over_the_file_key_by_key() {
        let dir = certs();
        let base = tls(dir.path()) + "[client]\nmaster = \"127.0.0.1:9\"\nretries = 7\n";
        let cfg = ClientConfig::from_layers(Some(&base), "[client]\ndeadline = \"3s\"\n").unwrap();
        assert_eq!((cfg.client.master.port(), cfg.client.retries), (9, 7));
        assert_eq!(cfg.client.deadline.0, std::time::Duration::from_secs(3));
        let cfg = ClientConfig::from_layers(Some(&base), "[client]\nmaster = \"127.0.0.1:10\"\n").unwrap();
        assert_eq!(cfg.client.master.port(), 10);
        // No file: the overrides are the whole config.
        let cfg = ClientConfig::from_layers(None, &base).unwrap();
        assert_eq!(cfg.client.retries, 7);
        let e = ClientConfig::from_layers(Some(&base), "[client]\nretries = \"many\"\n").unwrap_err();
        assert!(e.field.starts_with("client.retries (line "), "{e}");
        assert!(ClientConfig::from_layers(None, "[client]\n").unwrap_err().problem.contains("tls"));
    }

    #[test]
    fn bad_values_are_errors_naming_the_field() {
        let dir = certs();
        let e = ClientConfig::from_toml_str(&(tls(dir.path()) + "[client]\nprefetch_depth = 0\n")).unwrap_err();
        assert_eq!(e.field, "client.prefetch_depth", "{e}");
        let e = ClientConfig::from_toml_str(&(tls(dir.path()) + "[client]\nmastr = \"x\"\n")).unwrap_err();
        assert!(e.problem.contains("mastr") && e.field.contains("mastr"), "{e}");
        let e =
            ClientConfig::from_toml_str(&(tls(dir.path()) + "[transport]\nstream_window = \"lots\"\n")).unwrap_err();
        assert!(e.field.contains("stream_window"), "{e}");
        let e = ClientConfig::from_toml_str("[tls]\nca = \"/nope\"\ncert = \"/nope\"\nkey = \"/nope\"\n").unwrap_err();
        assert_eq!(e.field, "tls.ca", "{e}");
        assert!(ClientConfig::from_toml_str("no toml [").is_err());
        assert_eq!(ClientConfig::load(Path::new("/nonexistent/cv.toml")).unwrap_err().field, "(file)");
    }
}
