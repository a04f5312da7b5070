//! Starting a process's `/metrics` endpoint for `cvctl master`, `worker`, `gateway` and
//! `fuse`. A port already taken (a second process of the same kind on the host, with the
//! default port) costs only the metrics: the process still serves, and the log says why.

use cv_net::config::MetricsAddr;
use cv_net::metrics::{Gather, MetricsServer};

/// Serves `gather` at `addr` unless it is off; `field` names the setting in the warning.
pub async fn serve(field: &str, addr: MetricsAddr, gather: Gather) -> Option<MetricsServer> {
    let at = addr.get()?;
    match cv_net::metrics::serve(at, gather).await {
        Ok(m) => Some(m),
        Err(e) => {
            tracing::warn!(field, error = %e, "/metrics not served (set {field} to a free ip:port, or \"off\")");
            None
        }
    }
}
