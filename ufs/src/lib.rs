//! cv's reach into object storage, the "under file system" (UFS). Every call
//! to an object store in cv goes through [`Ufs`], which is OpenDAL with a
//! deadline and bounded retries on every operation.
//!
//! A mount names a location as a URL (`s3://bucket/prefix`, `fs:///dir`) plus
//! `key=value` options (endpoint, region, credentials); [`Ufs::connect`]
//! turns that into an operator. Keys are relative to the URL's prefix.

mod error;
mod location;
mod secrets;
mod settings;
mod stats;
mod store;
mod stream;

pub use error::{UfsError, UfsErrorKind};
pub use location::{Location, canonical_scheme};
pub use secrets::{is_secret, redact};
pub use settings::{CV_OPTIONS, UfsSettings, is_cv_option};
pub use stats::{BOUNDS_MS, UfsOp, UfsOpSnapshot, UfsStats};
pub use store::{ObjectMeta, Ufs, UfsEntry, UfsWriter};
pub use stream::UfsStream;

/// Registers OpenDAL's services and its HTTP transport (reqwest with rustls
/// on ring) for this process. [`Ufs::connect`] calls it; code that builds
/// OpenDAL operators itself (tests, benchmarks) calls it first.
pub fn install() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        opendal::install_default();
        // reqwest without a built-in provider uses the process default;
        // another part of the process may have installed it already.
        let _ = rustls::crypto::ring::default_provider().install_default();
        opendal_http_transport_reqwest::install_default();
    });
}
