//! Mount URLs: `s3://bucket/prefix`, `fs:///abs/dir` (and `oss://`, `gcs://`,
//! `azblob://` when built with those features), turned into OpenDAL config.

use crate::error::{UfsError, UfsErrorKind};

/// A parsed mount URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    /// OpenDAL scheme name.
    pub scheme: &'static str,
    /// Bucket (container) for object stores; `None` for fs.
    pub bucket: Option<String>,
    /// Prefix inside the bucket (or directory for fs), always starting with `/`.
    pub root: String,
}

fn bad(msg: impl Into<String>) -> UfsError {
    UfsError::new(UfsErrorKind::Config, msg)
}

impl Location {
    pub fn parse(url: &str) -> Result<Location, UfsError> {
        let (scheme, rest) =
            url.split_once("://").ok_or_else(|| bad(format!("{url:?} is not a URL (scheme://...)")))?;
        let scheme = canonical_scheme(scheme)
            .ok_or_else(|| bad(format!("object store {scheme:?} is not built in (s3, fs{})", extra())))?;
        if scheme == "fs" {
            if !rest.starts_with('/') {
                return Err(bad(format!("{url:?}: fs URLs name an absolute directory, fs:///path")));
            }
            return Ok(Location { scheme, bucket: None, root: clean(rest) });
        }
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            return Err(bad(format!("{url:?} names no bucket")));
        }
        Ok(Location { scheme, bucket: Some(bucket.to_owned()), root: clean(prefix) })
    }

    /// OpenDAL configuration: the URL's parts, then the mount's options, with
    /// safe defaults (no credential lookups outside the options).
    pub fn config(&self, options: &[(String, String)]) -> Vec<(String, String)> {
        let mut cfg = vec![("root".to_owned(), self.root.clone())];
        if let Some(b) = &self.bucket {
            let key = if self.scheme == "azblob" { "container" } else { "bucket" };
            cfg.push((key.to_owned(), b.clone()));
        }
        if self.scheme == "s3" {
            // Credentials come from the mount's options only: never from the
            // environment, a profile file or the cloud metadata address.
            for (k, v) in [("disable_config_load", "true"), ("disable_ec2_metadata", "true"), ("region", "us-east-1")] {
                if !options.iter().any(|(o, _)| o == k) {
                    cfg.push((k.to_owned(), v.to_owned()));
                }
            }
        }
        cfg.extend(options.iter().cloned());
        cfg
    }
}

/// The OpenDAL scheme a URL's scheme names (`file` is `fs`, `gs` is `gcs`), if built in: what
/// a mount of that URL opens, so rules about mounts (the master's allow-list) match the same.
pub fn canonical_scheme(scheme: &str) -> Option<&'static str> {
    Some(match scheme {
        "s3" => "s3",
        "fs" | "file" => "fs",
        "oss" if cfg!(feature = "oss") => "oss",
        "gcs" | "gs" if cfg!(feature = "gcs") => "gcs",
        "azblob" if cfg!(feature = "azblob") => "azblob",
        _ => return None,
    })
}

fn extra() -> &'static str {
    match (cfg!(feature = "oss"), cfg!(feature = "gcs"), cfg!(feature = "azblob")) {
        (false, false, false) => "; oss, gcs and azblob are cargo features of cv-ufs",
        _ => ", and the enabled oss/gcs/azblob",
    }
}

/// `/a/b/` form: leading slash, no doubled or trailing slashes.
fn clean(p: &str) -> String {
    let parts: Vec<&str> = p.split('/').filter(|s| !s.is_empty()).collect();
    if parts.is_empty() { "/".to_owned() } else { format!("/{}/", parts.join("/")) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_parse() {
        let l = Location::parse("s3://bucket/some//prefix/").unwrap();
        assert_eq!((l.scheme, l.bucket.as_deref(), l.root.as_str()), ("s3", Some("bucket"), "/some/prefix/"));
        let l = Location::parse("s3://b").unwrap();
        assert_eq!(l.root, "/");
        let l = Location::parse("fs:///tmp/x").unwrap();
        assert_eq!((l.scheme, l.bucket, l.root.as_str()), ("fs", None, "/tmp/x/"));
        for bad in ["bucket/x", "s3:///x", "fs://relative", "ftp://h/x"] {
            assert_eq!(Location::parse(bad).unwrap_err().kind(), UfsErrorKind::Config, "{bad}");
        }
    }

    #[test]
    fn options_override_defaults() {
        let l = Location::parse("s3://b/p").unwrap();
        let cfg = l.config(&[("region".into(), "eu-west-1".into())]);
        assert_eq!(cfg.iter().filter(|(k, _)| k == "region").count(), 1);
        assert!(cfg.contains(&("disable_ec2_metadata".into(), "true".into())));
    }
}
