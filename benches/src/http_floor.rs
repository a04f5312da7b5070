//! The floor under any S3 endpoint: a bare HTTP/1.1 server answering HEAD and ranged GET
//! from memory, on the gateway's own stack (hyper, tokio, TCP without Nagle) with nothing
//! behind it: no cv, no S3 protocol, no signatures. `bench gateway-tpch` runs DuckDB's httpfs
//! against it beside the gateway, so what the gateway costs above it is cv's, and what it
//! costs above local disk is the HTTP path's.

use crate::open_latency::BenchError;
use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{CONTENT_LENGTH, CONTENT_RANGE, RANGE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// The server; it stops when dropped.
#[derive(Debug)]
pub struct HttpFloor {
    addr: SocketAddr,
    accept: JoinHandle<()>,
}

/// Files by URL path (`/<table>/<file>`).
type Files = Arc<HashMap<String, Bytes>>;

impl HttpFloor {
    /// Loads every file under `root` into memory and serves them on a free loopback port.
    pub async fn start(root: &Path) -> Result<HttpFloor, BenchError> {
        let mut files = HashMap::new();
        load(root, root, &mut files)?;
        let files: Files = Arc::new(files);
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let accept = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let _ = stream.set_nodelay(true);
                let files = files.clone();
                tokio::spawn(async move {
                    let svc = service_fn(move |req| {
                        let files = files.clone();
                        async move { Ok::<_, Infallible>(answer(&files, &req)) }
                    });
                    let _ = http1::Builder::new().serve_connection(TokioIo::new(stream), svc).await;
                });
            }
        });
        Ok(HttpFloor { addr, accept })
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

impl Drop for HttpFloor {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

fn load(root: &Path, dir: &Path, out: &mut HashMap<String, Bytes>) -> Result<(), BenchError> {
    for e in std::fs::read_dir(dir)? {
        let p = e?.path();
        if p.is_dir() {
            load(root, &p, out)?;
        } else {
            let rel = p.strip_prefix(root).map_err(|e| e.to_string())?;
            out.insert(format!("/{}", rel.display()), Bytes::from(std::fs::read(&p)?));
        }
    }
    Ok(())
}

fn answer<B>(files: &Files, req: &Request<B>) -> Response<Full<Bytes>> {
    let status = |s: StatusCode| Response::builder().status(s).body(Full::default()).expect("a bare status");
    let Some(body) = files.get(req.uri().path()) else { return status(StatusCode::NOT_FOUND) };
    let len = body.len() as u64;
    let range = req.headers().get(RANGE).and_then(|v| v.to_str().ok());
    let (start, end, code) = match range.map(|r| byte_range(r, len)) {
        None => (0, len, StatusCode::OK),
        Some(Some((s, e))) => (s, e, StatusCode::PARTIAL_CONTENT),
        Some(None) => return status(StatusCode::RANGE_NOT_SATISFIABLE),
    };
    let mut resp = Response::builder().status(code).header(CONTENT_LENGTH, end - start);
    if code == StatusCode::PARTIAL_CONTENT {
        resp = resp.header(CONTENT_RANGE, format!("bytes {start}-{}/{len}", end - 1));
    }
    let bytes = if req.method() == Method::HEAD { Bytes::new() } else { body.slice(start as usize..end as usize) };
    resp.body(Full::new(bytes)).expect("valid headers")
}

/// `[start, end)` of a `bytes=a-b`, `bytes=a-` or `bytes=-n` header; `None` if unsatisfiable.
fn byte_range(h: &str, len: u64) -> Option<(u64, u64)> {
    let (a, b) = h.strip_prefix("bytes=")?.split_once('-')?;
    let (start, end) = match (a.parse::<u64>().ok(), b.parse::<u64>().ok()) {
        (Some(s), Some(e)) => (s, e.saturating_add(1).min(len)),
        (Some(s), None) if b.is_empty() => (s, len),
        (None, Some(n)) if a.is_empty() => (len.saturating_sub(n), len),
        _ => return None,
    };
    (start < end).then_some((start, end))
}

#[cfg(test)]
mod tests {
    use super::byte_range;

    #[test]
    fn ranges_as_http_spells_them() {
        assert_eq!(byte_range("bytes=0-9", 100), Some((0, 10)));
        assert_eq!(byte_range("bytes=90-", 100), Some((90, 100)));
        assert_eq!(byte_range("bytes=-8", 100), Some((92, 100)));
        assert_eq!(byte_range("bytes=95-200", 100), Some((95, 100)));
        assert_eq!(byte_range("bytes=100-", 100), None);
        assert_eq!(byte_range("items=0-1", 100), None);
    }
}
