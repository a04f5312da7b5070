//! What may be mounted (`[master.mounts]`). A mount makes the master and every worker read,
//! and under fs mode write and delete, whatever its URL names, with HTTP requests to whatever
//! its `endpoint` option names: so only what the operator lists. By default: any S3 bucket
//! at the store's own endpoint, no local directory (`fs://`), no other endpoint. And never,
//! whatever is listed, a local directory that holds or lies inside the master's own files
//! (its journal, Raft log and certificates: they hold every mount's credentials and the
//! node's key).

use serde::{Deserialize, Serialize};
use std::path::{Component, Path, PathBuf};

/// `[master.mounts]`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MountPolicy {
    /// URL prefixes that may be mounted, matched whole path components at a time: `s3://`
    /// (any bucket), `s3://lake` (that bucket), `fs:///data/lake` (that directory and below).
    pub allow: Vec<String>,
    /// Endpoints a mount's `endpoint` options may name: `http://10.0.0.5:9000`, or any port
    /// of a host with `http://127.0.0.1:*`.
    pub endpoints: Vec<String>,
    /// Directories no `fs://` mount may hold or lie in: set by whoever starts the master
    /// (its journal directory, its certificates' directories), not read from the file.
    #[serde(skip)]
    pub private: Vec<PathBuf>,
}

impl Default for MountPolicy {
    fn default() -> Self {
        MountPolicy { allow: vec!["s3://".into()], endpoints: Vec::new(), private: Vec::new() }
    }
}

/// Why a text is not a URL or endpoint, or why a mount is refused.
pub(crate) type Refused = String;

/// A mount the policy does not take.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Denied {
    /// The URL or an endpoint option is not well formed.
    Invalid(String),
    /// Well formed, but not what the operator allows.
    NotAllowed(String),
}

#[cfg(test)]
impl Denied {
    fn message(&self) -> &str {
        match self {
            Denied::Invalid(m) | Denied::NotAllowed(m) => m,
        }
    }
}

impl MountPolicy {
    /// This policy with `dir` private too.
    pub fn with_private(&self, dir: &Path) -> MountPolicy {
        let mut p = self.clone();
        p.private.push(dir.to_path_buf());
        p
    }

    /// Every entry parses; the error names the field and the entry.
    pub fn validate(&self, section: &str) -> Result<(), cv_net::config::ConfigError> {
        for a in &self.allow {
            allowed_entry(a).map_err(|e| cv_net::config::ConfigError::new(format!("{section}.allow"), e))?;
        }
        for e in &self.endpoints {
            Endpoint::parse(e, true)
                .map_err(|m| cv_net::config::ConfigError::new(format!("{section}.endpoints"), m))?;
        }
        Ok(())
    }

    /// Whether `url` with `options` may be mounted.
    pub(crate) fn check(&self, url: &str, options: &[(String, String)]) -> Result<(), Denied> {
        // Parsed as the store will open it (cv-ufs), so `file://` is `fs://` here too.
        let place = cv_ufs::Location::parse(url).map_err(|e| Denied::Invalid(e.to_string()))?;
        let scheme = place.scheme;
        let rest = match &place.bucket {
            None => fs_root(&place.root),
            Some(bucket) => clean(&format!("{bucket}{}", place.root)),
        }
        .map_err(Denied::Invalid)?;
        let allowed = self.allow.iter().any(|a| match allowed_entry(a) {
            Ok((s, r)) => s == scheme && under(&rest, r.trim_end_matches('/')),
            Err(_) => false,
        });
        if !allowed {
            return Err(Denied::NotAllowed(format!(
                "{url} is not among the mountable locations ([master.mounts] allow = {:?}); \
                 the operator may list it there",
                self.allow
            )));
        }
        if place.bucket.is_none() {
            let root = Path::new(&rest);
            for p in &self.private {
                let p = std::fs::canonicalize(p).unwrap_or_else(|_| p.clone());
                if p.starts_with(root) || root.starts_with(&p) {
                    let why = format!("{url} holds or lies in {}, the master's own files", p.display());
                    return Err(Denied::NotAllowed(why));
                }
            }
        }
        for (key, value) in options {
            if !key.to_ascii_lowercase().contains("endpoint") {
                continue;
            }
            let target = Endpoint::parse(value, false).map_err(|e| Denied::Invalid(format!("option {key}: {e}")))?;
            let listed = self.endpoints.iter().filter_map(|e| Endpoint::parse(e, true).ok()).any(|e| e.admits(&target));
            if !listed {
                return Err(Denied::NotAllowed(format!(
                    "option {key} = {value:?} is not among the endpoints mounts may use ([master.mounts] \
                     endpoints = {:?}); the operator may list it there",
                    self.endpoints
                )));
            }
        }
        Ok(())
    }
}

