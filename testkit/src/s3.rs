//! [`S3Server`]: s3s + s3s-fs behind our own hyper accept loop, with a request log and failure injection
//! in front of s3s.

use std::io;
use std::net::SocketAddr;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use s3s::auth::SimpleAuth;
use s3s::crypto::{Checksum, Md5};
use s3s::service::{S3Service, S3ServiceBuilder};
use tokio::net::{TcpListener, TcpStream};

use crate::classify::classify;
use crate::rt::{RtThread, accept_loop, bind_at};
use crate::shaped::{Shaped, Then};

/// One HTTP request as it arrived, before s3s saw it.
#[derive(Clone, Debug)]
pub struct Request {
    /// `GET`, `HEAD`, `PUT`, ...
    pub method: String,
    /// The URI path as sent (percent-encoded), path-style: `/bucket/key`.
    pub path: String,
    /// The raw query string without `?`; empty when there is none.
    pub query: String,
    /// The `Range` header, e.g. `bytes=0-1023` or `bytes=-16`.
    pub range: Option<String>,
    pub op: Op,
}

/// The S3 operation a request is, classified from method, path, query and the Range header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// HeadObject (or HeadBucket).
    Head,
    /// GetObject without a Range header.
    Get,
    /// GetObject with a Range header.
    RangedGet,
    /// ListObjects / ListObjectsV2 (`?list-type=2`, or a GET on the bucket root).
    List,
    /// PutObject (not a copy).
    Put,
    /// CreateMultipartUpload (`POST ?uploads`).
    MultipartCreate,
    /// UploadPart (`PUT ?partNumber=&uploadId=`).
    MultipartPart,
    /// CompleteMultipartUpload (`POST ?uploadId=`).
    MultipartComplete,
    /// DeleteObject, or DeleteObjects (`POST ?delete`).
    Delete,
    /// Anything else: bucket operations, CopyObject, AbortMultipartUpload, ListParts, ...
    Other,
}

/// Failure injection, applied to every request that arrives after [`S3Server::set_fault`].
#[derive(Clone, Debug)]
pub enum Fault {
    None,
    /// Wait, then serve normally.
    Delay(Duration),
    /// Answer with this HTTP status (and an S3 XML error body) without reaching s3s.
    Status(u16),
    /// Wait, then answer with this status.
    DelayThenStatus(Duration, u16),
    /// Serve normally, but every response body pauses after its first `after` bytes for
    /// `stall`, then delivers the rest.
    StallBody {
        after: usize,
        stall: Duration,
    },
    /// Serve normally, but every response body breaks after its first `after` bytes: the
    /// connection is dropped mid-body.
    CutBody {
        after: usize,
    },
}

#[derive(Debug)]
struct Shared {
    log: Mutex<Vec<Request>>,
    fault: Mutex<Fault>,
}

/// Locks, ignoring poisoning (a panicking test thread must not break the server for the others).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// An S3-compatible HTTP server (s3s + s3s-fs) on 127.0.0.1, on its own thread and runtime. Stops on
/// [`S3Server::shutdown`] or drop.
#[derive(Debug)]
pub struct S3Server {
    addr: SocketAddr,
    /// Canonical, as s3s-fs keeps it (its sidecar files live directly under it).
    root: PathBuf,
    shared: Arc<Shared>,
    tmp_counter: AtomicU64,
    rt: RtThread,
}

impl S3Server {
    pub const ACCESS_KEY: &'static str = "cvtestkey";
    pub const SECRET_KEY: &'static str = "cvtestsecret";
    pub const REGION: &'static str = "us-east-1";

    /// Starts s3s + s3s-fs on 127.0.0.1 (random port) serving `root` (objects are files root/bucket/key), on
    /// its own thread with its own tokio runtime, so it works from sync tests, from any runtime, and is not
    /// slowed by the caller's runtime. Requires SigV4 auth with [`Self::ACCESS_KEY`] / [`Self::SECRET_KEY`]
    /// (unauthenticated requests are refused). Sets TCP_NODELAY on every accepted socket.
    pub fn start(root: &Path) -> io::Result<S3Server> {
        Self::start_at(root, std::net::Ipv4Addr::LOCALHOST.into())
    }

