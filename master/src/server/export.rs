//! Exporting files to object storage: under an fs-mode mount every completed
//! file is uploaded in the background (multipart for large files); under a
//! cache-mode mount a completed file is uploaded before `complete` answers
//! (write-through). Either way the upload reads the file's blocks from their
//! shards, and once the store has the whole object the master journals
//! `Exported`: the file becomes a copy of that object version and its blocks
//! are unpinned. Which files still need it is durable state (complete, under a
//! mount, not a copy of an object), so a crash anywhere simply means the file
//! is exported again after the restart; a half-done upload is never visible
//! (an S3 multipart upload appears only when completed).
//!
//! Finding that work walks the trees under the mounts, so the loop walks them again only
//! when a mutation that can change the answer was applied since (`State::exports_epoch`);
//! otherwise it retries from the list it has. An idle or read-only master does not walk a
//! large fs-mode tree every second.

use super::errors::Fail;
use super::ufs::UfsLayer;
use cv_master_core::MasterCore;
use cv_master_core::core::{ExportJob, ExportStep};
use cv_master_core::path::CvPath;
use cv_master_core::state::{PendingExport, UfsObject};
use cv_net::rpc::Conn;
use cv_wire::msg::{ReadBlock, ReadBlockOk, Role};
use cv_wire::{ErrorCode, Limits};
use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Bytes per block read from a shard.
const READ_PIECE: u64 = 4 << 20;
/// Bytes per uploaded part.
const PART: usize = 8 << 20;
/// How often the background loop looks for files to export when not woken.
const SCAN_EVERY: Duration = Duration::from_secs(1);
/// A shard that does not answer within this is tried again later.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// One piece read from a shard.
const READ_TIMEOUT: Duration = Duration::from_secs(30);
/// Pause after a failed export before that file is tried again.
const RETRY_AFTER: Duration = Duration::from_secs(2);

