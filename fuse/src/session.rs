//! How cv asks the kernel for a mount: the session (mount options, who may enter, the threads
//! that read requests) and what INIT negotiates. One place, so that the floor of `bench
//! duckdb-tpch --fuse-floor` (`cv-benches`) mounts exactly as cv does.

use crate::config::MountOptions;
use fuser::{Config, InitFlags, KernelConfig, MountOption, SessionACL};

/// Threads reading a read-only mount's requests: each may block on one disk read.
const READ_ONLY_THREADS: usize = 4;
/// Largest read and write the kernel sends in one request.
const MAX_IO: u32 = 1 << 20;
/// Asynchronous requests the kernel may have in flight.
const MAX_BACKGROUND: u16 = 64;

/// The session a mount with `opts` runs.
pub fn session_config(opts: &MountOptions) -> Config {
    let mut config = Config::default();
    config.mount_options = vec![
        MountOption::FSName(opts.fs_name.clone()),
        MountOption::Subtype("cv".into()),
        MountOption::DefaultPermissions,
        MountOption::NoAtime,
        MountOption::NoDev,
        MountOption::NoSuid,
    ];
    if opts.read_only {
        config.mount_options.push(MountOption::RO);
    }
    config.acl = if opts.allow_other { SessionACL::All } else { SessionACL::Owner };
    // One thread reads the kernel's requests, so they are dispatched in the
    // order sent (see crate::order); the work runs on the tokio runtime. A
    // read-only mount has no writes to keep in order: several threads read
    // requests, and each answers a short-circuit read itself, waiting on its
    // own ring, so a READ wakes no other thread.
    config.n_threads = Some(if opts.read_only { READ_ONLY_THREADS } else { 1 });
    config.clone_fd = opts.read_only;
    config
}

/// What a mount asks of the kernel at INIT (what the kernel lacks is logged and done without).
pub fn ask_kernel(config: &mut KernelConfig) {
    // readdirplus: `ls -l` costs one listing, not a lookup per entry.
    // atomic O_TRUNC: open(O_TRUNC) replaces the file once, at the first write.
    // async direct I/O: without it the kernel serves an asynchronous
    // O_DIRECT read (io_uring, libaio) synchronously inside its submit
    // call, so a queue depth of 32 behaves as 1.
    let caps = [
        InitFlags::FUSE_DO_READDIRPLUS,
        InitFlags::FUSE_ATOMIC_O_TRUNC,
        InitFlags::FUSE_PARALLEL_DIROPS,
        InitFlags::FUSE_ASYNC_DIO,
    ];
    for cap in caps {
        if config.add_capabilities(cap).is_err() {
            tracing::info!("kernel lacks {cap:?}");
        }
    }
    // Asynchronous requests (read-ahead, async direct I/O) the kernel keeps
    // in flight; its default of 12 would cap deep queues.
    let _ = config.set_max_background(MAX_BACKGROUND).or_else(|max| config.set_max_background(max));
    let _ = config.set_congestion_threshold(MAX_BACKGROUND * 3 / 4);
    let _ = config.set_max_write(MAX_IO).or_else(|max| config.set_max_write(max));
    let _ = config.set_max_readahead(MAX_IO).or_else(|max| config.set_max_readahead(max));
}
