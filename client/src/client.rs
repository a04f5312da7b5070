//! The client handle and its namespace operations: the public API, over the route
//! (`route/`), which makes every call.

use crate::config::ClientSettings;
use crate::error::{Error, ErrorKind, Result};
use crate::file::File;
use crate::hint::LeaderHint;
use crate::local::LocalStats;
use crate::route::Route;
use crate::writer::Writer;
use cv_net::quic::TransportSettings;
use cv_net::tls::Identity;
use cv_wire::msg::*;
use std::net::SocketAddr;
use std::sync::Arc;

/// A connected client. Cheap to clone; clones share connections.
#[derive(Clone, Debug)]
pub struct Client {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    route: Arc<Route>,
    /// The leader hint file, and the master it named when the client started.
    hint: Option<(LeaderHint, Option<SocketAddr>)>,
}

impl Client {
    /// Creates a client that presents `identity`; connections are made on first use, the
    /// master's right away so that errors show early. With several masters, all are dialed at
    /// once and calls go to the first that answers as the leader (a master that is down costs
    /// nothing while another leads).
    pub async fn connect(
        settings: ClientSettings,
        identity: &Identity,
        transport: &TransportSettings,
    ) -> Result<Client> {
        Self::connect_hinted(settings, identity, transport, None).await
    }

    /// [`Client::connect`] that dials the master `hint` names first (alone, for a moment:
    /// when it leads, no other master is dialed) and records the master calls went to in it
    /// at [`Client::shutdown`]. For short-lived processes; a wrong or stale hint costs at most
    /// one redirect or one short wait.
    pub async fn connect_hinted(
        settings: ClientSettings,
        identity: &Identity,
        transport: &TransportSettings,
        hint: Option<LeaderHint>,
    ) -> Result<Client> {
        let route = Route::new(settings, identity, transport)?;
        // One master needs no hint.
        let hint = hint.filter(|_| route.master_count() > 1).map(|h| {
            let named = h.read();
            (h, named)
        });
        route.first_master(hint.as_ref().and_then(|(_, named)| *named)).await?;
        Ok(Client { inner: Arc::new(Inner { route: Arc::new(route), hint }) })
    }

    /// The settings in force.
    pub fn settings(&self) -> &ClientSettings {
        self.inner.route.settings()
    }

    /// The route every call of this client and of its files and writers takes.
    #[cfg(test)]
    pub(crate) fn route(&self) -> &Arc<Route> {
        &self.inner.route
    }

    /// Counters of short-circuit reads (blocks read from a local worker's data files).
    pub fn short_circuit_stats(&self) -> LocalStats {
        self.inner.route.local_stats()
    }

    /// The master calls go to now (under Raft, the leader as last heard).
    pub fn current_master(&self) -> SocketAddr {
        self.inner.route.current_master()
    }

    /// A null round trip to the master (the transport floor).
    pub async fn ping(&self) -> Result<()> {
        let f = self.inner.route.master("ping", &Ping { nonce: 1 }, &[]).await?;
        f.access::<Pong>()?;
        Ok(())
    }

    /// Opens a file: one round trip returns its block map and tail.
    pub async fn open(&self, path: &str) -> Result<File> {
        check_path(path)?;
        let opened = self.inner.route.open(path).await?;
        Ok(File::new(self.inner.route.clone(), opened))
    }

    /// Metadata of a path.
    pub async fn stat(&self, path: &str) -> Result<FileStatus> {
        check_path(path)?;
        self.inner.route.stat(path).await
    }

    /// Every entry of a directory, in name order (pages fetched as needed).
    pub async fn list(&self, path: &str) -> Result<Vec<FileStatus>> {
        check_path(path)?;
        let mut out = Vec::new();
        let mut start_after = None;
        loop {
            let req = List { path: path.into(), start_after: start_after.clone(), limit: 1000 };
            let page: ListOk = self.inner.route.master("list", &req, &[]).await?.decode_body()?;
            let more = page.more && !page.entries.is_empty();
            start_after = page.entries.last().map(|e| name_of(&e.path).to_string());
            out.extend(page.entries);
            if !more {
                return Ok(out);
            }
        }
    }

    /// Creates a directory (and its parents when asked).
    pub async fn mkdir(&self, path: &str, parents: bool) -> Result<()> {
        check_path(path)?;
        self.inner.route.master("mkdir", &Mkdir { path: path.into(), parents, mode: 0o755 }, &[]).await?;
        Ok(())
    }

    /// Renames a file or directory atomically.
    pub async fn rename(&self, src: &str, dst: &str) -> Result<()> {
        check_path(src)?;
        check_path(dst)?;
        self.inner.route.master("rename", &Rename { src: src.into(), dst: dst.into() }, &[]).await?;
        Ok(())
    }

    /// Deletes a path; directories with content only when `recursive`.
    pub async fn delete(&self, path: &str, recursive: bool) -> Result<()> {
        check_path(path)?;
        self.inner.route.master("delete", &Delete { path: path.into(), recursive }, &[]).await?;
        Ok(())
    }

