//! ListObjects(V2) over cv's directory tree, in S3's order (keys sorted by
//! their bytes), one directory listing per directory visited.
//!
//! A directory's entries are sorted by the key they stand for (a file `a`
//! as `a`, a directory `a` as `a/`), so a depth-first walk yields keys in
//! order. With delimiter `/` a directory under the prefix is one common
//! prefix and is not entered; with another delimiter the walk goes down and
//! groups keys. Subtrees that cannot hold a key after the start point, or
//! under the prefix, are not listed at all.

use crate::errors::s3_error;
use crate::objects::{BucketDir, Buckets, is_object, join};
use cv_client::{Client, ErrorKind, FileKind, FileStatus};
use s3s::S3Result;

/// Names the FUSE mount gives versions it is still publishing: never objects.
const STAGING_PREFIX: &str = ".cv-stage-";

/// What one list request asks.
#[derive(Debug)]
pub(crate) struct Query<'a> {
    pub prefix: &'a str,
    pub delimiter: Option<&'a str>,
    /// Keys and common prefixes up to here are skipped (`start-after`, the
    /// continuation token, V1's marker).
    pub after: &'a str,
    pub max: usize,
}

/// One page of a listing.
#[derive(Debug, Default)]
pub(crate) struct Page {
    pub objects: Vec<(String, FileStatus)>,
    pub prefixes: Vec<String>,
    /// More keys follow; continue after `last`.
    pub truncated: bool,
    /// The last key or prefix in this page.
    pub last: Option<String>,
}

/// A directory's entries as (the key each stands for, status), sorted by key in reverse,
/// so the next in order is popped from the end.
type Entries = Vec<(String, FileStatus)>;

enum Item {
    Object(String, FileStatus),
    Prefix(String),
}

pub(crate) async fn list(
    client: &Client,
    buckets: &Buckets,
    dir: &BucketDir,
    bucket: &str,
    q: &Query<'_>,
) -> S3Result<Page> {
    let mut page = Page::default();
    if q.max == 0 {
        return Ok(page);
    }
    let start_key = &q.prefix[..q.prefix.rfind('/').map_or(0, |i| i + 1)];
    let mut stack = Vec::new();
    if let Some(f) = frame(client, buckets, dir, bucket, start_key).await? {
        stack.push(f);
    }
    let mut items = 0usize;
    while let Some(top) = stack.last_mut() {
        let Some((key, st)) = top.pop() else {
            stack.pop();
            continue;
        };
        let item = if st.kind == FileKind::Dir {
            if !(key.starts_with(q.prefix) || q.prefix.starts_with(&key)) {
                continue;
            }
            if q.delimiter == Some("/") && key.starts_with(q.prefix) {
                Item::Prefix(key)
            } else if listed(&key, q.after) {
                continue;
            } else {
                if let Some(f) = frame(client, buckets, dir, bucket, &key).await? {
                    stack.push(f);
                }
                continue;
            }
        } else {
            if !key.starts_with(q.prefix) || key.as_str() <= q.after {
                continue;
            }
            match q.delimiter.and_then(|d| key[q.prefix.len()..].find(d).map(|i| q.prefix.len() + i + d.len())) {
                Some(end) => Item::Prefix(key[..end].to_string()),
                None => Item::Object(key, st),
            }
        };
        if let Item::Prefix(p) = &item
            && (covered(p, q.after) || page.prefixes.last() == Some(p))
        {
            continue;
        }
        if items == q.max {
            page.truncated = true;
            break;
        }
        items += 1;
        match item {
            Item::Object(k, st) => {
                page.last = Some(k.clone());
                page.objects.push((k, st));
            }
            Item::Prefix(p) => {
                page.last = Some(p.clone());
                page.prefixes.push(p);
            }
        }
    }
    Ok(page)
}

/// Whether every key starting with `prefix` is before `after`: a subtree
/// listed already.
fn listed(prefix: &str, after: &str) -> bool {
    !after.is_empty() && prefix < after && !after.starts_with(prefix)
}

/// Whether common prefix `prefix` was returned already: it is at or before
/// `after`, or `after` is a key under it.
fn covered(prefix: &str, after: &str) -> bool {
    !after.is_empty() && (prefix <= after || after.starts_with(prefix))
}

/// The sorted entries of the directory of keys starting with `key`; `None`
/// when there is no such directory.
async fn frame(
    client: &Client,
    buckets: &Buckets,
    dir: &BucketDir,
    bucket: &str,
    key: &str,
) -> S3Result<Option<Entries>> {
    let path = if key.is_empty() { dir.path.clone() } else { join(&dir.path, key.trim_end_matches('/')) };
    let listed = match client.list(&path).await {
        Ok(v) => v,
        Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) => return Ok(None),
        Err(e) => return Err(s3_error(&e, &format!("{bucket}/{key}"))),
    };
    let mut entries: Entries = listed
        .into_iter()
        .filter(|st| !buckets.is_private(&st.path))
        .filter_map(|st| {
            let name = st.path.rsplit('/').next().unwrap_or_default();
            if name.starts_with(STAGING_PREFIX) {
                return None;
            }
            match st.kind {
                FileKind::Dir => Some((format!("{key}{name}/"), st)),
                _ if is_object(&st) => Some((format!("{key}{name}"), st)),
                _ => None,
            }
        })
        .collect();
    entries.sort_by(|a, b| b.0.cmp(&a.0));
    Ok(Some(entries))
}

/// Percent-encodes a key for `encoding-type=url` (all but unreserved characters and `/`).
pub(crate) fn url_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~/".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn covered_subtrees() {
        assert!(!covered("a/", ""));
        assert!(covered("a/", "a/"));
        assert!(covered("a/", "a/x"));
        assert!(covered("a/", "b"));
        assert!(!covered("b/", "a/zzz"));
        assert!(!listed("a/", "a/x"), "a subtree holding the start point is entered");
        assert!(listed("a/", "b") && !listed("b/", "a/zzz") && !listed("a/", ""));
        assert_eq!(url_encode("a b/ü+%.txt"), "a%20b/%C3%BC%2B%25.txt");
    }
}
