//! Logging through `tracing`, filtered by `CV_LOG` (then `RUST_LOG`),
//! e.g. `CV_LOG=cv_master=debug,info`. Logs go to stderr so that data output
//! (`--json`) on stdout stays clean. `--log-format json` (or `CV_LOG_FORMAT=json`)
//! writes one JSON object per line instead of text (`timestamp`, `level`, `target`,
//! `fields` with `message`, and the span), for journald, Loki or any collector
//! that should not parse prose.

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer, Registry};

/// A layer a command adds beside the log lines (`bench read --timeline`'s collector).
pub type ExtraLayer = Box<dyn Layer<Registry> + Send + Sync>;

/// How log lines are written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable text (the default).
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

/// Installs the global subscriber once; later calls do nothing. `extra` is a command's own
/// layer, installed only when the command asks (so, e.g., the request marks on the read path
/// stay a level check for every other command).
pub fn init(default: &str, extra: Option<ExtraLayer>, format: LogFormat) {
    let filter = std::env::var("CV_LOG")
        .or_else(|_| std::env::var("RUST_LOG"))
        .ok()
        .and_then(|s| EnvFilter::try_new(s).ok())
        .unwrap_or_else(|| EnvFilter::new(default));
    // Both arms are boxed so one registry takes either (the layer types differ).
    let fmt = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let fmt: Box<dyn Layer<_> + Send + Sync> = match format {
        LogFormat::Text => fmt.with_filter(filter).boxed(),
        // Without ANSI colours: escape codes inside JSON strings are noise to a collector.
        LogFormat::Json => fmt.json().with_ansi(false).with_filter(filter).boxed(),
    };
    let _ = tracing_subscriber::registry().with(extra).with(fmt).try_init();
}
