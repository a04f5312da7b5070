//! Subcommands, one file each.

pub mod bench;
pub mod cert;
pub mod doctor;
pub mod drain;
pub mod free;
pub mod fs;
pub mod fuse;
pub mod gateway;
pub mod load;
pub mod master;
pub mod mount;
pub mod report;
pub mod revoke;
pub mod trace;
pub mod up;
pub mod worker;

use clap::Subcommand;

/// What `cvctl` can do.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run a local cluster in this process: a master and one worker with its
    /// shards, fresh certificates, and a client config to use against it.
    Up(up::UpArgs),
    /// Create the cluster CA and node/client certificates (mutual TLS).
    #[command(subcommand)]
    Cert(cert::Cert),
    /// Measure cv against a baseline in the same run, side by side.
    #[command(subcommand)]
    Bench(bench::Bench),
    /// File commands against a running cluster: ls, stat, cat, put, get, mkdir, mv, rm.
    Fs(fs::Fs),
    /// Mount cv as a local directory with FUSE until Ctrl-C, SIGTERM or umount.
    Fuse(fuse::FuseArgs),
    /// Serve cv's namespace over the S3 API ([gateway] of the config) until Ctrl-C or SIGTERM.
    Gateway(gateway::GatewayArgs),
    /// Object-store mounts: add, rm, ls, sync.
    Mount(mount::MountCmd),
    /// Preload a file or directory tree into the cache (metadata, tails, blocks), resumably.
    Load(load::LoadArgs),
    /// Drop the cached blocks of object copies under a path, keeping their metadata.
    Free(free::FreeArgs),
    /// Cluster report: workers, shards, capacity, use, tail-cache hit ratio, export backlog.
    Report(report::ReportArgs),
    /// Check a node's config against this host: certificates, ports, directories, clock.
    Doctor(doctor::DoctorArgs),
    /// Run the master (namespace, journal, tail cache) until Ctrl-C or SIGTERM.
    Master(master::MasterArgs),
    /// Run a worker (pinned shards serving blocks over QUIC) until Ctrl-C or SIGTERM.
    Worker(worker::WorkerArgs),
    /// Block access traces: replay them against cache policies.
    #[command(subcommand)]
    Trace(trace::Trace),
}

/// Error of a subcommand: what failed, for the user.
pub type CmdResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

impl Command {
    /// The subcommand's own layer for the global subscriber, if it has one (`bench read
    /// --timeline` collects request marks through it).
    pub fn log_layer(&self) -> Option<crate::logging::ExtraLayer> {
        match self {
            Command::Bench(b) => b.log_layer(),
            _ => None,
        }
    }

    /// Runs the subcommand.
    pub fn run(self) -> CmdResult {
        match self {
            Command::Up(u) => u.run(),
            Command::Cert(c) => c.run(),
            Command::Bench(b) => b.run(),
            Command::Fs(f) => f.run(),
            Command::Fuse(f) => f.run(),
            Command::Gateway(g) => g.run(),
            Command::Mount(m) => m.run(),
            Command::Load(l) => l.run(),
            Command::Free(f) => f.run(),
            Command::Report(r) => r.run(),
            Command::Trace(t) => t.run(),
            Command::Doctor(d) => d.run(),
            Command::Master(m) => m.run(),
            Command::Worker(w) => w.run(),
        }
    }
}
