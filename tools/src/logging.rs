//! Logging through `tracing`, filtered by `CV_LOG` (then `RUST_LOG`),
//! e.g. `CV_LOG=cv_master=debug,info`. Logs go to stderr so that data output
//! (`--json`) on stdout stays clean.

use tracing_subscriber::EnvFilter;

/// Installs the global subscriber once; later calls do nothing.
pub fn init(default: &str) {
    let filter = std::env::var("CV_LOG")
        .or_else(|_| std::env::var("RUST_LOG"))
        .ok()
        .and_then(|s| EnvFilter::try_new(s).ok())
        .unwrap_or_else(|| EnvFilter::new(default));
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).try_init();
}
