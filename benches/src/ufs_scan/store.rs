//! The object store under the benchmarks: the in-process S3 server of
//! cv-testkit (which counts every request it serves; feature `embedded-s3`,
//! see `embedded_s3.rs`) or any OpenDAL URL with options; plain OpenDAL
//! operators on it for the direct side; and the per-operation request tally.

use crate::embedded_s3::{Op, Request, S3Server};
use crate::open_latency::BenchError;
use opendal::Operator;
use serde::Serialize;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// Bucket of the embedded store.
pub const EMBEDDED_BUCKET: &str = "cvbench";
/// Prefix of the benchmark's objects in it.
pub const EMBEDDED_PREFIX: &str = "lake";

/// Where the Parquet objects live.
#[derive(Debug)]
pub struct Store {
    url: String,
    options: Vec<(String, String)>,
    embedded: Option<S3Server>,
    /// The embedded store's objects under the URL's prefix, as plain files.
    local_dir: Option<PathBuf>,
}

impl Store {
    /// Starts cv-testkit's S3 server (s3s + s3s-fs over real HTTP on
    /// 127.0.0.1, SigV4) serving `dir`, with an empty bucket. Fails with
    /// how to get it when built without feature `embedded-s3`.
    pub fn embedded(dir: &Path) -> Result<Store, BenchError> {
        crate::embedded_s3::require()?;
        std::fs::create_dir_all(dir)?;
        let s3 = S3Server::start(dir)?;
        s3.create_bucket(EMBEDDED_BUCKET)?;
        let options = vec![
            ("endpoint".to_string(), s3.endpoint()),
            ("region".to_string(), S3Server::REGION.to_string()),
            ("access_key_id".to_string(), S3Server::ACCESS_KEY.to_string()),
            ("secret_access_key".to_string(), S3Server::SECRET_KEY.to_string()),
        ];
        let local_dir = Some(dir.join(EMBEDDED_BUCKET).join(EMBEDDED_PREFIX));
        Ok(Store { url: format!("s3://{EMBEDDED_BUCKET}/{EMBEDDED_PREFIX}"), options, embedded: Some(s3), local_dir })
    }

    /// Any location cv can mount (`s3://bucket/prefix`, `fs:///dir`) with
    /// its OpenDAL options (endpoint, region, credentials). Requests are not
    /// counted.
    pub fn external(url: &str, options: Vec<(String, String)>) -> Store {
        Store { url: url.to_string(), options, embedded: None, local_dir: None }
    }

    /// Where the embedded store keeps the objects under its URL's prefix: it serves files
    /// `root/bucket/key` (cv-testkit's `S3Server`), so a key is also a path under this
    /// directory. `None` for any other store.
    pub fn local_dir(&self) -> Option<&Path> {
        self.local_dir.as_deref()
    }

    /// The mount URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// OpenDAL options, with the endpoint replaced when `endpoint` is given
    /// (the delay proxy in front of the embedded server).
    pub fn options(&self, endpoint: Option<&str>) -> Vec<(String, String)> {
        let mut o: Vec<(String, String)> =
            self.options.iter().filter(|(k, _)| endpoint.is_none() || k != "endpoint").cloned().collect();
        if let Some(e) = endpoint {
            o.push(("endpoint".into(), e.into()));
        }
        o
    }

    /// The embedded server's address (the delay proxy's target).
    pub fn addr(&self) -> Option<SocketAddr> {
        self.embedded.as_ref().map(S3Server::addr)
    }

    /// The embedded server, whose request log tells what each side cost at the store.
    pub fn counter(&self) -> Option<&S3Server> {
        self.embedded.as_ref()
    }

    /// Plain OpenDAL on the store (no retry or timeout layer): the direct side.
    pub fn operator(&self, endpoint: Option<&str>) -> Result<Operator, BenchError> {
        cv_ufs::install();
        let loc = cv_ufs::Location::parse(&self.url)?;
        Ok(Operator::via_iter(loc.scheme, loc.config(&self.options(endpoint)))?)
    }

    /// Stores one object under the URL's prefix: a file write for the
    /// embedded server (setup, not a counted request), else an OpenDAL write.
    pub async fn put(&self, key: &str, bytes: Vec<u8>) -> Result<(), BenchError> {
        match &self.embedded {
            Some(s3) => Ok(s3.put_object(EMBEDDED_BUCKET, &format!("{EMBEDDED_PREFIX}/{key}"), &bytes)?),
            None => {
                self.operator(None)?.write(key, bytes).await?;
                Ok(())
            }
        }
    }

    /// Forgets the request log (the start of one measured operation).
    pub fn begin(&self) {
        if let Some(s3) = &self.embedded {
            s3.reset_requests();
        }
    }

    /// The requests served since [`Store::begin`]; `None` when not counted.
    pub fn take(&self) -> Option<Vec<Request>> {
        self.embedded.as_ref().map(|s3| {
            let r = s3.requests();
            s3.reset_requests();
            r
        })
    }
}

/// What one side cost at the store.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct StoreRequests {
    /// HEAD (stat).
    pub head: u64,
    /// GET, ranged or not.
    pub get: u64,
    /// Bytes asked for by ranged GETs.
    pub get_bytes: u64,
    /// LIST.
    pub list: u64,
    /// Anything else.
    pub other: u64,
}

impl StoreRequests {
    /// Tallies a request log.
    pub fn from_log(log: &[Request]) -> StoreRequests {
        let mut s = StoreRequests::default();
        for r in log {
            match r.op {
                Op::Head => s.head += 1,
                Op::Get | Op::RangedGet => {
                    s.get += 1;
                    s.get_bytes += r.range.as_deref().and_then(range_len).unwrap_or(0);
                }
                Op::List => s.list += 1,
                _ => s.other += 1,
            }
        }
        s
    }

    /// Adds another tally.
    pub fn add(&mut self, o: &StoreRequests) {
        self.head += o.head;
        self.get += o.get;
        self.get_bytes += o.get_bytes;
        self.list += o.list;
        self.other += o.other;
    }

    /// Every request.
    pub fn total(&self) -> u64 {
        self.head + self.get + self.list + self.other
    }
}

/// `bytes=a-b` → (a, b + 1); a suffix range has no start.
pub fn parse_range(range: &str) -> Option<(Option<u64>, u64)> {
    let (a, b) = range.strip_prefix("bytes=")?.split_once('-')?;
    if a.is_empty() {
        return Some((None, b.parse().ok()?));
    }
    Some((Some(a.parse().ok()?), b.parse::<u64>().ok()? + 1))
}

fn range_len(range: &str) -> Option<u64> {
    match parse_range(range)? {
        (Some(a), end) => Some(end.saturating_sub(a)),
        (None, n) => Some(n),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_parse() {
        assert_eq!(parse_range("bytes=0-1023"), Some((Some(0), 1024)));
        assert_eq!(parse_range("bytes=-16"), Some((None, 16)));
        assert_eq!(range_len("bytes=10-19"), Some(10));
        assert_eq!(parse_range("items=0-1"), None);
    }
}