    /// [`Self::start`] on `ip` (random port): the multi-host rig's bridge address, which every
    /// host's namespace reaches, serves a store to workers on the rig.
    pub fn start_at(root: &Path, ip: std::net::IpAddr) -> io::Result<S3Server> {
        let root = root.canonicalize()?;
        let fs = s3s_fs::FileSystem::new(&root).map_err(|e| io::Error::other(format!("s3s-fs: {e:?}")))?;
        let mut builder = S3ServiceBuilder::new(fs);
        builder.set_auth(SimpleAuth::from_single(Self::ACCESS_KEY, Self::SECRET_KEY));
        let s3 = builder.build();

        let listener = bind_at(ip)?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared { log: Mutex::new(Vec::new()), fault: Mutex::new(Fault::None) });
        let conn_shared = shared.clone();
        let rt = RtThread::spawn("cv-testkit-s3", 2, move |stop| {
            let listener = TcpListener::from_std(listener)?;
            Ok(accept_loop(listener, stop, move |stream| serve_connection(stream, conn_shared.clone(), s3.clone())))
        })?;
        Ok(S3Server { addr, root, shared, tmp_counter: AtomicU64::new(0), rt })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Creates the bucket's directory under root (no request is made). Existing is fine.
    pub fn create_bucket(&self, name: &str) -> io::Result<()> {
        std::fs::create_dir_all(self.bucket_dir(name)?)
    }

    /// Writes an object's file directly (test setup: not a request, not counted) and makes s3s-fs serve it
    /// like one it stored itself: s3s-fs keeps the ETag (and content type, user metadata, checksums) of an
    /// object in sidecar files under root and trusts them over the file's content, so those are replaced: the
    /// ETag becomes the MD5 of `bytes` (a replaced object gets a new ETag) and old metadata is dropped.
    /// The bucket must exist; parent "directories" of the key are created.
    pub fn put_object(&self, bucket: &str, key: &str, bytes: &[u8]) -> io::Result<()> {
        let bucket_dir = self.bucket_dir(bucket)?;
        if !bucket_dir.is_dir() {
            return Err(io::Error::new(io::ErrorKind::NotFound, format!("no bucket {bucket:?}")));
        }
        check_key(key)?;
        let path = bucket_dir.join(key);
        let internal = self.root.join(sidecar_name(bucket, key, "internal.json"));
        let metadata = self.root.join(sidecar_name(bucket, key, "metadata.json"));
        // Drop the old ETag first: until the new one is written, s3s-fs computes it from the file.
        remove_if_exists(&internal)?;
        remove_if_exists(&metadata)?;
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        self.write_atomically(&path, bytes)?;
        let mut md5 = Md5::new();
        md5.update(bytes);
        let e_tag: String = md5.finalize().iter().map(|b| format!("{b:02x}")).collect();
        // The format s3s-fs writes (`{"e_tag": ...}` plus optional checksums).
        self.write_atomically(&internal, format!("{{\"e_tag\":\"{e_tag}\"}}").as_bytes())
    }

    /// Every request served since start or the last [`Self::reset_requests`], in arrival order.
    pub fn requests(&self) -> Vec<Request> {
        lock(&self.shared.log).clone()
    }

    pub fn count(&self, f: impl Fn(&Request) -> bool) -> usize {
        lock(&self.shared.log).iter().filter(|r| f(r)).count()
    }

    pub fn reset_requests(&self) {
        lock(&self.shared.log).clear();
    }

    /// Failure injection for tests of a slow or failing store: every later request first waits `delay` and/or
    /// is answered with HTTP `status` (e.g. 503) without reaching s3s. `Fault::None` turns it off. Requests
    /// are logged either way.
    pub fn set_fault(&self, fault: Fault) {
        *lock(&self.shared.fault) = fault;
    }

    /// Stops accepting, drops open connections and joins the server thread (also done on drop).
    pub fn shutdown(mut self) {
        self.rt.stop();
    }

    fn bucket_dir(&self, bucket: &str) -> io::Result<PathBuf> {
        if !s3s::path::check_bucket_name(bucket) {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("invalid bucket name {bucket:?}")));
        }
        Ok(self.root.join(bucket))
    }

    /// Writes a temporary file directly under root (not inside a bucket, where a listing would see it), then
    /// renames it into place, so a concurrent request sees the old or the new content, never a partial one.
    fn write_atomically(&self, dest: &Path, bytes: &[u8]) -> io::Result<()> {
        let n = self.tmp_counter.fetch_add(1, Ordering::Relaxed);
        let tmp = self.root.join(format!(".cv-testkit.{}.{n}.tmp", std::process::id()));
        std::fs::write(&tmp, bytes)?;
        std::fs::rename(&tmp, dest).inspect_err(|_| {
            let _ = std::fs::remove_file(&tmp);
        })
    }
}

