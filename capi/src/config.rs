//! The client part of the cv config file (the one `cvctl` reads): `[tls]`
//! (required), `[transport]` and `[client]` (optional, defaults apply).
//! Other sections (`[master]`, `[worker]`) are ignored so a node's whole
//! file can be handed to the library. Relative paths are taken as given,
//! i.e. from the process's working directory, as `cvctl` does.

use crate::error::{Error, Result};
use cv_client::ClientSettings;
use cv_net::config::TlsConfig;
use cv_net::quic::TransportSettings;
use serde::Deserialize;
use std::path::Path;

/// What a client needs from the file.
#[derive(Debug, Clone, Deserialize)]
pub struct ClientConfig {
    /// The client identity under the cluster CA.
    pub tls: TlsConfig,
    /// QUIC settings.
    #[serde(default)]
    pub transport: TransportSettings,
    /// Master address, deadlines, retries.
    #[serde(default)]
    pub client: ClientSettings,
}

impl ClientConfig {
    /// Reads and parses `path`.
    pub fn load(path: &Path) -> Result<ClientConfig> {
        let text =
            std::fs::read_to_string(path).map_err(|e| Error::config(format!("cannot read {}: {e}", path.display())))?;
        ClientConfig::parse(&text)
    }

    /// Parses and validates TOML text; errors name the field.
    pub fn parse(text: &str) -> Result<ClientConfig> {
        let cfg: ClientConfig = toml::from_str(text).map_err(|e| Error::config(format!("config: {}", e.message())))?;
        let checks = [cfg.tls.validate("tls"), cfg.transport.validate("transport"), cfg.client.validate("client")];
        for c in checks {
            c.map_err(|e| Error::config(e.to_string()))?;
        }
        Ok(cfg)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

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
        let cfg = ClientConfig::parse(&text).unwrap();
        assert_eq!(cfg.client.master.port(), 9);
        assert_eq!(cfg.client.retries, ClientSettings::default().retries);
        assert_eq!(cfg.transport, TransportSettings::default());
    }

    #[test]
    fn bad_values_are_config_errors_naming_the_field() {
        let dir = certs();
        let e = ClientConfig::parse(&(tls(dir.path()) + "[client]\nprefetch_depth = 0\n")).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Client(cv_client::ErrorKind::Config));
        assert!(e.message().contains("client.prefetch_depth"), "{e}");
        let e = ClientConfig::parse(&(tls(dir.path()) + "[client]\nmastr = \"x\"\n")).unwrap_err();
        assert!(e.message().contains("mastr"), "{e}");
        let e = ClientConfig::parse("[tls]\nca = \"/nope\"\ncert = \"/nope\"\nkey = \"/nope\"\n").unwrap_err();
        assert!(e.message().contains("tls.ca"), "{e}");
        assert_eq!(
            ClientConfig::parse("no toml [").unwrap_err().kind(),
            ErrorKind::Client(cv_client::ErrorKind::Config)
        );
        assert_eq!(
            ClientConfig::load(Path::new("/nonexistent/cv.toml")).unwrap_err().kind(),
            ErrorKind::Client(cv_client::ErrorKind::Config)
        );
    }
}
