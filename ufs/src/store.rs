//! [`Ufs`]: one mount's object store, with a deadline and bounded retries on
//! every call (OpenDAL's timeout and retry layers).

use crate::error::{UfsError, UfsErrorKind};
use crate::location::Location;
use crate::settings::UfsSettings;
use crate::stream::{UfsStream, read_error};
use bytes::Bytes;
use opendal::Operator;
use opendal::layers::{RetryLayer, TimeoutLayer};
use std::ops::Range;
use std::sync::Arc;
use std::time::Instant;

use crate::stats::{UfsOp, UfsStats};

/// What cv records about one object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectMeta {
    pub len: u64,
    /// The object's version: its ETag, else `m<mtime>-l<len>`. Changes when
    /// the content changes; cv keys every cached byte by it.
    pub version: String,
    pub mtime_ms: u64,
}

impl ObjectMeta {
    /// The length and modification time a version made up by cv (`m<mtime>-l<len>`, for an
    /// object without an ETag) stands for.
    pub fn from_made_up(version: &str) -> Option<ObjectMeta> {
        let (mtime, rest) = version.strip_prefix('m')?.split_once("-l")?;
        let len = rest.split('-').next()?.parse().ok()?;
        Some(ObjectMeta { len, version: version.to_owned(), mtime_ms: mtime.parse().ok()? })
    }

    /// Whether `other` describes the same content. Two ETags are compared; when either side
    /// has none (some stores' listings carry no ETag where a HEAD does), length and
    /// modification time to the second are (HTTP dates have whole seconds).
    pub fn same_version(&self, other: &ObjectMeta) -> bool {
        if is_etag(&self.version) && is_etag(&other.version) {
            return self.version == other.version;
        }
        // Two local files' identities (recorded by this release on): inode and change time.
        if let (Some(a), Some(b)) = (identity(&self.version), identity(&other.version)) {
            return a == b && self.len == other.len;
        }
        self.len == other.len && self.mtime_ms / 1000 == other.mtime_ms / 1000
    }
}

/// One child of a listed directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UfsEntry {
    /// Name inside the directory (no slashes).
    pub name: String,
    /// `None` for a directory.
    pub meta: Option<ObjectMeta>,
}

/// One mount's object store.
#[derive(Debug, Clone)]
pub struct Ufs {
    op: Operator,
    location: Location,
    /// Attempts per call (the first and its retries), for errors.
    attempts: usize,
    /// Requests counted per kind, for metrics.
    stats: Arc<UfsStats>,
}

impl Ufs {
    /// An operator for `url` with `options`; makes no call to the store. `s` gives the
    /// deadlines and retries, changed by the mount's `cv.*` options (see [`crate::CV_OPTIONS`]);
    /// the other options configure the OpenDAL service.
    pub fn connect(url: &str, options: &[(String, String)], s: &UfsSettings) -> Result<Ufs, UfsError> {
        crate::install();
        let location = Location::parse(url)?;
        let s = &s.with_mount_options(options)?;
        let store_options: Vec<(String, String)> =
            options.iter().filter(|(k, _)| !crate::is_cv_option(k)).cloned().collect();
        let op = Operator::via_iter(location.scheme, location.config(&store_options))
            .map_err(|e| UfsError::from_opendal(format!("configure {url}"), e))?
            .layer(
                RetryLayer::new()
                    .with_max_times(s.retries)
                    .with_min_delay(s.min_backoff)
                    .with_max_delay(s.max_backoff)
                    .with_jitter(),
            )
            // Inside the retry layer, so each attempt has its own deadline.
            .layer(TimeoutLayer::new().with_timeout(s.op_timeout).with_io_timeout(s.io_timeout));
        Ok(Ufs { op, location, attempts: s.retries + 1, stats: Arc::default() })
    }

    /// This store's requests counted into `stats` (shared by the process's stores).
    pub fn with_stats(mut self, stats: Arc<UfsStats>) -> Ufs {
        self.stats = stats;
        self
    }

