//! Who may do what: requests signed (SigV4, or V2) with a configured access
//! key may do everything; unsigned requests may only read buckets configured
//! public. An auth provider is always installed, even with no keys, because
//! s3s runs no access check at all without one.

use crate::config::GatewaySettings;
use cv_net::config::ConfigError;
use s3s::access::{S3Access, S3AccessContext};
use s3s::auth::{SecretKey, SimpleAuth};
use s3s::path::S3Path;
use s3s::{S3ErrorCode, S3Result};
use std::collections::HashSet;

/// The keys that may sign requests.
pub(crate) fn keys(cfg: &GatewaySettings) -> Result<SimpleAuth, ConfigError> {
    let mut auth = SimpleAuth::new();
    for (i, k) in cfg.keys.iter().enumerate() {
        let secret = k.secret(&format!("gateway.keys[{i}]"))?;
        auth.register(k.access_key.clone(), SecretKey::from(secret));
    }
    Ok(auth)
}

/// Unsigned access to public buckets, reads only.
#[derive(Debug)]
pub(crate) struct PublicReads {
    public: HashSet<String>,
}

impl PublicReads {
    pub fn new(cfg: &GatewaySettings) -> Self {
        PublicReads { public: cfg.buckets.iter().filter(|b| b.public).map(|b| b.name.clone()).collect() }
    }
}

const READS: &[&str] = &["GetObject", "HeadObject", "ListObjects", "ListObjectsV2", "HeadBucket", "GetBucketLocation"];

#[async_trait::async_trait]
impl S3Access for PublicReads {
    async fn check(&self, cx: &mut S3AccessContext<'_>) -> S3Result<()> {
        if cx.credentials().is_some() {
            return Ok(());
        }
        let bucket = match cx.s3_path() {
            S3Path::Bucket { bucket } | S3Path::Object { bucket, .. } => Some(&**bucket),
            S3Path::Root => None,
        };
        if READS.contains(&cx.s3_op().name()) && bucket.is_some_and(|b| self.public.contains(b)) {
            return Ok(());
        }
        Err(crate::errors::s3_err(S3ErrorCode::AccessDenied, "sign the request with a configured access key"))
    }
}
