//! Renames. Outside mounts a rename is one journaled mutation. Under a mount the
//! objects behind the moved files move with them (the store is the truth in
//! cache mode, and the copy cv exported in fs mode):
//! 1. the new keys are queued for deletion (journaled), then each object is copied to its
//!    new key inside the store ([`COPIES_AT_ONCE`] at a time);
//! 2. one journaled step (`RenameObjects`) renames, points each moved file at its copy,
//!    takes the copies off the queue and queues the old objects;
//! 3. the queue is drained (`deletes.rs`; retried by the exporter's loop).
//!
//! A failure or crash before 2 changes nothing in cv and the queue removes the copies; after
//! 2 the rename is whole. A file is never left pointing at an object another file may take.
//! Renames into, out of or between mounts are refused (the state machine's
//! `check_rename`). The whole rename holds `UfsLayer::objects`.

use super::errors::Fail;
use super::req_namespace::{parsed, parsed_new};
use super::request::Req;
use super::service::MasterService;
use cv_master_core::core::ObjectMove;
use cv_master_core::path::CvPath;
use cv_master_core::state::{MountEntry, MountMode, UfsObject};
use cv_net::rpc::Reply;
use cv_wire::ErrorCode;
use cv_wire::msg::Rename;

pub(super) async fn rename(s: &MasterService, q: Req<'_, Rename>) -> Result<Reply, Fail> {
    let req = q.owned()?;
    let (src, dst) = (parsed(&req.src)?, parsed_new(&req.dst)?);
    let Some(mount) = s.core.rename_mount(&src) else {
        // Nothing listed: a plain rename, which the state machine refuses if src holds copies
        // of objects (of a mount gone since).
        s.core.begin_rename_objects(&src, &dst, Vec::new())?.wait_async().await?;
        return Ok(q.done());
    };
    // One rename under mounts at a time: two could copy into each other's keys.
    let held = s.ufs.objects.lock().await;
    if mount.mode == MountMode::Cache {
        // What the store holds at both ends must be known before cv can judge the rename.
        if let Some(p) = src.parent() {
            s.ufs.before_list(&s.core, &p).await?;
        }
        if let Some(p) = dst.parent() {
            s.ufs.before_list(&s.core, &p).await?;
        }
        list_tree(s, &src).await?;
    }
    let Some(copies) = s.core.rename_moves(&mount, &src, &dst)? else {
        return Ok(q.done());
    };
    let moved = move_objects(s, &mount, &src, &dst, &copies).await;
    if !copies.is_empty() {
        // The old objects after a rename, the copies made after a failure: queued either way.
        super::deletes::soon(super::deletes::drain_held(&s.core, &s.ufs)).await;
    }
    drop(held);
    moved?;
    s.core.forget_checks(&src);
    Ok(q.done())
}

/// Object copies in flight at once during one rename (each is one request the store serves
/// without moving the bytes through cv; a directory of many files is not copied one by one).
const COPIES_AT_ONCE: usize = 16;

/// Copies each object to the key the core gave it (queued for deletion first), then renames and
/// points every moved file at its copy in one journaled step.
async fn move_objects(
    s: &MasterService,
    mount: &MountEntry,
    src: &CvPath,
    dst: &CvPath,
    copies: &[ObjectMove],
) -> Result<(), Fail> {
    let mut objects = Vec::with_capacity(copies.len());
    if !copies.is_empty() {
        let ufs = s.ufs.store(mount)?;
        let keys: Vec<String> = copies.iter().map(|c| c.to_key.clone()).collect();
        s.core.begin_objects_queued(&mount.path, keys.clone())?.wait_async().await?;
        let mut copying = tokio::task::JoinSet::new();
        let mut versions: Vec<Option<String>> = vec![None; copies.len()];
        let mut next = 0;
        loop {
            while copying.len() < COPIES_AT_ONCE && next < copies.len() {
                let c = &copies[next].copy;
                let (ufs, from, to, len) = (ufs.clone(), c.object.key.clone(), keys[next].clone(), c.length);
                let i = next;
                copying.spawn(async move {
                    let meta = ufs.copy(&from, &to).await?;
                    if meta.len != len {
                        let msg = format!("{from}: {} bytes in the store, {len} in cv; sync the mount", meta.len);
                        return Err(Fail::new(ErrorCode::StaleVersion, msg));
                    }
                    Ok((i, meta.version))
                });
                next += 1;
            }
            let Some(done) = copying.join_next().await else { break };
            let done = done.map_err(|e| Fail::new(ErrorCode::Internal, format!("copy task: {e}")));
            // A failure leaves the copies made so far queued for deletion: nothing stray.
            let (i, version) = done.and_then(|r| r)?;
            versions[i] = Some(version);
        }
        for ((m, key), version) in copies.iter().zip(keys).zip(versions) {
            let version = version.expect("every copy finished");
            objects.push((m.copy.file_id, m.copy.version, UfsObject { mount: mount.path.clone(), key, version }));
        }
    }
    // Also with nothing to move: it refuses if a listing recorded a copy under src meanwhile.
    s.core.begin_rename_objects(src, dst, objects)?.wait_async().await?;
    Ok(())
}

/// Lists `dir` and every directory below it, when it is a directory.
async fn list_tree(s: &MasterService, root: &CvPath) -> Result<(), Fail> {
    let mut stack = vec![root.clone()];
    while let Some(dir) = stack.pop() {
        if s.core.subdirs(&dir).is_none() {
            continue;
        }
        s.ufs.before_list(&s.core, &dir).await?;
        stack.extend(s.core.subdirs(&dir).unwrap_or_default());
    }
    Ok(())
}