    /// Counts one request of `op` begun at `started` with its outcome, and passes it on.
    fn counted<T>(&self, op: UfsOp, started: Instant, r: Result<T, UfsError>) -> Result<T, UfsError> {
        self.stats.record(op, started, r.is_ok());
        r
    }

    pub fn location(&self) -> &Location {
        &self.location
    }

    /// `what` with the store it was asked of and how many attempts it got, so an error
    /// says which store failed and after how many tries.
    fn at(&self, what: impl std::fmt::Display) -> String {
        let l = &self.location;
        let bucket = l.bucket.as_deref().unwrap_or("");
        format!("{what} at {}://{bucket}{} (up to {} attempts)", l.scheme, l.root, self.attempts)
    }

    /// Lists the root once (one page, whatever the bucket holds): the mount is reachable and
    /// the credentials work.
    pub async fn check(&self) -> Result<(), UfsError> {
        let started = Instant::now();
        let r = self.check_inner().await;
        self.counted(UfsOp::List, started, r)
    }

    async fn check_inner(&self) -> Result<(), UfsError> {
        use futures::StreamExt;
        let mut lister =
            self.op.lister_with("/").limit(1).await.map_err(|e| UfsError::from_opendal(self.at("list /"), e))?;
        match lister.next().await {
            Some(Err(e)) => Err(UfsError::from_opendal(self.at("list /"), e)),
            Some(Ok(_)) | None => Ok(()),
        }
    }

    pub async fn stat(&self, key: &str) -> Result<ObjectMeta, UfsError> {
        let started = Instant::now();
        let r = self.op.stat(key).await.map_err(|e| UfsError::from_opendal(self.at(format!("stat {key}")), e));
        let m = self.counted(UfsOp::Stat, started, r)?;
        if m.is_dir() {
            return Err(UfsError::new(UfsErrorKind::NotFound, format!("{key} is a directory")));
        }
        Ok(self.identified(key, meta(&m)))
    }

    /// A local file (fs://) has no ETag, and its modification time can be set back: its
    /// version also names the file's identity, its inode and its change time (which no one
    /// sets), so a rewrite in place with its length and modification time kept is a new
    /// version. Other stores' metadata is returned as it is.
    fn identified(&self, key: &str, mut m: ObjectMeta) -> ObjectMeta {
        use std::os::unix::fs::MetadataExt;
        if self.location.scheme != "fs" || is_etag(&m.version) {
            return m;
        }
        let path = std::path::Path::new(&self.location.root).join(key.trim_start_matches('/'));
        if let Ok(md) = std::fs::metadata(&path)
            && md.len() == m.len
        {
            let ctime_ns = md.ctime().max(0) as u128 * 1_000_000_000 + md.ctime_nsec().max(0) as u128;
            m.version = format!("{}-i{}-c{ctime_ns}", m.version, md.ino());
        }
        m
    }

    /// Bytes `range` of `key`, whole ([`Ufs::read_stream`] gathered). With `version` (an
    /// ETag), the store refuses if the object changed since.
    pub async fn read(&self, key: &str, range: Range<u64>, version: Option<&str>) -> Result<Bytes, UfsError> {
        let mut stream = self.read_stream(key, range.clone(), version).await?;
        let Some(first) = stream.next().await.transpose()? else { return Ok(Bytes::new()) };
        if first.len() as u64 == range.end - range.start {
            return Ok(first);
        }
        let mut all = bytes::BytesMut::with_capacity((range.end - range.start) as usize);
        all.extend_from_slice(&first);
        while let Some(piece) = stream.next().await {
            all.extend_from_slice(&piece?);
        }
        Ok(all.freeze())
    }

    /// Bytes `range` of `key` as the store delivers them, from one GET: a caller forwards
    /// the first bytes before the last have arrived. With `version` (an ETag) the store
    /// refuses if the object changed since. The stream ends with a `Changed` error if the
    /// object turns out shorter than the range.
    pub async fn read_stream(
        &self,
        key: &str,
        range: Range<u64>,
        version: Option<&str>,
    ) -> Result<UfsStream, UfsError> {
        let started = Instant::now();
        let r = self.read_stream_inner(key, range, version).await;
        self.counted(UfsOp::Read, started, r)
    }