/// A key that maps to a file under the bucket: relative, no empty, `.` or `..` segments, not a "directory".
fn check_key(key: &str) -> io::Result<()> {
    let ok = !key.is_empty()
        && !key.starts_with('/')
        && !key.ends_with('/')
        && key.split('/').all(|seg| !seg.is_empty() && seg != "." && seg != "..")
        && Path::new(key).components().all(|c| matches!(c, Component::Normal(_)));
    if ok { Ok(()) } else { Err(io::Error::new(io::ErrorKind::InvalidInput, format!("unsupported key {key:?}"))) }
}

/// s3s-fs's sidecar file name for an object: `.bucket-{b64(bucket)}.object-{b64(key)}.{kind}`, URL-safe
/// base64 without padding (s3s-fs 0.14.1 `FileSystem::get_internal_info_path` / `get_metadata_path`).
fn sidecar_name(bucket: &str, key: &str, kind: &str) -> String {
    let b64 = |s: &str| base64_simd::URL_SAFE_NO_PAD.encode_to_string(s);
    format!(".bucket-{}.object-{}.{kind}", b64(bucket), b64(key))
}

fn remove_if_exists(path: &Path) -> io::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

async fn serve_connection(stream: TcpStream, shared: Arc<Shared>, s3: S3Service) {
    let service = service_fn(move |req| handle(shared.clone(), s3.clone(), req));
    let _ = http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
}

/// Logs the request, applies the fault, then hands it to s3s.
async fn handle(
    shared: Arc<Shared>,
    s3: S3Service,
    req: hyper::Request<Incoming>,
) -> Result<hyper::Response<s3s::Body>, s3s::HttpError> {
    let method = req.method().as_str().to_owned();
    let path = req.uri().path().to_owned();
    let query = req.uri().query().unwrap_or("").to_owned();
    let range = req.headers().get(hyper::header::RANGE).map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
    let is_copy = req.headers().contains_key("x-amz-copy-source");
    let op = classify(&method, &path, &query, range.is_some(), is_copy);
    lock(&shared.log).push(Request { method, path, query, range, op });

    let fault = lock(&shared.fault).clone();
    let (delay, status, shape) = match fault {
        Fault::None => (None, None, None),
        Fault::Delay(d) => (Some(d), None, None),
        Fault::Status(s) => (None, Some(s), None),
        Fault::DelayThenStatus(d, s) => (Some(d), Some(s), None),
        Fault::StallBody { after, stall } => (None, None, Some((after, Then::Stall(stall)))),
        Fault::CutBody { after } => (None, None, Some((after, Then::Cut))),
    };
    if let Some(delay) = delay {
        tokio::time::sleep(delay).await;
    }
    if let Some(status) = status {
        return Ok(fault_response(status));
    }
    let resp = s3.call(req.map(s3s::Body::from)).await?;
    Ok(match shape {
        Some((after, then)) => resp.map(|b| s3s::Body::http_body(Shaped::new(b, after, then))),
        None => resp,
    })
}

/// An S3-style XML error with the given status.
fn fault_response(status: u16) -> hyper::Response<s3s::Body> {
    let status = hyper::StatusCode::from_u16(status).unwrap_or(hyper::StatusCode::INTERNAL_SERVER_ERROR);
    let code = match status.as_u16() {
        403 => "AccessDenied",
        404 => "NoSuchKey",
        500 => "InternalError",
        503 => "ServiceUnavailable",
        _ => "InjectedFault",
    };
    let body = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>{code}</Code>\
         <Message>injected by cv-testkit</Message><RequestId>cv-testkit</RequestId></Error>"
    );
    let mut resp = hyper::Response::new(s3s::Body::from(body));
    *resp.status_mut() = status;
    resp.headers_mut().insert(hyper::header::CONTENT_TYPE, hyper::header::HeaderValue::from_static("application/xml"));
    resp
}