/// `scheme://rest` → (`scheme`, `rest`).
fn split_url(url: &str) -> Result<(&str, &str), Refused> {
    match url.split_once("://") {
        Some((s, r)) if !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric()) => Ok((s, r)),
        _ => Err(format!("{url:?} is not a URL (scheme://…)")),
    }
}

/// An allow-list entry: the store's scheme (as cv-ufs names it) and the path prefix after it.
fn allowed_entry(entry: &str) -> Result<(&'static str, &str), Refused> {
    let (scheme, rest) = split_url(entry)?;
    let scheme = cv_ufs::canonical_scheme(scheme).ok_or_else(|| format!("{entry:?}: no such object store"))?;
    Ok((scheme, rest))
}

/// `rest` without a trailing slash, refusing `.` and `..` components (they would walk out of
/// an allowed prefix).
fn clean(rest: &str) -> Result<String, Refused> {
    if rest.split('/').any(|c| c == "." || c == "..") {
        return Err(format!("{rest:?}: no . or .. components"));
    }
    Ok(rest.trim_end_matches('/').to_string())
}

/// A local directory as the kernel resolves it (symbolic links followed), so a link cannot
/// lead out of an allowed directory or into a private one.
fn fs_root(rest: &str) -> Result<String, Refused> {
    let path = Path::new(rest);
    if !path.is_absolute() || path.components().any(|c| matches!(c, Component::ParentDir | Component::CurDir)) {
        return Err(format!("fs://{rest}: an absolute path without . or .."));
    }
    let real = std::fs::canonicalize(path).map_err(|e| format!("fs://{rest}: {e}"))?;
    Ok(real.to_string_lossy().trim_end_matches('/').to_string())
}

/// Whether `rest` is `prefix` or below it, a whole component at a time (`lake` is not under
/// `la`). An empty prefix holds everything.
fn under(rest: &str, prefix: &str) -> bool {
    prefix.is_empty() || rest == prefix || rest.strip_prefix(prefix).is_some_and(|r| r.starts_with('/'))
}

/// `scheme://host:port` of an endpoint, the port `None` for any (`*`).
#[derive(Debug, PartialEq, Eq)]
struct Endpoint {
    scheme: String,
    host: String,
    port: Option<u16>,
}

impl Endpoint {
    /// Parses `text`; `pattern` allows `*` for the port.
    fn parse(text: &str, pattern: bool) -> Result<Endpoint, Refused> {
        let (scheme, rest) = split_url(text)?;
        let scheme = scheme.to_ascii_lowercase();
        let default = match scheme.as_str() {
            "http" => 80,
            "https" => 443,
            _ => return Err(format!("{text:?}: an endpoint is http:// or https://")),
        };
        let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
        if authority.contains('@') {
            return Err(format!("{text:?}: no user in an endpoint"));
        }
        let (host, port) = if let Some(h) = authority.strip_suffix(":*") {
            if !pattern {
                return Err(format!("{text:?}: a port, not *"));
            }
            (h, None)
        } else if let Some((h, p)) = authority.rsplit_once(':').filter(|(h, _)| !h.contains(':') || h.ends_with(']')) {
            (h, Some(p.parse::<u16>().map_err(|_| format!("{text:?}: bad port {p:?}"))?))
        } else {
            (authority, Some(default))
        };
        if host.is_empty() {
            return Err(format!("{text:?}: no host"));
        }
        Ok(Endpoint { scheme, host: host.to_ascii_lowercase(), port })
    }

