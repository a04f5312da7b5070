//! Mount table requests. Option values are stored as given but never sent back when their key
//! names a secret.

use super::convert::{mode_to_state, mode_to_wire, mount_info};
use super::errors::Fail;
use super::mount_policy::Denied;
use super::req_namespace::{parsed, parsed_new};
use super::request::Req;
use super::service::MasterService;
use cv_net::rpc::Reply;
use cv_wire::msg::{Done, Free, FreeOk, GetMount, GetMountOk, KeyValue, ListMountsOk, Mount, SyncMount, Unmount};

pub(super) async fn mount(s: &MasterService, q: Req<'_, Mount>) -> Result<Reply, Fail> {
    let req = q.owned()?;
    let options: Vec<(String, String)> = req.options.into_iter().map(|kv| (kv.key, kv.value)).collect();
    let mode = mode_to_state(req.mode);
    let path = parsed_new(&req.cv_path)?;
    // Only what the operator allows, before the store is asked anything.
    s.mount_policy.check(&req.ufs_url, &options).map_err(|d| match d {
        Denied::Invalid(m) => Fail::new(cv_wire::ErrorCode::InvalidArgument, m),
        Denied::NotAllowed(m) => Fail::new(cv_wire::ErrorCode::PermissionDenied, m),
    })?;
    let mount = cv_master_core::state::MountEntry {
        path: path.as_str().to_owned(),
        ufs_url: req.ufs_url,
        mode,
        options: options.into(),
    };
    // The store must answer before the mount is recorded: a typo fails here, not at first read.
    s.ufs.validate(&mount).await?;
    if !s.core.exists(&path) {
        s.core.begin_mkdir(&path, true)?.wait_async().await?;
    }
    s.core.begin_mount(&path, &mount.ufs_url, mount.mode, mount.options.0)?.wait_async().await?;
    tracing::info!(path = %path, "mounted");
    Ok(q.reply(&Done {}))
}

/// A mount with its credentials, for a worker that fetches blocks under it.
pub(super) async fn get_mount(s: &MasterService, q: Req<'_, GetMount>) -> Result<Reply, Fail> {
    let req = q.owned()?;
    let path = parsed(&req.cv_path)?;
    let core = s.core.clone();
    let mounts = tokio::task::spawn_blocking(move || core.list_mounts())
        .await
        .map_err(|e| Fail::new(cv_wire::ErrorCode::Internal, format!("get mount task: {e}")))??;
    let Some(m) = mounts.into_iter().find(|m| m.path == path.as_str()) else {
        return Err(Fail::new(cv_wire::ErrorCode::NotFound, format!("no mount at {}", req.cv_path)));
    };
    let mount = Mount {
        ufs_url: m.ufs_url,
        cv_path: m.path,
        mode: mode_to_wire(m.mode),
        options: m.options.0.into_iter().map(|(key, value)| KeyValue { key, value }).collect(),
    };
    Ok(q.reply(&GetMountOk { mount }))
}

/// Forgets what was read from the store under a path: the next use reads it again.
pub(super) async fn sync(s: &MasterService, q: Req<'_, SyncMount>) -> Result<Reply, Fail> {
    let req = q.owned()?;
    let path = parsed(&req.cv_path)?;
    if !s.core.forget_checks(&path) {
        return Err(Fail::new(cv_wire::ErrorCode::NotFound, format!("{} is not under a mount", req.cv_path)));
    }
    Ok(q.reply(&Done {}))
}

/// Drops cached blocks of object copies; their metadata stays.
pub(super) async fn free(s: &MasterService, q: Req<'_, Free>) -> Result<Reply, Fail> {
    let req = q.owned()?;
    let (files, blocks, skipped) = s.core.begin_free(&parsed(&req.path)?)?.wait_async().await?;
    Ok(q.reply(&FreeOk { files, blocks, skipped }))
}

pub(super) async fn unmount(s: &MasterService, q: Req<'_, Unmount>) -> Result<Reply, Fail> {
    let req = q.owned()?;
    let path = parsed(&req.cv_path)?;
    s.core.begin_unmount(&path, req.force)?.wait_async().await?;
    // A later mount there lists the store anew.
    s.core.forget_checks(&path);
    Ok(q.reply(&Done {}))
}

pub(super) async fn list(s: &MasterService, q: Req<'_, cv_wire::msg::ListMounts>) -> Result<Reply, Fail> {
    // The core's list_mounts waits blocking for durability; run it off the reactor.
    let core = s.core.clone();
    let mounts = tokio::task::spawn_blocking(move || core.list_mounts())
        .await
        .map_err(|e| Fail::new(cv_wire::ErrorCode::Internal, format!("list mounts task: {e}")))??;
    let mut mounts: Vec<_> = mounts.iter().map(mount_info).collect();
    mounts.sort_by(|a, b| a.cv_path.cmp(&b.cv_path));
    Ok(q.reply(&ListMountsOk { mounts }))
}
