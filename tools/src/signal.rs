//! Stopping servers cleanly on Ctrl-C or SIGTERM.

use std::future::Future;
use tokio::signal::unix::{SignalKind, signal};

/// Listens for Ctrl-C (SIGINT) and SIGTERM from the moment it is called (so a server that
/// printed "Ctrl-C stops it" after calling it cannot miss an early signal); the future
/// resolves on the first of them. Must be called inside a tokio runtime.
pub fn shutdown_signal() -> impl Future<Output = ()> {
    let listen = |kind: SignalKind, name: &'static str| {
        signal(kind).inspect_err(|e| tracing::error!(error = %e, "cannot listen for {name}")).ok()
    };
    let mut int = listen(SignalKind::interrupt(), "Ctrl-C");
    let mut term = listen(SignalKind::terminate(), "SIGTERM");
    async move {
        let wait = |s: Option<tokio::signal::unix::Signal>| async move {
            match s {
                Some(mut s) => {
                    s.recv().await;
                }
                None => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            _ = wait(int.take()) => {}
            _ = wait(term.take()) => {}
        }
    }
}