    /// Whether the pattern `self` lets `target` through.
    fn admits(&self, target: &Endpoint) -> bool {
        self.scheme == target.scheme && self.host == target.host && (self.port.is_none() || self.port == target.port)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kv(k: &str, v: &str) -> Vec<(String, String)> {
        vec![(k.into(), v.into())]
    }

    #[test]
    fn by_default_buckets_only_at_their_own_endpoint() {
        let p = MountPolicy::default();
        assert!(p.check("s3://lake/t", &kv("region", "us-east-1")).is_ok());
        let e = p.check("fs:///", &[]).unwrap_err();
        assert!(e.message().contains("not among the mountable locations"), "{e:?}");
        let e = p.check("s3://lake", &kv("endpoint", "http://169.254.169.254")).unwrap_err();
        assert!(e.message().contains("not among the endpoints"), "{e:?}");
        assert!(matches!(p.check("no-scheme", &[]), Err(Denied::Invalid(_))));
    }

    #[test]
    fn prefixes_match_whole_components_and_endpoints_their_port() {
        let dir = tempfile::tempdir().unwrap();
        let lake = dir.path().join("lake");
        std::fs::create_dir_all(lake.join("t")).unwrap();
        std::fs::create_dir_all(dir.path().join("lakehouse")).unwrap();
        std::os::unix::fs::symlink("/etc", lake.join("out")).unwrap();
        let lake = std::fs::canonicalize(&lake).unwrap();
        let p = MountPolicy {
            allow: vec!["s3://lake".into(), format!("fs://{}", lake.display())],
            endpoints: vec!["http://127.0.0.1:*".into(), "https://s3.example.com".into()],
            private: vec![lake.join("t")],
        };
        assert!(p.check("s3://lake/x", &kv("endpoint", "http://127.0.0.1:9000")).is_ok());
        assert!(p.check("s3://lakehouse", &[]).is_err());
        assert!(p.check("s3://lake/../other", &[]).is_err());
        assert!(p.check("s3://lake", &kv("endpoint", "https://s3.example.com/")).is_ok());
        assert!(p.check("s3://lake", &kv("endpoint", "https://s3.example.com:8443")).is_err());
        assert!(p.check("s3://lake", &kv("sts_endpoint", "http://10.0.0.1:80")).is_err());
        assert!(p.check(&format!("fs://{}", dir.path().join("lakehouse").display()), &[]).is_err());
        // `file://` opens the same as `fs://`: the private directory stays out of reach.
        let e = p.check(&format!("file://{}/t", lake.display()), &[]).unwrap_err();
        assert!(e.message().contains("the master's own files"), "{e:?}");
        // A link out of the allowed directory leads where it points: refused.
        assert!(p.check(&format!("fs://{}/out", lake.display()), &[]).is_err());
        // The private directory, and any directory holding it, never.
        let e = p.check(&format!("fs://{}/t", lake.display()), &[]).unwrap_err();
        assert!(e.message().contains("the master's own files"), "{e:?}");
        let e = p.check(&format!("fs://{}", lake.display()), &[]).unwrap_err();
        assert!(e.message().contains("the master's own files"), "{e:?}");
        assert!(p.validate("master.mounts").is_ok());
        let bad = MountPolicy { endpoints: vec!["ftp://x".into()], ..MountPolicy::default() };
        assert!(bad.validate("master.mounts").is_err());
    }
}
