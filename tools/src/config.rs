//! The one cv configuration file (TOML), parsed once into typed values and
//! validated before anything starts; errors name the field. Each role reads
//! its own section; `[tls]` and `[transport]` are shared.
//!
//! ```toml
//! [tls]
//! ca = "cv-certs/ca.pem"
//! cert = "cv-certs/node.pem"
//! key = "cv-certs/node.key"
//!
//! [transport]          # optional, defaults shown
//! stream_window = "8MiB"
//! connection_window = "64MiB"
//! max_streams = 1024
//! keep_alive = "5s"
//! idle_timeout = "30s"
//! socket_buffer = "4MiB"
//! ```

use cv_net::config::{ConfigError, TlsConfig};
use cv_net::quic::TransportSettings;
use serde::Deserialize;
use std::path::Path;

/// The whole file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CvConfig {
    /// This node's identity under the cluster CA.
    pub tls: TlsConfig,
    /// QUIC settings shared by every connection this process makes or takes.
    #[serde(default)]
    pub transport: TransportSettings,
    /// Client settings (`cvctl fs`, `cvctl report`, benchmarks, applications).
    pub client: Option<cv_client::ClientSettings>,
    /// Master server settings (`cvctl master`); flags may override some.
    pub master: Option<cv_master::server::ServerConfig>,
    /// Worker settings (`cvctl worker`); flags may override some.
    pub worker: Option<cv_worker::WorkerSettings>,
}

impl CvConfig {
    /// Reads, parses and validates `path`.
    pub fn load(path: &Path) -> Result<CvConfig, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError::new("(file)", format!("cannot read {}: {e}", path.display())))?;
        CvConfig::parse(&text)
    }

    /// Parses and validates TOML text.
    pub fn parse(text: &str) -> Result<CvConfig, ConfigError> {
        let cfg: CvConfig = toml::from_str(text).map_err(|e| {
            let field = e.span().map(|s| describe_span(text, s)).unwrap_or_else(|| "(file)".into());
            ConfigError::new(field, e.message().to_string())
        })?;
        cfg.validate()?;
        Ok(cfg)
    }

    fn validate(&self) -> Result<(), ConfigError> {
        self.tls.validate("tls")?;
        self.transport.validate("transport")?;
        if let Some(c) = &self.client {
            c.validate("client")?;
        }
        if let Some(m) = &self.master {
            m.validate("master")?;
        }
        if let Some(w) = &self.worker {
            w.validate("worker")?;
        }
        Ok(())
    }
}

/// "line N: <the line>" for a TOML error span, so the field is visible.
fn describe_span(text: &str, span: std::ops::Range<usize>) -> String {
    let line_no = text[..span.start.min(text.len())].matches('\n').count() + 1;
    let line = text.lines().nth(line_no - 1).unwrap_or("").trim();
    format!("line {line_no}: {line}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn certs() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        cv_net::tls::ClusterCa::init_dir(dir.path(), "t", &[]).unwrap();
        dir
    }

    fn tls_section(dir: &Path) -> String {
        format!("[tls]\nca = \"{0}/ca.pem\"\ncert = \"{0}/node.pem\"\nkey = \"{0}/node.key\"\n", dir.display())
    }

    #[test]
    fn valid_file_parses_with_defaults() {
        let dir = certs();
        let cfg = CvConfig::parse(&tls_section(dir.path())).unwrap();
        assert_eq!(cfg.transport, TransportSettings::default());
    }

    #[test]
    fn errors_name_the_field() {
        let dir = certs();
        let text = tls_section(dir.path()) + "[transport]\nstream_window = \"lots\"\n";
        let e = CvConfig::parse(&text).unwrap_err();
        assert!(e.field.contains("stream_window"), "{e}");

        let text = tls_section(dir.path()) + "[transport]\nmax_streams = 0\n";
        assert_eq!(CvConfig::parse(&text).unwrap_err().field, "transport.max_streams");

        let text = tls_section(dir.path()) + "[transport]\nwindow_of_opportunity = 1\n";
        let e = CvConfig::parse(&text).unwrap_err();
        assert!(e.problem.contains("window_of_opportunity"), "{e}");

        let text = "[tls]\nca = \"/nonexistent/ca.pem\"\ncert = \"/x\"\nkey = \"/y\"\n";
        assert_eq!(CvConfig::parse(text).unwrap_err().field, "tls.ca");
    }
}
