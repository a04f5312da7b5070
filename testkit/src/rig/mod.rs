//! A multi-host test rig: several hosts on one machine, each its own network namespace with its own
//! address on one Linux bridge, created and removed by the test (root only; CI runs as root).
//!
//! - [`Rig`]: `Rig::new(n)` claims a free subnet `10.210.S.0/24` (the bridge `cvb<S>` is the claim,
//!   so rigs in parallel threads or processes never collide; the bridge is `.1`, host `H` is
//!   `.(10 + H)` in namespace `cv<S>h<H>` behind veth `cvv<S>h<H>`). It runs processes in a host
//!   ([`Rig::spawn`], logs in the rig's temp dir, [`Rig::logs`]), kills ([`Rig::kill9`]), stops them
//!   as `systemctl stop` does ([`Rig::terminate`]: SIGTERM, waited for), pauses and
//!   resumes them, cuts and restores a host's link, and gives a host a small disk (tmpfs).
//!   Teardown, in [`Rig::shutdown`] and in `Drop` (also when the test panics; then the logs are
//!   printed): the processes (SIGTERM, SIGKILL after 0.5 s), the mounts, the namespaces, the bridge.
//! - [`sweep`]: removes rigs whose creating process is gone (run by every `Rig::new`).
//! - [`CvCluster`]: a cv cluster on a rig through the real `cvctl` binary: master on host 1,
//!   workers on hosts 2..=N, `cvctl fs` / `cvctl report` from the root namespace.
//!
//! This kernel has no `tc netem`; latency is not a rig feature yet.

mod cluster;
mod cv_config;
mod disk;
mod error;
mod hosts;
mod names;
mod net;
mod process;
mod report;
mod sweep;
mod sys;

pub use cluster::{ClusterSpec, CvCluster};
pub use error::RigError;
pub use hosts::{Host, Rig};
pub use names::MAX_HOSTS;
pub use process::ProcId;
pub use report::{Report, WorkerState};
pub use sweep::sweep;
