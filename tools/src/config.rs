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
//! keep_alive = "500ms"
//! idle_timeout = "1500ms"
//! socket_buffer = "4MiB"
//! ```

use cv_client::ClientConfig;
use cv_net::config::ConfigError;
use serde::Deserialize;
use serde::de::IgnoredAny;
use std::path::Path;

/// The whole file.
#[derive(Debug)]
pub struct CvConfig {
    /// `[tls]`, `[transport]` and `[client]`: what every role and every client reads,
    /// parsed by the same loader as the C and Java bindings use.
    pub common: ClientConfig,
    /// Master server settings (`cvctl master`); flags may override some.
    pub master: Option<cv_master::server::ServerConfig>,
    /// Worker settings (`cvctl worker`); flags may override some.
    pub worker: Option<cv_worker::WorkerSettings>,
    /// S3 gateway settings (`cvctl gateway`).
    pub gateway: Option<cv_gateway::GatewaySettings>,
}

/// The role sections, and no section nobody reads (a misspelt one is an error).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Roles {
    // Read by [`ClientConfig`].
    #[serde(rename = "tls")]
    _tls: Option<IgnoredAny>,
    #[serde(rename = "transport")]
    _transport: Option<IgnoredAny>,
    #[serde(rename = "client")]
    _client: Option<IgnoredAny>,
    master: Option<cv_master::server::ServerConfig>,
    worker: Option<cv_worker::WorkerSettings>,
    gateway: Option<cv_gateway::GatewaySettings>,
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
        let common = ClientConfig::from_toml_str(text)?;
        let roles: Roles = toml::from_str(text).map_err(|e| cv_client::toml_error(text, &e))?;
        if let Some(m) = &roles.master {
            m.validate("master")?;
        }
        if let Some(w) = &roles.worker {
            w.validate("worker")?;
        }
        if let Some(g) = &roles.gateway {
            g.validate("gateway")?;
        }
        Ok(CvConfig { common, master: roles.master, worker: roles.worker, gateway: roles.gateway })
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

    fn tls_section(dir: &Path) -> String {
        format!("[tls]\nca = \"{0}/ca.pem\"\ncert = \"{0}/node.pem\"\nkey = \"{0}/node.key\"\n", dir.display())
    }

    #[test]
    fn valid_file_parses_with_defaults() {
        let dir = certs();
        let cfg = CvConfig::parse(&tls_section(dir.path())).unwrap();
        assert_eq!(cfg.common.transport, cv_net::quic::TransportSettings::default());
        assert_eq!(cfg.common.client, cv_client::ClientSettings::default());
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

        for section in ["master", "worker", "gateway"] {
            let text = tls_section(dir.path()) + &format!("[{section}]\nmetrics = \"localhost:1\"\n");
            let e = CvConfig::parse(&text).unwrap_err();
            assert!(e.field.starts_with(&format!("{section}.metrics")) && e.problem.contains("ip:port"), "{e}");
        }
        let text = tls_section(dir.path()) + "[master]\nmetrics = \"off\"\n";
        assert_eq!(CvConfig::parse(&text).unwrap().master.unwrap().metrics.get(), None);
        let text = tls_section(dir.path()) + "[master]\nmetrics = \"0.0.0.0:9000\"\n";
        assert_eq!(
            CvConfig::parse(&text).unwrap().master.unwrap().metrics.get(),
            Some("0.0.0.0:9000".parse().unwrap())
        );
        // Served on loopback unless told otherwise.
        let master = CvConfig::parse(&(tls_section(dir.path()) + "[master]\n")).unwrap().master.unwrap();
        assert_eq!(master.metrics, cv_net::config::MetricsAddr::loopback(9464));

        let text = tls_section(dir.path()) + "[wroker]\nshards = 1\n";
        let e = CvConfig::parse(&text).unwrap_err();
        assert!(e.problem.contains("wroker") && e.field.contains("wroker"), "{e}");
    }
}
