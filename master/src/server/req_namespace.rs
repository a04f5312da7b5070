//! Namespace requests: open (with the tail as payload), stat, list, mkdir, create, add-block,
//! complete (tail from the payload), delete (renames: `req_rename.rs`). Each awaits its durability ticket.

use super::convert::{block_loc, child_path, shard_addr, status};
use super::errors::Fail;
use super::request::Req;
use super::service::MasterService;
use cv_master_core::path::CvPath;
use cv_master_core::state::{self, MountMode};
use cv_master_core::{OpenStep, Tail};
use cv_net::rpc::Reply;
use cv_wire::ErrorCode;
use cv_wire::msg::{
    Abandon, AddBlock, AddBlockOk, BlockLoc, Complete, CompleteIf, Compose, Create, CreateOk, Delete, Expect, FileKind,
    FileStatus, List, ListOk, Mkdir, Open, OpenOk, Stat, StatOk, UfsRef,
};

/// Most entries one list page returns, whatever the client asks.
const MAX_LIST_PAGE: u32 = 10_000;

pub(super) fn parsed(raw: &str) -> Result<CvPath, Fail> {
    CvPath::parse(raw).map_err(|e| Fail::from(cv_master_core::Error::from(e)))
}

/// A path whose last name is being made: control characters are refused as well.
pub(super) fn parsed_new(raw: &str) -> Result<CvPath, Fail> {
    CvPath::parse_new(raw).map_err(|e| Fail::from(cv_master_core::Error::from(e)))
}

pub(super) async fn open(s: &MasterService, q: Req<'_, Open>) -> Result<Reply, Fail> {
    let raw = q.body.path.as_str();
    let cv = parsed(raw)?;
    // Warm: one state lock, one path resolution, one tail lookup (`begin_open_cached`).
    let mut info = match s.core.begin_open_cached(&cv)? {
        OpenStep::Serve(pending) => pending.wait_async().await?,
        OpenStep::Check(check) => {
            s.ufs.check_file(&s.core, check).await?;
            s.core.begin_open_checked(&cv)?.wait_async().await?
        }
    };
    let path = cv.as_str().to_owned();
    // A file just written: its tail is being read back from its blocks (`tail_check.rs`).
    if info.tail == Tail::Evicted && s.tail_checks.wait(info.file_id).await {
        info = s.core.begin_open_checked(&cv)?.wait_async().await?;
    }
    let (tail_cached, tail_offset, payload) = match info.tail {
        // The cached Arc<[u8]> goes to the socket as it is: no copy per open.
        Tail::Cached { offset, bytes } => (true, offset, bytes::Bytes::from_owner(bytes)),
        Tail::Evicted => (false, info.length, bytes::Bytes::new()),
    };
    let ok = OpenOk {
        status: FileStatus {
            id: info.file_id,
            path,
            kind: FileKind::File,
            length: info.length,
            mtime_ms: info.mtime,
            version: info.version,
            // The core's open view has no mode (stat has it); 0 says "not reported".
            mode: 0,
            complete: true,
            block_size: s.core.config().block_size,
        },
        blocks: {
            let signer = s.signer();
            let object = info.ufs.as_ref().map(|o| cv_net::capability::ObjectDigest::new(&o.mount, &o.key, &o.version));
            info.blocks.iter().map(|b| block_loc(b, &signer, object.as_ref())).collect::<Result<_, _>>()?
        },
        tail_cached,
        tail_offset,
        ufs: info.ufs.map(|o| UfsRef { mount: o.mount, key: o.key, version: o.version }),
    };
    Ok(Reply::ok(q.id, &ok, payload))
}

pub(super) async fn stat(s: &MasterService, q: Req<'_, Stat>) -> Result<Reply, Fail> {
    let raw = q.body.path.as_str();
    let cv = parsed(raw)?;
    // A child's metadata comes with its directory's listing: one LIST for all siblings.
    if let Some(parent) = cv.parent() {
        s.ufs.before_read_list(&s.core, &parent).await?;
    }
    let pending = s.core.begin_stat(&cv)?;
    let path = cv.as_str().to_owned();
    let st = pending.wait_async().await?;
    let ok = StatOk { status: status(path, &st, s.core.config().block_size) };
    Ok(q.reply(&ok))
}

