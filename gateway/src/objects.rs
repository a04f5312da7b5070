//! Buckets and keys as cv paths, and what S3 says about an object (ETag,
//! Last-Modified, conditions) from its cv status.

use crate::config::{GatewaySettings, normalized};
use crate::errors::s3_err;
use cv_client::{FileKind, FileStatus};
use s3s::dto::{ETag, ETagCondition, Timestamp};
use s3s::{S3ErrorCode, S3Result};
use std::collections::HashMap;
use std::time::{Duration, UNIX_EPOCH};

/// Longest key S3 accepts, in bytes.
const MAX_KEY: usize = 1024;

/// One configured bucket.
#[derive(Clone, Debug)]
pub(crate) struct BucketDir {
    /// Its cv directory, without a trailing `/` (the root is `/`).
    pub path: String,
}

/// The configured buckets, and the directory the gateway keeps to itself.
#[derive(Clone, Debug)]
pub(crate) struct Buckets {
    by_name: HashMap<String, BucketDir>,
    names: Vec<String>,
    /// The multipart uploads' directory, without a trailing `/`.
    pub uploads: String,
}

impl Buckets {
    pub fn new(cfg: &GatewaySettings) -> Self {
        let by_name: HashMap<_, _> =
            cfg.buckets.iter().map(|b| (b.name.clone(), BucketDir { path: normalized(&b.path) })).collect();
        let mut names: Vec<_> = by_name.keys().cloned().collect();
        names.sort();
        Buckets { by_name, names, uploads: normalized(&cfg.uploads) }
    }

    /// Bucket names, sorted.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    pub fn get(&self, bucket: &str) -> S3Result<&BucketDir> {
        self.by_name.get(bucket).ok_or_else(|| s3_err(S3ErrorCode::NoSuchBucket, format!("no bucket {bucket}")))
    }

    /// The cv path of `key` in `bucket`. A key ending in `/` names a
    /// directory (a "folder" marker); other keys name files.
    pub fn path_of(&self, bucket: &str, key: &str) -> S3Result<String> {
        let dir = self.get(bucket)?;
        check_key(key)?;
        let path = join(&dir.path, key.trim_end_matches('/'));
        if self.is_private(&path) {
            return Err(s3_err(S3ErrorCode::AccessDenied, format!("{bucket}/{key} is reserved by the gateway")));
        }
        Ok(path)
    }

    /// Whether `path` is the gateway's own directory or inside it.
    pub fn is_private(&self, path: &str) -> bool {
        path == self.uploads || path.strip_prefix(&self.uploads).is_some_and(|rest| rest.starts_with('/'))
    }
}

/// `dir` + `/` + `rel`.
pub(crate) fn join(dir: &str, rel: &str) -> String {
    if dir == "/" { format!("/{rel}") } else { format!("{dir}/{rel}") }
}

/// Refuses keys that are no cv path: empty segments (`a//b`, a leading `/`), `.`
/// and `..`, control characters, over 1024 bytes.
pub(crate) fn check_key(key: &str) -> S3Result<()> {
    let bad = |why: &str| Err(s3_err(S3ErrorCode::InvalidArgument, format!("key {key:?}: {why}")));
    if key.is_empty() || key.len() > MAX_KEY {
        return bad("keys are 1 to 1024 bytes");
    }
    if key.chars().any(char::is_control) {
        return bad("control characters are not allowed");
    }
    let body = key.strip_suffix('/').unwrap_or(key);
    if body.is_empty() || body.split('/').any(|s| s.is_empty() || s == "." || s == "..") {
        return bad("cv keeps keys as paths: no empty, `.` or `..` segments");
    }
    Ok(())
}

/// The object's ETag: its cv file id and version, which change with every new
/// content (a rewrite makes a new version, a new file a new id).
pub(crate) fn etag(st: &FileStatus) -> ETag {
    ETag::Strong(format!("{:016x}{:016x}", st.id, st.version))
}

pub(crate) fn last_modified(st: &FileStatus) -> Timestamp {
    Timestamp::from(UNIX_EPOCH + Duration::from_millis(st.mtime_ms))
}

/// Whether a status is an object S3 should show: a complete file (a file being
/// written appears when it completes, as an S3 upload does).
pub(crate) fn is_object(st: &FileStatus) -> bool {
    st.kind == FileKind::File && st.complete
}

/// How a read's conditions come out.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    Serve,
    /// `If-None-Match` matched: 304.
    NotModified,
}

/// `If-Match` / `If-None-Match` of a GET or HEAD against the object's ETag
/// (RFC 9110 §13.2.2: If-Match first, then If-None-Match).
pub(crate) fn check_read(
    st: &FileStatus,
    if_match: Option<&ETagCondition>,
    if_none_match: Option<&ETagCondition>,
) -> S3Result<Verdict> {
    let tag = etag(st);
    if let Some(c) = if_match
        && !matches_condition(c, &tag)
    {
        return Err(s3_err(S3ErrorCode::PreconditionFailed, "If-Match: the object's ETag differs"));
    }
    if let Some(c) = if_none_match
        && matches_condition(c, &tag)
    {
        return Ok(Verdict::NotModified);
    }
    Ok(Verdict::Serve)
}

pub(crate) fn matches_condition(c: &ETagCondition, tag: &ETag) -> bool {
    match c {
        ETagCondition::Any => true,
        ETagCondition::ETag(t) => t.value() == tag.value(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Bucket;

    fn buckets(path: &str) -> Buckets {
        let cfg = GatewaySettings {
            buckets: vec![Bucket { name: "lake".into(), path: path.into(), public: false }],
            ..GatewaySettings::default()
        };
        Buckets::new(&cfg)
    }

    #[test]
    fn keys_map_to_paths_and_bad_keys_are_refused() {
        let b = buckets("/w/");
        assert_eq!(b.path_of("lake", "t/a.parquet").unwrap(), "/w/t/a.parquet");
        assert_eq!(b.path_of("lake", "t/").unwrap(), "/w/t");
        for bad in ["", "/a", "a//b", "a/./b", "../x", "a/..", "a\nb", "/"] {
            assert!(b.path_of("lake", bad).is_err(), "{bad:?}");
        }
        assert_eq!(*b.path_of("pond", "a").unwrap_err().code(), S3ErrorCode::NoSuchBucket);
        let root = buckets("/");
        assert_eq!(root.path_of("lake", "a").unwrap(), "/a");
        let e = root.path_of("lake", ".cv-gateway/uploads/x/1").unwrap_err();
        assert_eq!(*e.code(), S3ErrorCode::AccessDenied);
        assert!(root.path_of("lake", ".cv-gateway/other").is_ok());
    }

    #[test]
    fn conditions() {
        let st = FileStatus {
            id: 7,
            path: "/w/a".into(),
            kind: FileKind::File,
            length: 3,
            mtime_ms: 1,
            version: 9,
            mode: 0o644,
            complete: true,
            block_size: 1 << 20,
        };
        let tag = etag(&st);
        let same = ETagCondition::ETag(tag.clone());
        let other = ETagCondition::ETag(ETag::Strong("0".into()));
        assert_eq!(check_read(&st, Some(&same), None).unwrap(), Verdict::Serve);
        assert_eq!(*check_read(&st, Some(&other), None).unwrap_err().code(), S3ErrorCode::PreconditionFailed);
        assert_eq!(check_read(&st, None, Some(&same)).unwrap(), Verdict::NotModified);
        assert_eq!(check_read(&st, None, Some(&ETagCondition::Any)).unwrap(), Verdict::NotModified);
        assert_eq!(check_read(&st, None, Some(&other)).unwrap(), Verdict::Serve);
    }
}