#[derive(Debug)]
pub(super) struct Exporter {
    endpoint: quinn::Endpoint,
    node: String,
    conns: tokio::sync::Mutex<HashMap<SocketAddr, Conn>>,
    busy: Mutex<HashSet<u64>>,
    wake: tokio::sync::Notify,
    pub(super) exported: AtomicU64,
    pub(super) failures: AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Exporter {
    /// `endpoint` is a client endpoint with the master's node identity.
    pub(super) fn new(endpoint: quinn::Endpoint, node: String) -> Self {
        Exporter {
            endpoint,
            node,
            conns: Default::default(),
            busy: Default::default(),
            wake: tokio::sync::Notify::new(),
            exported: AtomicU64::new(0),
            failures: AtomicU64::new(0),
        }
    }

    /// A file completed: look for work now rather than at the next scan.
    pub(super) fn nudge(&self) {
        self.wake.notify_one();
    }

    /// Exports every pending file under fs-mode mounts (and cache-mode files whose
    /// write-through a crash interrupted), until `stop` changes.
    pub(super) async fn run(
        self: Arc<Self>,
        core: Arc<MasterCore>,
        ufs: Arc<UfsLayer>,
        mut stop: tokio::sync::watch::Receiver<bool>,
    ) {
        let mut failed_at: HashMap<u64, tokio::time::Instant> = HashMap::new();
        // Cache-mode files are written through while `complete` waits; only a crash in between
        // leaves one behind, so they are looked for from the start until a round exports all it
        // found. Fs-mode mounts every round.
        let mut cache_too = true;
        // The last scan: a round with nothing changed since (no file completed, moved,
        // exported...) takes its list again instead of walking the mounts' trees.
        let mut scanned: Option<(u64, bool, Vec<PendingExport>)> = None;
        loop {
            // Under Raft only the leader exports (a follower's state is the leader's, and two
            // masters uploading one file would race).
            if !core.is_leading() {
                cache_too = true;
                tokio::select! {
                    _ = tokio::time::sleep(SCAN_EVERY) => {}
                    _ = stop.changed() => return,
                }
                continue;
            }
            // A full journal records no export (nor object delete): an upload now would be
            // made again, whole, once there is room.
            if core.journal_full().is_some() {
                tokio::select! {
                    _ = tokio::time::sleep(SCAN_EVERY) => {}
                    _ = stop.changed() => return,
                }
                continue;
            }
            let seen = scanned.as_ref().filter(|(_, c, _)| *c == cache_too).map(|(e, _, _)| *e);
            if let Some((epoch, list)) = core.export_queue(cache_too, seen) {
                scanned = Some((epoch, cache_too, list));
            }
            let pending = scanned.as_ref().map_or(&[][..], |(_, _, list)| list.as_slice());
            let mut all_done = true;
            for &(file_id, version, ref path, _, _) in pending {
                if *stop.borrow() {
                    return;
                }
                if failed_at.get(&file_id).is_some_and(|t| t.elapsed() < RETRY_AFTER) {
                    all_done = false;
                    continue;
                }
                // Paths in the state were parsed when they were made; this cannot fail.
                let Ok(path) = CvPath::parse(path) else { continue };
                match self.export(&core, &ufs, file_id, version, &path).await {
                    Ok(()) => {
                        failed_at.remove(&file_id);
                    }
                    Err(f) => {
                        tracing::warn!(path = %path, code = f.code.name(), "export failed, will retry: {}", f.message);
                        failed_at.insert(file_id, tokio::time::Instant::now());
                        all_done = false;
                    }
                }
            }
            cache_too &= !all_done;
            if core.deletes_queued() {
                super::deletes::drain(&core, &ufs).await;
            }
            tokio::select! {
                _ = self.wake.notified() => {}
                _ = tokio::time::sleep(SCAN_EVERY) => {}
                _ = stop.changed() => return,
            }
        }
    }

    /// Uploads file `file_id` (at `version`, at `path`) to its mount's store and records it.
    pub(super) async fn export(
        &self,
        core: &MasterCore,
        ufs: &UfsLayer,
        file_id: u64,
        version: u64,
        path: &CvPath,
    ) -> Result<(), Fail> {
        // One upload per file at a time; a second caller (the write-through of a file the
        // background loop already took) waits for it and then finds the file exported.
        while !lock(&self.busy).insert(file_id) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let r = match core.export_plan(file_id, version, path) {
            Ok(p) => match p.wait_async().await {
                Ok(ExportStep::Done) => {
                    lock(&self.busy).remove(&file_id);
                    return Ok(());
                }
                Ok(ExportStep::Upload(job)) => self.upload(core, ufs, *job).await,
                Err(e) => Err(e.into()),
            },
            Err(e) => Err(e.into()),
        };
        lock(&self.busy).remove(&file_id);
        match &r {
            Ok(()) => self.exported.fetch_add(1, Ordering::Relaxed),
            Err(_) => self.failures.fetch_add(1, Ordering::Relaxed),
        };
        r
    }

    /// Uploads the file the core planned and records it.
    async fn upload(&self, core: &MasterCore, ufs: &UfsLayer, job: ExportJob) -> Result<(), Fail> {
        let (path, info) = (&job.path, &job.open);
        if let Some(b) = info.blocks.iter().find(|b| !b.worker_live) {
            // After a restart, until the worker holding it registers again.
            let msg = format!("block {} of {path} is on worker {}, which is not live", b.block_id, b.worker_id);
            return Err(Fail::new(ErrorCode::Unavailable, msg));
        }
        let store = ufs.store(&job.mount)?;
        let key = &job.key;
        let mut w = store.writer(key, PART).await?;
        if let Err(f) = self.copy_blocks(&info.blocks, &mut w).await {
            // No half object: the multipart upload is dropped.
            w.abort().await;
            return Err(f);
        }
        // From the moment the object is visible until it is recorded, a queued delete of its
        // key (a file deleted or moved away from it earlier) must not run (`deletes.rs`).
        let _held = ufs.objects.lock().await;
        let meta = w.close(&store).await?;
        if meta.len != info.length {
            return Err(Fail::new(
                ErrorCode::UfsFailed,
                format!("{key}: the store holds {} bytes after the upload of {}", meta.len, info.length),
            ));
        }
        let object = UfsObject { mount: job.mount.path.clone(), key: key.clone(), version: meta.version };
        let recorded = match core.begin_exported(job.file_id, job.version, object) {
            Ok(p) => p.wait_async().await,
            Err(e) => Err(e),
        };
        if let Err(e) = recorded {
            // Renamed or deleted during the upload: nobody's file is at that key now.
            if core.upload_orphaned(&job)
                && let Err(d) = store.delete(key).await
            {
                tracing::warn!(key, error = %d, "object of a moved file not deleted from the store");
            }
            return Err(e.into());
        }
        tracing::debug!(%path, bytes = info.length, "exported");
        Ok(())
    }

    /// Streams the blocks, in file order, from their shards into `w`.
    async fn copy_blocks(
        &self,
        blocks: &[cv_master_core::state::PlacedBlock],
        w: &mut cv_ufs::UfsWriter,
    ) -> Result<(), Fail> {
        for b in blocks {
            let addr = super::convert::shard_addr(b.worker_id, b.shard, b.addr)?.socket_addr();
            let mut off = 0;
            while off < b.len {
                let len = READ_PIECE.min(b.len - off);
                // Checked on the worker as well: the export is the copy that outlives the cache.
                let req =
                    // A master's certificate is its right to read: no capability.
                    ReadBlock { block_id: b.block_id, offset: off, len, source: None, fill_only: false, verify: true, cap: Default::default() };
                let bytes = self.read(addr, &req).await?;
                if bytes.len() as u64 != len {
                    let msg = format!("block {} gave {} bytes of {len}", b.block_id, bytes.len());
                    return Err(Fail::new(ErrorCode::Internal, msg));
                }
                w.write(bytes).await?;
                off += len;
            }
        }
        Ok(())
    }

    pub(super) async fn read(&self, addr: SocketAddr, req: &ReadBlock) -> Result<bytes::Bytes, Fail> {
        let conn = self.conn(addr).await?;
        let frame = match tokio::time::timeout(READ_TIMEOUT, conn.call(req, &[])).await {
            Ok(Ok(f)) => f,
            Err(_) => {
                self.conns.lock().await.remove(&addr);
                return Err(Fail::new(
                    ErrorCode::Timeout,
                    format!("read block {} from {addr}: timed out", req.block_id),
                ));
            }
            Ok(Err(e)) => {
                self.conns.lock().await.remove(&addr);
                return Err(Fail::new(ErrorCode::Unavailable, format!("read block {} from {addr}: {e}", req.block_id)));
            }
        };
        frame.access::<ReadBlockOk>()?;
        Ok(bytes::Bytes::from(frame.into_payload()))
    }

    pub(super) async fn conn(&self, addr: SocketAddr) -> Result<Conn, Fail> {
        let mut conns = self.conns.lock().await;
        if let Some(c) = conns.get(&addr).filter(|c| !c.is_closed()) {
            return Ok(c.clone());
        }
        let c = tokio::time::timeout(
            CONNECT_TIMEOUT,
            Conn::connect(&self.endpoint, addr, Role::Master, &self.node, Limits::DEFAULT),
        )
        .await
        .map_err(|_| Fail::new(ErrorCode::Unavailable, format!("connect to shard {addr}: timed out")))?
        .map_err(|e| Fail::new(ErrorCode::Unavailable, format!("connect to shard {addr}: {e}")))?;
        conns.insert(addr, c.clone());
        Ok(c)
    }
}