    async fn read_stream_inner(
        &self,
        key: &str,
        range: Range<u64>,
        version: Option<&str>,
    ) -> Result<UfsStream, UfsError> {
        let what = || self.at(format_args!("read {key} {range:?}"));
        let mut req = self.op.reader_with(key);
        if let Some(v) = version.filter(|v| is_etag(v)) {
            req = req.if_match(v);
        }
        // Without an ETag the read is made conditional on the modification time where the
        // store takes that (S3: If-Unmodified-Since, whole seconds, no extra request); else
        // (fs://) the object is looked at again after its bytes arrived and before the last
        // of them are handed out. A rewrite before or during the read changed its modification
        // time or length by then.
        let mut recheck = version.filter(|v| !is_etag(v)).and_then(ObjectMeta::from_made_up);
        if let Some(want) = &recheck
            && self.op.info().capability().read_with_if_unmodified_since
            && let Ok(at) = opendal::raw::Timestamp::from_second((want.mtime_ms / 1000) as i64)
        {
            req = req.if_unmodified_since(at);
            recheck = None;
        }
        let reader = req.await.map_err(|e| read_error(what(), e))?;
        let inner = if range.is_empty() {
            None
        } else {
            Some(reader.into_stream(range.clone()).await.map_err(|e| read_error(what(), e))?)
        };
        let stream = UfsStream::new(inner, range.end - range.start, what());
        Ok(match recheck {
            Some(want) => stream.with_recheck(Box::pin(self.clone().recheck(key.to_owned(), want, what()))),
            None => stream,
        })
    }

    /// Fails with `Changed` unless `key` is still the version `want` describes.
    async fn recheck(self, key: String, want: ObjectMeta, what: String) -> Result<(), UfsError> {
        let now = self.stat(&key).await?;
        if now.same_version(&want) {
            return Ok(());
        }
        let why = format!("{what}: the object changed since cv recorded it ({}, now {})", want.version, now.version);
        Err(UfsError::new(UfsErrorKind::Changed, why))
    }

    /// The children of directory `dir` (relative, `""` for the root), one
    /// level, sorted by name.
    pub async fn list_dir(&self, dir: &str) -> Result<Vec<UfsEntry>, UfsError> {
        let d = if dir.is_empty() || dir == "/" { "/".to_owned() } else { format!("{}/", dir.trim_matches('/')) };
        let started = Instant::now();
        let r = self.op.list(&d).await.map_err(|e| UfsError::from_opendal(self.at(format!("list {d}")), e));
        let entries = self.counted(UfsOp::List, started, r)?;
        let mut out = Vec::with_capacity(entries.len());
        for e in entries {
            let name = e.name().trim_end_matches('/');
            if name.is_empty() || e.path() == d || e.path().trim_start_matches('/') == d.trim_start_matches('/') {
                continue;
            }
            let m = e.metadata();
            let meta = if m.is_dir() {
                None
            } else if self.location.scheme == "fs" || m.last_modified().is_none() {
                // Listings of some stores carry no size or date: ask.
                Some(self.stat(e.path()).await?)
            } else {
                Some(meta(m))
            };
            out.push(UfsEntry { name: name.to_owned(), meta });
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    /// A writer that uploads `key` in `chunk`-byte parts (multipart on S3
    /// for objects larger than one chunk); nothing is visible until close.
    pub async fn writer(&self, key: &str, chunk: usize) -> Result<UfsWriter, UfsError> {
        let started = Instant::now();
        let w = self
            .op
            .writer_with(key)
            .chunk(chunk)
            .await
            .map_err(|e| UfsError::from_opendal(self.at(format!("write {key}")), e));
        let w = match w {
            Ok(w) => w,
            Err(e) => return self.counted(UfsOp::Write, started, Err(e)),
        };
        Ok(UfsWriter { w, key: key.to_owned(), len: 0, what: self.at(format!("write {key}")), started })
    }

    /// Copies `from` to `to` inside the store (S3 CopyObject: no bytes through cv, objects up to
    /// 5 GiB); the copy's metadata, whose ETag may differ from the source's.
    pub async fn copy(&self, from: &str, to: &str) -> Result<ObjectMeta, UfsError> {
        let started = Instant::now();
        let r = self
            .op
            .copy(from, to)
            .await
            .map_err(|e| UfsError::from_opendal(self.at(format!("copy {from} to {to}")), e));
        self.counted(UfsOp::Copy, started, r)?;
        self.stat(to).await
    }

    pub async fn delete(&self, key: &str) -> Result<(), UfsError> {
        let started = Instant::now();
        let r = self.op.delete(key).await.map_err(|e| UfsError::from_opendal(self.at(format!("delete {key}")), e));
        self.counted(UfsOp::Delete, started, r)
    }
}

/// An upload in progress.
pub struct UfsWriter {
    w: opendal::Writer,
    key: String,
    len: u64,
    /// The write and its store, for errors.
    what: String,
    /// When the upload began: it is counted as one request when it ends.
    started: Instant,
}

impl std::fmt::Debug for UfsWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UfsWriter").field("key", &self.key).field("len", &self.len).finish()
    }
}

