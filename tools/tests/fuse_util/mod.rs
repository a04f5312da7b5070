//! A real local cluster mounted with `cvctl fuse` for the FUSE tests. The
//! mount is always taken down, even when a test fails: the guard's drop
//! unmounts lazily, then stops the FUSE process and the cluster.
#![allow(dead_code)]

use cv_tools::cluster::{ClusterOptions, LocalCluster};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A mounted cluster.
pub struct Mounted {
    pub mnt: PathBuf,
    pub dir: tempfile::TempDir,
    pub rt: tokio::runtime::Runtime,
    pub cluster: Option<LocalCluster>,
    child: Option<Child>,
}

/// Starts a cluster and mounts its root with extra `cvctl fuse` flags.
pub fn mount(extra: &[&str]) -> Mounted {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut opts = ClusterOptions::ephemeral(dir.path());
    // Block data need not be fsynced for these tests; the mount is what is tested.
    opts.sync_data = false;
    // pjdfstest's open::interact_2gb publishes a file of just over 2 GiB, and blocks written
    // through cv are pinned (the only copy): the worker must hold it whole, beside the rest.
    opts.capacity = cv_net::config::ByteSize::gib(3);
    let cluster = rt.block_on(LocalCluster::start(&opts)).unwrap();
    let mnt = dir.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_cvctl"))
        .arg("fuse")
        .arg(&mnt)
        .arg("--config")
        .arg(cluster.client_config())
        .args(extra)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let mut m = Mounted { mnt, dir, rt, cluster: Some(cluster), child: Some(child) };
    let deadline = Instant::now() + Duration::from_secs(10);
    while !is_mounted(&m.mnt) {
        if let Some(st) = m.child.as_mut().unwrap().try_wait().unwrap() {
            panic!("cvctl fuse exited before mounting: {st}");
        }
        assert!(Instant::now() < deadline, "not mounted within 10 s");
        std::thread::sleep(Duration::from_millis(20));
    }
    m
}

/// Whether `path` is a FUSE mount point now.
pub fn is_mounted(path: &Path) -> bool {
    let Ok(text) = std::fs::read_to_string("/proc/self/mountinfo") else { return false };
    let p = path.to_string_lossy();
    text.lines().any(|l| {
        let f: Vec<&str> = l.split(' ').collect();
        f.len() > 4 && f[4] == p && l.contains(" - fuse")
    })
}

impl Mounted {
    /// A path inside the mount.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.mnt.join(rel)
    }

    /// The FUSE process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map(Child::id).unwrap_or(0)
    }

    /// Waits for the FUSE process to exit on its own; its exit status.
    pub fn wait_exit(&mut self, within: Duration) -> Option<std::process::ExitStatus> {
        let child = self.child.as_mut()?;
        let deadline = Instant::now() + within;
        loop {
            if let Some(st) = child.try_wait().unwrap() {
                self.child = None;
                return Some(st);
            }
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        if is_mounted(&self.mnt) {
            let _ = Command::new("umount").arg("-l").arg(&self.mnt).status();
        }
        if self.wait_exit(Duration::from_secs(5)).is_none()
            && let Some(mut c) = self.child.take()
        {
            let _ = c.kill();
            let _ = c.wait();
        }
        if let Some(c) = self.cluster.take() {
            let _ = self.rt.block_on(c.shutdown());
        }
    }
}

/// A test tool from scripts/install-fuse-tests: on PATH or in cargo's bin.
/// Missing under CI is a failure; elsewhere the test says so and skips.
pub fn tool(name: &str) -> Option<PathBuf> {
    let cargo_bin = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
        .map(|p| p.join("bin"));
    let paths = std::env::var_os("PATH").map(|p| std::env::split_paths(&p).collect::<Vec<_>>()).unwrap_or_default();
    let found = paths.into_iter().chain(cargo_bin).map(|d| d.join(name)).find(|p| p.is_file());
    missing_is_fatal(found, name)
}

/// The Python of the venv made by scripts/install-fuse-tests.
pub fn venv_python() -> Option<PathBuf> {
    let venv = std::env::var_os("CV_FUSE_VENV")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/cv/venv-fuse")));
    let py = venv.map(|v| v.join("bin/python")).filter(|p| p.is_file());
    missing_is_fatal(py, "the DuckDB venv")
}

fn missing_is_fatal(found: Option<PathBuf>, what: &str) -> Option<PathBuf> {
    if found.is_none() {
        assert!(std::env::var_os("CI").is_none(), "{what} is missing: run scripts/install-fuse-tests");
        eprintln!("SKIP: {what} is missing; run scripts/install-fuse-tests");
    }
    found
}

/// Deterministic bytes that differ per seed.
pub fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u32).wrapping_mul(2_654_435_761).rotate_left(u32::from(seed)) as u8).collect()
}
