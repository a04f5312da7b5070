//! The HTTP(S) listener: hyper's HTTP/1.1 connections (keep-alive, no Nagle:
//! small GETs would otherwise wait on delayed ACKs) in front of s3s, each on
//! a task of its own; at most `max_connections` at once, each closed when its TLS handshake or
//! a request's headers take longer than `header_timeout`.

use hyper::body::Incoming;
use hyper::header::{CONNECTION, EXPECT, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::Service;
use hyper::{Request, Response};
use hyper_util::rt::{TokioIo, TokioTimer};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use s3s::service::S3Service;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, watch};
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

/// What bounds the connections a listener serves.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ConnLimits {
    /// Time for a TLS handshake, and for a request's headers.
    pub(crate) header_timeout: Duration,
    /// Connections served at once.
    pub(crate) max_connections: u32,
}

/// Accepts until `stop` turns true; connections under way are served to their end. At most
/// `limits.max_connections` are served at once: the next is accepted only when one ends.
pub(crate) async fn accept_loop(
    listener: TcpListener,
    s3: S3Service,
    tls: Option<TlsAcceptor>,
    limits: ConnLimits,
    mut stop: watch::Receiver<bool>,
) {
    let slots = Arc::new(Semaphore::new(limits.max_connections as usize));
    loop {
        let slot = tokio::select! {
            s = slots.clone().acquire_owned() => s.expect("the semaphore is never closed"),
            _ = stop.changed() => return,
        };
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
        let (s3, tls) = (s3.clone(), tls.clone());
        tokio::spawn(async move {
            serve(stream, peer, s3, tls, limits.header_timeout).await;
            drop(slot);
        });
    }
}

/// s3s behind one rule of the connection: a request that asked `Expect: 100-continue` and is
/// refused (a 4xx or 5xx, such as a PUT whose precondition fails before its body is read)
/// closes the connection after the answer. Its client may or may not have sent the body, so
/// the bytes after the answer are either that body or the next request; hyper takes them as
/// the body, and when it was never sent, the next request lost its first bytes: a HEAD after a
/// refused PUT from botocore failed its signature check (403) once under load.
#[derive(Clone)]
struct Closing(S3Service);

impl Service<Request<Incoming>> for Closing {
    type Response = <S3Service as Service<Request<Incoming>>>::Response;
    type Error = <S3Service as Service<Request<Incoming>>>::Error;
    type Future = std::pin::Pin<Box<dyn std::future::Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn call(&self, req: Request<Incoming>) -> Self::Future {
        let expects = req.headers().get(EXPECT).is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"));
        let answer = <S3Service as Service<Request<Incoming>>>::call(&self.0, req);
        Box::pin(async move {
            let mut resp: Response<_> = answer.await?;
            if expects && !resp.status().is_success() {
                resp.headers_mut().insert(CONNECTION, HeaderValue::from_static("close"));
            }
            Ok(resp)
        })
    }
}

async fn serve(stream: TcpStream, peer: SocketAddr, s3: S3Service, tls: Option<TlsAcceptor>, within: Duration) {
    let _ = stream.set_nodelay(true);
    let mut http = http1::Builder::new();
    // hyper's header timeout counts only with a timer; it also ends a kept-alive connection
    // that sends no next request.
    http.timer(TokioTimer::new()).header_read_timeout(within);
    let s3 = Closing(s3);
    let result = match tls {
        None => http.serve_connection(TokioIo::new(stream), s3).await,
        Some(acceptor) => match tokio::time::timeout(within, acceptor.accept(stream)).await {
            Ok(Ok(tls)) => http.serve_connection(TokioIo::new(tls), s3).await,
            Ok(Err(e)) => {
                tracing::debug!(%peer, error = %e, "gateway: TLS handshake failed");
                return;
            }
            Err(_) => {
                tracing::debug!(%peer, ?within, "gateway: TLS handshake not done in time");
                return;
            }
        },
    };
    if let Err(e) = result {
        tracing::debug!(%peer, error = %e, "gateway: connection ended with an error");
    }
}