impl UfsWriter {
    pub async fn write(&mut self, bytes: Bytes) -> Result<(), UfsError> {
        self.len += bytes.len() as u64;
        self.w.write(bytes).await.map_err(|e| UfsError::from_opendal(&self.what, e))
    }

    /// Finishes the upload; the object's metadata as stored.
    pub async fn close(mut self, ufs: &Ufs) -> Result<ObjectMeta, UfsError> {
        let r = self.w.close().await.map_err(|e| UfsError::from_opendal(format!("finish of {}", self.what), e));
        let m = ufs.counted(UfsOp::Write, self.started, r)?;
        // Not every store returns the new ETag with the upload: ask then.
        if m.etag().is_some() && m.content_length() == self.len {
            return Ok(meta(&m));
        }
        ufs.stat(&self.key).await
    }

    /// Gives up: no object appears.
    pub async fn abort(mut self) {
        if let Err(e) = self.w.abort().await {
            tracing::warn!(key = %self.key, error = %e, "abort upload");
        }
    }
}

fn meta(m: &opendal::Metadata) -> ObjectMeta {
    let len = m.content_length();
    let mtime_ms = m.last_modified().map(|t| t.into_inner().as_millisecond().max(0) as u64).unwrap_or(0);
    let version = match m.etag() {
        Some(e) if !e.is_empty() => e.to_owned(),
        _ => format!("m{mtime_ms}-l{len}"),
    };
    ObjectMeta { len, version, mtime_ms }
}

/// The identity part (`-i<inode>-c<ctime ns>`) of a version cv made up for a local file.
fn identity(v: &str) -> Option<&str> {
    (!is_etag(v)).then(|| v.find("-i").map(|i| &v[i..])).flatten()
}

