//! cv's S3-compatible endpoint (`cvctl gateway`): cv's namespace over the S3
//! API, on HTTP or HTTPS, for engines that only speak S3.
//!
//! It serves from the cluster as any client does (one connection pool, the
//! open reply's tail answering footer GETs, short-circuit reads where a worker
//! is local) and keeps no state of its own: multipart uploads live in cv, so
//! any number of gateways can stand beside the compute nodes or on the workers.
//! Buckets are cv directories named in `[gateway]`; requests are signed with
//! SigV4 by the configured keys, unsigned ones only read public buckets.

mod auth;
mod cache;
pub mod config;
mod errors;
mod list;
mod multipart;
mod objects;
mod opened;
mod read;
mod s3;
mod server;
mod stats;
mod write;

pub use config::{AccessKey, Bucket, GatewaySettings, GatewayTls, TlsMode};
pub use stats::GatewayStats;

use cv_client::Client;
use s3s::service::S3ServiceBuilder;
use std::net::SocketAddr;
use std::path::PathBuf;
use tokio::sync::watch;

/// Why a gateway could not start.
#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    #[error(transparent)]
    Config(#[from] cv_net::config::ConfigError),
    #[error("gateway TLS: {0}")]
    Tls(String),
    #[error("gateway: cannot listen on {addr}: {source}")]
    Bind { addr: SocketAddr, source: std::io::Error },
}

/// A running gateway; dropping it does not stop it, [`Gateway::stop`] does.
#[derive(Debug)]
pub struct Gateway {
    addr: SocketAddr,
    https: bool,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
    counters: std::sync::Arc<stats::Counters>,
}

impl Gateway {
    /// Starts serving on `settings.bind` (port 0 picks one) with `client`.
    /// `node_identity` is the node certificate and key of `[tls]`, which
    /// `tls = "cluster"` serves HTTPS with.
    pub async fn start(
        client: Client,
        settings: &GatewaySettings,
        node_identity: Option<(PathBuf, PathBuf)>,
    ) -> Result<Gateway, GatewayError> {
        settings.validate("gateway")?;
        let tls = match settings.https() {
            None => None,
            Some(GatewayTls::Files { cert, key }) => Some(server::tls_acceptor(cert, key)?),
            Some(_) => {
                let (cert, key) = node_identity.ok_or_else(|| {
                    GatewayError::Tls("tls = \"cluster\" needs the [tls] section's certificate".into())
                })?;
                Some(server::tls_acceptor(&cert, &key)?)
            }
        };
        let pace = read::Pacing::of(&client);
        let opened = std::sync::Arc::new(opened::Opened::new(settings.open_ttl.get()));
        let counters = std::sync::Arc::new(stats::Counters::default());
        let cache = cache::ChunkCache::new(settings.cache.bytes(), counters.clone()).map(std::sync::Arc::new);
        let buckets = objects::Buckets::new(settings);
        let (stop, rx) = watch::channel(false);
        let expiry = settings.multipart_expiry.get();
        if !expiry.is_zero() {
            tokio::spawn(multipart::expire_loop(client.clone(), buckets.clone(), expiry, rx.clone()));
        }
        let cv = s3::CvS3 { client, buckets, pace, opened, cache, counters: counters.clone() };
        let mut builder = S3ServiceBuilder::new(cv);
        builder.set_auth(auth::keys(settings)?);
        builder.set_access(auth::PublicReads::new(settings));
        let service = builder.build();
        let listener = tokio::net::TcpListener::bind(settings.bind)
            .await
            .map_err(|source| GatewayError::Bind { addr: settings.bind, source })?;
        let addr = listener.local_addr().map_err(|source| GatewayError::Bind { addr: settings.bind, source })?;
        let https = tls.is_some();
        let limits = server::ConnLimits {
            header_timeout: settings.header_timeout.get(),
            max_connections: settings.max_connections,
        };
        let task = tokio::spawn(server::accept_loop(listener, service, tls, limits, rx));
        tracing::info!(%addr, https, buckets = settings.buckets.len(), "gateway: serving S3");
        Ok(Gateway { addr, https, stop, task, counters })
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://addr` or `https://addr`.
    pub fn endpoint(&self) -> String {
        format!("{}://{}", if self.https { "https" } else { "http" }, self.addr)
    }

    /// What it has served so far.
    pub fn stats(&self) -> GatewayStats {
        self.counters.snapshot()
    }

    /// A reader of [`Gateway::stats`] that outlives this handle's borrow (what `/metrics`
    /// reads at each scrape).
    pub fn stats_reader(&self) -> impl Fn() -> GatewayStats + Send + Sync + 'static {
        let counters = self.counters.clone();
        move || counters.snapshot()
    }

    /// Stops accepting; connections under way finish on their own.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        let _ = self.task.await;
    }
}
