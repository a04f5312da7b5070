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
use super::namespace::{parsed, parsed_new};
use super::request::Req;
use super::service::MasterService;
use cv_master_core::path::CvPath;
use cv_master_core::state::{Mount, MountMode, ObjectCopy, UfsObject, key_of};
use cv_net::rpc::Reply;
use cv_wire::ErrorCode;
use cv_wire::msg::Rename;

pub(super) async fn rename(s: &MasterService, q: Req<'_, Rename>) -> Result<Reply, Fail> {
    let req = q.owned()?;
    let (src, dst) = (parsed(&req.src)?, parsed_new(&req.dst)?);
    let Some(mount) = s.core.inspect(|st| st.mount_for(&src).cloned()) else {
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
    if !s.core.inspect(|st| st.check_rename(&src, &dst))? {
        return Ok(q.done());
    }
    let copies = s.core.inspect(|st| st.object_copies_under(&src));
    let moved = move_objects(s, &mount, &src, &dst, &copies).await;
    if !copies.is_empty() {
        // The old objects after a rename, the copies made after a failure: queued either way.
        super::deletes::soon(super::deletes::drain_held(&s.core, &s.ufs)).await;
    }
    drop(held);
    moved?;
    s.ufs.sync(&src);
    Ok(q.done())
}

/// Object copies in flight at once during one rename (each is one request the store serves
/// without moving the bytes through cv; a directory of many files is not copied one by one).
const COPIES_AT_ONCE: usize = 16;

/// Copies each object to its file's new key (queued for deletion first), then renames and
/// points every moved file at its copy in one journaled step.
async fn move_objects(
    s: &MasterService,
    mount: &Mount,
    src: &CvPath,
    dst: &CvPath,
    copies: &[ObjectCopy],
) -> Result<(), Fail> {
    let mut objects = Vec::with_capacity(copies.len());
    if !copies.is_empty() {
        let ufs = s.ufs.store(mount)?;
        let keys: Vec<String> = copies.iter().map(|c| key_of(&mount.path, &moved_path(c, src, dst))).collect();
        s.core.begin_objects_queued(&mount.path, keys.clone())?.wait_async().await?;
        let mut copying = tokio::task::JoinSet::new();
        let mut versions: Vec<Option<String>> = vec![None; copies.len()];
        let mut next = 0;
        loop {
            while copying.len() < COPIES_AT_ONCE && next < copies.len() {
                let (ufs, from, to, len) =
                    (ufs.clone(), copies[next].object.key.clone(), keys[next].clone(), copies[next].length);
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
        for ((c, key), version) in copies.iter().zip(keys).zip(versions) {
            let version = version.expect("every copy finished");
            objects.push((c.file_id, c.version, UfsObject { mount: mount.path.clone(), key, version }));
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
        let is_dir =
            s.core.inspect(|st| st.stat(&dir).is_ok_and(|st| st.kind == cv_master_core::state::EntryKind::Dir));
        if !is_dir {
            continue;
        }
        s.ufs.before_list(&s.core, &dir).await?;
        let subdirs = s.core.inspect(|st| {
            let Ok(page) = st.list(&dir, None, usize::MAX) else { return Vec::new() };
            page.entries
                .into_iter()
                .filter(|e| e.stat.kind == cv_master_core::state::EntryKind::Dir)
                .filter_map(|e| dir.child(&e.name).ok())
                .collect::<Vec<_>>()
        });
        stack.extend(subdirs);
    }
    Ok(())
}

/// `c`'s path once `src` is renamed to `dst`.
fn moved_path(c: &ObjectCopy, src: &CvPath, dst: &CvPath) -> String {
    format!("{}{}", dst.as_str(), &c.path.as_str()[src.as_str().len()..])
}