/// Versions cv made up (`m…-l…`, with `-i…-c…` for a local file) are not ETags the store would
/// know.
fn is_etag(v: &str) -> bool {
    !(v.starts_with('m') && v.contains("-l"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_compare_by_etag_else_by_length_and_second() {
        let m = |version: &str, len, mtime_ms| ObjectMeta { len, version: version.into(), mtime_ms };
        assert!(m("\"a\"", 5, 1_000).same_version(&m("\"a\"", 5, 9_000)));
        assert!(!m("\"a\"", 5, 1_000).same_version(&m("\"b\"", 5, 1_000)));
        // A listing without ETag (ms dates) against a HEAD with one (second dates).
        assert!(m("m1796045180149-l10", 10, 1_796_045_180_149).same_version(&m("\"e\"", 10, 1_796_045_180_000)));
        assert!(!m("m1796045180149-l10", 10, 1_796_045_180_149).same_version(&m("\"e\"", 11, 1_796_045_180_000)));
        assert!(!m("m1796045180149-l10", 10, 1_796_045_180_149).same_version(&m("\"e\"", 10, 1_796_045_181_000)));
        // Local files: the identity decides, whatever the modification time says.
        let f = |v: &str| m(v, 10, 1_796_045_180_149);
        assert!(f("m1796045180149-l10-i7-c5").same_version(&f("m1796045180149-l10-i7-c5")));
        assert!(!f("m1796045180149-l10-i7-c5").same_version(&f("m1796045180149-l10-i7-c6")));
        assert!(f("m1796045180149-l10").same_version(&f("m1796045180149-l10-i7-c6")), "recorded before identities");
        assert_eq!(ObjectMeta::from_made_up("m5-l10-i7-c6").map(|o| (o.mtime_ms, o.len)), Some((5, 10)));
    }

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
    }

    #[test]
    fn fs_store_round_trip_list_and_versions() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("fs://{}", dir.path().display());
        let ufs = Ufs::connect(&url, &[], &UfsSettings::default()).unwrap();
        rt().block_on(async {
            ufs.check().await.unwrap();
            let mut w = ufs.writer("a/b.bin", 1 << 20).await.unwrap();
            w.write(Bytes::from_static(b"hello world")).await.unwrap();
            let m = w.close(&ufs).await.unwrap();
            assert_eq!(m.len, 11);
            assert_eq!(ufs.stat("a/b.bin").await.unwrap(), m);
            assert_eq!(&ufs.read("a/b.bin", 6..11, Some(&m.version)).await.unwrap()[..], b"world");
            assert_eq!(ufs.read("a/b.bin", 3..3, None).await.unwrap().len(), 0);
            let shorter = ufs.read("a/b.bin", 6..20, None).await.unwrap_err();
            assert!(shorter.kind() == UfsErrorKind::Changed, "{shorter}");
            let root = ufs.list_dir("").await.unwrap();
            assert_eq!(root, vec![UfsEntry { name: "a".into(), meta: None }]);
            let a = ufs.list_dir("a").await.unwrap();
            assert_eq!(a.len(), 1);
            assert_eq!(a[0].meta.as_ref().unwrap().len, 11);
            let missing = ufs.stat("nope").await.unwrap_err();
            assert_eq!(missing.kind(), UfsErrorKind::NotFound);
            assert!(!missing.is_retryable());
        });
    }

    /// An object without an ETag (fs://) rewritten with its length and modification time kept
    /// between the moment cv recorded it and a read: the read fails as `Changed` instead of
    /// mixing versions; a read of the new version recorded succeeds.
    #[test]
    fn a_read_of_a_rewritten_object_without_etag_fails_as_changed() {
        let dir = tempfile::tempdir().unwrap();
        let ufs = Ufs::connect(&format!("fs://{}", dir.path().display()), &[], &UfsSettings::default()).unwrap();
        rt().block_on(async {
            let file = dir.path().join("x.bin");
            std::fs::write(&file, b"aaaaaaaaaa").unwrap();
            let recorded = ufs.stat("x.bin").await.unwrap();
            assert!(ObjectMeta::from_made_up(&recorded.version).is_some(), "fs:// has no ETag: {recorded:?}");
            assert_eq!(&ufs.read("x.bin", 2..6, Some(&recorded.version)).await.unwrap()[..], b"aaaa");
            // Same length, and its modification time set back to what it was: the file's change
            // time still moved.
            let mtime = std::fs::metadata(&file).unwrap().modified().unwrap();
            std::thread::sleep(std::time::Duration::from_millis(20));
            std::fs::write(&file, b"bbbbbbbbbb").unwrap();
            std::fs::File::options().write(true).open(&file).unwrap().set_modified(mtime).unwrap();
            assert_eq!(std::fs::metadata(&file).unwrap().modified().unwrap(), mtime);
            let e = ufs.read("x.bin", 2..6, Some(&recorded.version)).await.unwrap_err();
            assert_eq!(e.kind(), UfsErrorKind::Changed, "{e}");
            assert!(e.to_string().contains("changed since cv recorded it"), "{e}");
            let now = ufs.stat("x.bin").await.unwrap();
            assert_eq!(&ufs.read("x.bin", 2..6, Some(&now.version)).await.unwrap()[..], b"bbbb");
        });
    }
}