    /// Makes `path` a new file holding the bytes of the complete files `sources`, in order,
    /// without copying them (it lists their blocks); a file at `path` is replaced in one step.
    /// `Unsupported` for sources or a target under a mount (copy them instead), and from a
    /// master that predates it.
    pub async fn compose(&self, path: &str, sources: &[String]) -> Result<FileStatus> {
        check_path(path)?;
        let req = Compose { path: path.into(), sources: sources.to_vec() };
        match self.inner.route.master("compose", &req, &[]).await {
            Ok(reply) => Ok(reply.decode_body::<StatOk>()?.status),
            Err(e) if e.code() == Some(cv_wire::ErrorCode::Malformed) => {
                Err(Error::new(ErrorKind::Unsupported, format!("{path}: this master cannot compose files")))
            }
            Err(e) => Err(e),
        }
    }

    /// Creates a file and returns a writer for its content.
    pub async fn create(&self, path: &str, overwrite: bool) -> Result<Writer> {
        check_path(path)?;
        let req = Create { path: path.into(), overwrite, mode: 0o644, block_size: 0 };
        let ok: CreateOk = self.inner.route.master("create", &req, &[]).await?.decode_body()?;
        Ok(Writer::new(self.inner.route.clone(), path.to_string(), ok.file_id, ok.block_size, ok.pin_blocks))
    }

    /// Mounts the object-store location `ufs_url` at `cv_path`. The master
    /// lists the location's root first: a wrong URL or credentials fail here.
    pub async fn mount(
        &self,
        ufs_url: &str,
        cv_path: &str,
        mode: MountMode,
        options: Vec<(String, String)>,
    ) -> Result<()> {
        let options = options.into_iter().map(|(key, value)| KeyValue { key, value }).collect();
        let req = Mount { ufs_url: ufs_url.into(), cv_path: cv_path.into(), mode, options };
        self.inner.route.master("mount", &req, &[]).await?;
        Ok(())
    }

    /// Removes the mount at `cv_path`. An fs-mode mount whose files are not all exported yet
    /// is refused (`NotEmpty`) unless `force` (they then stay in cv only).
    pub async fn unmount(&self, cv_path: &str, force: bool) -> Result<()> {
        check_path(cv_path)?;
        self.inner.route.master("unmount", &Unmount { cv_path: cv_path.into(), force }, &[]).await?;
        Ok(())
    }

    /// The mount table; secret option values come back as `***`.
    pub async fn list_mounts(&self) -> Result<Vec<MountInfo>> {
        Ok(self.inner.route.master("list mounts", &ListMounts {}, &[]).await?.decode_body::<ListMountsOk>()?.mounts)
    }

    /// Makes the master read listings and object versions at or under
    /// `cv_path` from the store again at their next use.
    pub async fn sync_mount(&self, cv_path: &str) -> Result<()> {
        check_path(cv_path)?;
        self.inner.route.master("sync mount", &SyncMount { cv_path: cv_path.into() }, &[]).await?;
        Ok(())
    }

    /// Drops the cached blocks of object copies at or under `path`, keeping
    /// their metadata.
    pub async fn free(&self, path: &str) -> Result<FreeOk> {
        check_path(path)?;
        Ok(self.inner.route.master("free", &Free { path: path.into() }, &[]).await?.decode_body()?)
    }

    /// The cluster report (workers, capacity, tail cache).
    pub async fn report(&self) -> Result<ReportOk> {
        Ok(self.inner.route.master("report", &Report {}, &[]).await?.decode_body()?)
    }

    /// Closes every connection. The close frames go out only while this process's runtime
    /// keeps running: a process about to exit calls [`Client::shutdown`] instead.
    pub fn close(&self) {
        self.inner.route.close();
    }

    /// QUIC connections this client holds open now (to masters and workers): what a FUSE
    /// mount's or a gateway's `/metrics` shows of its side of the cluster.
    pub fn open_connections(&self) -> usize {
        self.inner.route.open_connections()
    }

    /// Closes every connection and waits (at most a second) until the servers have been
    /// told. Without the wait, a process that exits right after closing leaves its
    /// connections open on the master and the shards until their idle timeout, each
    /// counting against the shards' connection cap.
    pub async fn shutdown(&self) {
        self.record_leader();
        self.inner.route.close_and_tell(std::time::Duration::from_secs(1)).await;
    }

    /// Writes the master calls go to now into the leader hint, if there is one and it named
    /// another (a failure to write is only logged: the hint is an optimisation).
    fn record_leader(&self) {
        let Some((hint, named)) = &self.inner.hint else { return };
        let now = self.inner.route.current_master();
        if *named != Some(now)
            && let Err(e) = hint.write(now)
        {
            tracing::debug!(path = %hint.path().display(), error = %e, "leader hint not written");
        }
    }
}

fn name_of(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// Refuses a path the master would refuse by size, before it is sent: `InvalidPath`, naming
/// the limit (a frame with it would be refused whole, which reads as a protocol error).
fn check_path(path: &str) -> Result<()> {
    let max = cv_wire::Limits::DEFAULT.max_path as usize;
    if path.len() > max {
        let head: String = path.chars().take(64).collect();
        return Err(Error::new(
            ErrorKind::InvalidPath,
            format!("path of {} bytes (at most {max}): {head}…", path.len()),
        ));
    }
    Ok(())
}
