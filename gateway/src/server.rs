//! The HTTP(S) listener: hyper's HTTP/1.1 connections (keep-alive, no Nagle:
//! small GETs would otherwise wait on delayed ACKs) in front of s3s, each on
//! a task of its own.

use hyper::server::conn::http1;
use hyper_util::rt::TokioIo;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use s3s::service::S3Service;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio_rustls::TlsAcceptor;

/// A rustls server config for HTTPS from a PEM certificate chain and key.
pub(crate) fn tls_acceptor(cert: &Path, key: &Path) -> Result<TlsAcceptor, crate::GatewayError> {
    let err = |what: &str, p: &Path, e: &dyn std::fmt::Display| {
        crate::GatewayError::Tls(format!("{what} {}: {e}", p.display()))
    };
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .map_err(|e| err("certificate", cert, &e))?
        .collect::<Result<_, _>>()
        .map_err(|e| err("certificate", cert, &e))?;
    let key_der = PrivateKeyDer::from_pem_file(key).map_err(|e| err("key", key, &e))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| err("TLS versions for", cert, &e))?
        .with_no_client_auth()
        .with_single_cert(chain, key_der)
        .map_err(|e| err("certificate and key", cert, &e))?;
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(cfg)))
}

/// Accepts until `stop` turns true; connections under way are served to their end.
pub(crate) async fn accept_loop(
    listener: TcpListener,
    s3: S3Service,
    tls: Option<TlsAcceptor>,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        let (stream, peer) = tokio::select! {
            r = listener.accept() => match r {
                Ok(c) => c,
                Err(e) => {
                    tracing::warn!(error = %e, "gateway: accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = stop.changed() => return,
        };
        tokio::spawn(serve(stream, peer, s3.clone(), tls.clone()));
    }
}

async fn serve(stream: TcpStream, peer: SocketAddr, s3: S3Service, tls: Option<TlsAcceptor>) {
    let _ = stream.set_nodelay(true);
    let http = http1::Builder::new();
    let result = match tls {
        None => http.serve_connection(TokioIo::new(stream), s3).await,
        Some(acceptor) => match acceptor.accept(stream).await {
            Ok(tls) => http.serve_connection(TokioIo::new(tls), s3).await,
            Err(e) => {
                tracing::debug!(%peer, error = %e, "gateway: TLS handshake failed");
                return;
            }
        },
    };
    if let Err(e) = result {
        tracing::debug!(%peer, error = %e, "gateway: connection ended with an error");
    }
}
