//! Logging through `tracing`, filtered by `CV_LOG` (then `RUST_LOG`),
//! e.g. `CV_LOG=cv_master=debug,info`. Logs go to stderr so that data output
//! (`--json`) on stdout stays clean.

use cv_benches::read_bench::timeline::Timeline;
use std::sync::OnceLock;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::Layer;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

static TIMELINE: OnceLock<Timeline> = OnceLock::new();

/// Installs the global subscriber once; later calls do nothing. With `timeline`, it also
/// collects request marks for [`timeline`] (only then: the marks on the read path stay a
/// level check for every other command).
pub fn init(default: &str, timeline: bool) {
    let filter = std::env::var("CV_LOG")
        .or_else(|_| std::env::var("RUST_LOG"))
        .ok()
        .and_then(|s| EnvFilter::try_new(s).ok())
        .unwrap_or_else(|| EnvFilter::new(default));
    let fmt = tracing_subscriber::fmt::layer().with_writer(std::io::stderr).with_filter(filter);
    let marks = timeline.then(|| TIMELINE.get_or_init(Timeline::new).layer());
    let _ = tracing_subscriber::registry().with(fmt).with(marks).try_init();
}

/// The collector installed by [`init`], if it was asked for.
pub fn timeline() -> Option<Timeline> {
    TIMELINE.get().cloned()
}
