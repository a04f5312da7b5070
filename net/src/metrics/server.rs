//! The HTTP side of `/metrics`: hyper's HTTP/1.1 server on a tokio listener; each `GET
//! /metrics` runs the process's [`Gather`] and answers its encoding.

use super::scrape::Scrape;
use crate::{NetError, NetErrorKind};
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use prometheus_client::encoding::prometheus_text::CONTENT_TYPE;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;

/// Builds one scrape from the process's current counters (async: the worker asks its shards).
pub type Gather = Arc<dyn Fn() -> Pin<Box<dyn Future<Output = Scrape> + Send>> + Send + Sync>;

/// A running `/metrics` endpoint; stops when dropped.
#[derive(Debug)]
pub struct MetricsServer {
    addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl MetricsServer {
    /// The address it listens on (the bound port when configured with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Listens on `addr` and serves `GET /metrics` from `gather`, on the current tokio runtime.
pub async fn serve(addr: SocketAddr, gather: Gather) -> Result<MetricsServer, NetError> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| NetError::new(NetErrorKind::Io, format!("metrics: bind {addr}: {e}")))?;
    let addr = listener.local_addr().map_err(|e| NetError::new(NetErrorKind::Io, format!("metrics: {e}")))?;
    let task = tokio::spawn(async move {
        loop {
            let stream = match listener.accept().await {
                Ok((s, _)) => s,
                Err(e) => {
                    // E.g. out of descriptors: keep serving once it passes.
                    tracing::debug!(error = %e, "metrics accept");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    continue;
                }
            };
            let gather = gather.clone();
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |req| answer(req, gather.clone()));
                if let Err(e) =
                    hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), svc).await
                {
                    tracing::debug!(error = %e, "metrics connection");
                }
            });
        }
    });
    tracing::info!(%addr, "serving /metrics");
    Ok(MetricsServer { addr, task })
}

async fn answer(req: Request<Incoming>, gather: Gather) -> Result<Response<Full<Bytes>>, std::convert::Infallible> {
    let reply = |status: StatusCode, ctype: &str, body: String| {
        let mut r = Response::new(Full::new(Bytes::from(body)));
        *r.status_mut() = status;
        if let Ok(v) = hyper::header::HeaderValue::from_str(ctype) {
            r.headers_mut().insert(hyper::header::CONTENT_TYPE, v);
        }
        Ok(r)
    };
    if req.uri().path() != "/metrics" {
        return reply(StatusCode::NOT_FOUND, "text/plain", "only /metrics is served here\n".into());
    }
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return reply(StatusCode::METHOD_NOT_ALLOWED, "text/plain", "GET /metrics\n".into());
    }
    match gather().await.encode() {
        Ok(text) => reply(StatusCode::OK, CONTENT_TYPE, text),
        Err(_) => reply(StatusCode::INTERNAL_SERVER_ERROR, "text/plain", "metrics encoding failed\n".into()),
    }
}