pub(super) async fn list(s: &MasterService, q: Req<'_, List>) -> Result<Reply, Fail> {
    let req = q.owned()?;
    if req.limit == 0 {
        return Err(Fail::new(ErrorCode::InvalidArgument, "list limit must be at least 1"));
    }
    let limit = req.limit.min(MAX_LIST_PAGE) as usize;
    let dir = parsed(&req.path)?;
    s.ufs.before_read_list(&s.core, &dir).await?;
    let page = s.core.begin_list(&dir, req.start_after.as_deref(), limit)?.wait_async().await?;
    let block_size = s.core.config().block_size;
    let entries = page.entries.iter().map(|e| status(child_path(dir.as_str(), &e.name), &e.stat, block_size)).collect();
    Ok(q.reply(&ListOk { entries, more: page.more }))
}

pub(super) async fn mkdir(s: &MasterService, q: Req<'_, Mkdir>) -> Result<Reply, Fail> {
    let req = q.owned()?;
    s.core.begin_mkdir(&parsed_new(&req.path)?, req.parents)?.wait_async().await?;
    Ok(q.done())
}

pub(super) async fn create(s: &MasterService, q: Req<'_, Create>) -> Result<Reply, Fail> {
    let req = q.owned()?;
    let block_size = s.core.config().block_size;
    if req.block_size != 0 && req.block_size != block_size {
        return Err(Fail::new(
            ErrorCode::Unsupported,
            format!("per-file block size {}: this master writes every file with {block_size}", req.block_size),
        ));
    }
    let path = parsed_new(&req.path)?;
    // Blocks written through cv are the only copy of their bytes: under a mount until the
    // file is in the store (its export unpins them), outside mounts for good. Unpinned, a
    // full worker would evict them to make room and lose an acknowledged file; pinned, it
    // refuses the write with NoSpace instead. Only blocks filled from the store are evictable.
    let pin_blocks = true;
    let created = s.core.begin_create(&path, req.overwrite, req.mode, q.id)?.wait_async().await?;
    let ok = CreateOk { file_id: created.file_id, block_size, pin_blocks };
    Ok(q.reply(&ok))
}

pub(super) async fn add_block(s: &MasterService, q: Req<'_, AddBlock>) -> Result<Reply, Fail> {
    let req = q.owned()?;
    let b = s.core.begin_add_block_at(req.file_id, req.index, &req.exclude)?.wait_async().await?;
    let block = BlockLoc {
        block_id: b.block_id,
        offset: u64::from(b.index) * s.core.config().block_size,
        len: 0,
        worker_id: b.worker_id,
        shard: b.shard,
        addr: shard_addr(b.worker_id, b.shard, b.addr)?,
        lost: false,
        replicas: super::convert::replicas(b.shard, &b.replicas)?,
        // Written once, by the writer the block was placed for.
        cap: s.signer().mint(cv_net::capability::Access::Write, b.block_id, [0; 16]),
    };
    Ok(q.reply(&AddBlockOk { block }))
}

pub(super) async fn complete(s: &MasterService, q: Req<'_, Complete>) -> Result<Reply, Fail> {
    let req = q.owned()?;
    finish(s, req, q.payload, None).await?;
    Ok(q.done())
}

/// A completion that publishes only if the path holds what the writer expects.
pub(super) async fn complete_if(s: &MasterService, q: Req<'_, CompleteIf>) -> Result<Reply, Fail> {
    let req = q.owned()?;
    let expect = match req.expect {
        Expect::Absent => state::Expect::Absent,
        Expect::Version { file_id, version } => state::Expect::Version { file_id, version },
    };
    finish(s, req.complete, q.payload, Some(expect)).await?;
    Ok(q.done())
}

