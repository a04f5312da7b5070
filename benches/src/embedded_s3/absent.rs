//! Stand-ins for cv-testkit's S3 server and delay proxy when feature
//! `embedded-s3` is off: the same names and the calls the benchmarks make, so
//! their code needs no `cfg`. The servers are uninhabited (starting one fails
//! with [`super::MISSING`]), so no request log is ever produced.

use std::io;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

fn missing() -> io::Error {
    io::Error::new(io::ErrorKind::Unsupported, super::MISSING)
}

/// One request of the (never produced) request log: the fields the benchmarks read.
#[derive(Clone, Debug)]
pub struct Request {
    /// The URI path, path-style: `/bucket/key`.
    pub path: String,
    /// The `Range` header.
    pub range: Option<String>,
    /// The S3 operation.
    pub op: Op,
}

/// The S3 operations the benchmarks tell apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Head,
    Get,
    RangedGet,
    List,
    Other,
}

/// The in-process S3 server, not built in: cannot exist.
#[derive(Debug)]
pub enum S3Server {}

impl S3Server {
    pub const ACCESS_KEY: &'static str = "";
    pub const SECRET_KEY: &'static str = "";
    pub const REGION: &'static str = "";

    /// Fails: not built in.
    pub fn start(_root: &Path) -> io::Result<S3Server> {
        Err(missing())
    }

    pub fn addr(&self) -> SocketAddr {
        match *self {}
    }

    pub fn endpoint(&self) -> String {
        match *self {}
    }

    pub fn create_bucket(&self, _name: &str) -> io::Result<()> {
        match *self {}
    }

    pub fn put_object(&self, _bucket: &str, _key: &str, _bytes: &[u8]) -> io::Result<()> {
        match *self {}
    }

    pub fn requests(&self) -> Vec<Request> {
        match *self {}
    }

    pub fn reset_requests(&self) {
        match *self {}
    }
}

/// The delaying TCP proxy, not built in: cannot exist.
#[derive(Debug)]
pub enum DelayProxy {}

impl DelayProxy {
    /// Fails: not built in.
    pub fn start(_target: SocketAddr, _one_way: Duration) -> io::Result<DelayProxy> {
        Err(missing())
    }

    pub fn endpoint(&self) -> String {
        match *self {}
    }

    pub fn shutdown(self) {
        match self {}
    }
}
