//! The embedded object store of `bench scan` and `bench open-latency` (its
//! default): cv-testkit's in-process S3 server (with its request log) and
//! delaying TCP proxy. They are test servers, so they are linked only with
//! feature `embedded-s3`; without it the same names are stand-ins that cannot
//! be started, and starting one fails with [`MISSING`], which says how to get
//! them. This file is the only place that knows whether the feature is on.

#[cfg(feature = "embedded-s3")]
pub use cv_testkit::{DelayProxy, Op, Request, S3Server};

#[cfg(not(feature = "embedded-s3"))]
mod absent;
#[cfg(not(feature = "embedded-s3"))]
pub use absent::{DelayProxy, Op, Request, S3Server};

use crate::open_latency::BenchError;

/// What a command that needs the embedded store says when it is not built in.
pub const MISSING: &str = "built without the embedded S3 server (cv-testkit): rebuild with `--features embedded-s3` \
                           (e.g. `cargo run --release -p cv-tools --features embedded-s3 --bin cvctl -- bench …`)";

/// Whether the embedded store is built in.
pub const AVAILABLE: bool = cfg!(feature = "embedded-s3");

/// Ok when the embedded store is built in, else [`MISSING`]: commands call it
/// before any work, so they fail at once rather than after generating files.
pub fn require() -> Result<(), BenchError> {
    if AVAILABLE { Ok(()) } else { Err(MISSING.into()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(feature = "embedded-s3")]
    #[test]
    fn with_the_feature_the_embedded_store_starts() {
        assert!(require().is_ok());
        let dir = tempfile::tempdir().expect("a temporary directory");
        S3Server::start(dir.path()).expect("the embedded S3 server starts").shutdown();
    }

    /// `cargo test -p cv-benches` (no feature) runs this one.
    #[cfg(not(feature = "embedded-s3"))]
    #[test]
    fn without_the_feature_asking_for_the_embedded_store_says_how_to_get_it() {
        let how = "--features embedded-s3";
        assert!(require().unwrap_err().to_string().contains(how));
        let started = S3Server::start(std::path::Path::new("/nonexistent"));
        assert!(started.unwrap_err().to_string().contains(how));
        let proxy = DelayProxy::start(([127, 0, 0, 1], 9).into(), std::time::Duration::ZERO);
        assert!(proxy.unwrap_err().to_string().contains(how));
    }
}