/// A new file made of other files' blocks, no bytes copied (the gateway's multipart completion).
pub(super) async fn compose(s: &MasterService, q: Req<'_, Compose>) -> Result<Reply, Fail> {
    let req = q.owned()?;
    let path = parsed_new(&req.path)?;
    let sources = req.sources.iter().map(|p| parsed(p)).collect::<Result<Vec<_>, _>>()?;
    s.core.begin_compose(&path, &sources)?.wait_async().await?;
    let st = s.core.begin_stat(&path)?.wait_async().await?;
    Ok(q.reply(&StatOk { status: status(path.as_str().to_owned(), &st, s.core.config().block_size) }))
}

/// A writer gives its file up: removed by id, so what its path shows stays.
pub(super) async fn abandon(s: &MasterService, q: Req<'_, Abandon>) -> Result<Reply, Fail> {
    let req = q.owned()?;
    s.core.begin_abandon(req.file_id)?.wait_async().await?;
    Ok(q.done())
}

/// Completes a file (its tail in `payload`) and, under a cache-mode mount, writes it through.
async fn finish(s: &MasterService, req: Complete, payload: &[u8], expect: Option<state::Expect>) -> Result<(), Fail> {
    let lens: Vec<u64> = req.blocks.iter().map(|b| b.len).collect();
    let tail = (!payload.is_empty()).then(|| (req.tail_offset, payload.to_vec()));
    // Checked, the tail is kept only once read back from the blocks (`tail_check.rs`).
    let (kept, checked) = if s.check_tails { (None, tail) } else { (tail, None) };
    s.core.begin_complete(req.file_id, req.length, lens, kept, expect)?.wait_async().await?;
    let done = s.core.completed(req.file_id);
    if let Some((offset, bytes)) = checked
        && let Some((version, length)) = done.file
    {
        let file = (req.file_id, version, length);
        s.tail_checks.start(s.core.clone(), s.exporter.clone(), file, offset, bytes);
    }
    let under = done.under;
    match under {
        // Cache mode: the store is the truth, so the write is done when the store has it.
        Some((path, MountMode::Cache, url, version)) => {
            if let Err(f) = s.exporter.export(&s.core, &s.ufs, req.file_id, version, &path).await {
                // Nothing the store lacks stays visible under a cache-mode mount.
                match s.core.begin_delete(&path, false) {
                    Ok(p) => drop(p.wait_async().await),
                    Err(e) => tracing::warn!(%path, error = %e, "removing a file the store refused"),
                }
                return Err(write_through_failed(&path, &url, f));
            }
            s.core.mark_checked(&path);
        }
        // Fs mode: exported in the background.
        Some((_, MountMode::Fs, _, _)) => s.exporter.nudge(),
        None => {}
    }
    Ok(())
}

/// The answer to a completion whose write-through failed, the file removed: a failure a
/// retry could cure (the store down, slow, failing) becomes `WriteThroughFailed`, since
/// retrying this completion cannot; one that says what is wrong (the store refused access, the
/// file moved) keeps its code. Both name the store.
fn write_through_failed(path: &CvPath, url: &str, f: Fail) -> Fail {
    let message =
        format!("{path}: the object store {url} did not take the write ({}); the file was not kept", f.message);
    let code = if f.code.retryable() { ErrorCode::WriteThroughFailed } else { f.code };
    Fail::new(code, message)
}

pub(super) async fn delete(s: &MasterService, q: Req<'_, Delete>) -> Result<Reply, Fail> {
    let req = q.owned()?;
    // Objects behind the deleted files go too: cv is the truth in fs mode, and in cache mode
    // a delete through cv is a write through to the store. They are queued in the same
    // journaled step and deleted now; what fails here the exporter's loop retries.
    s.core.begin_remove(&parsed(&req.path)?, req.recursive)?.wait_async().await?;
    if s.core.deletes_queued() {
        super::deletes::soon(super::deletes::drain(&s.core, &s.ufs)).await;
    }
    Ok(q.done())
}
