//! Mount table requests. Option values are stored as given but never sent back when their key
//! names a secret.

use super::convert::{mode_to_state, mode_to_wire, mount_info};
use super::errors::Fail;
use super::service::MasterService;
use cv_net::rpc::Reply;
use cv_wire::Frame;
use cv_wire::msg::{Done, GetMount, GetMountOk, KeyValue, ListMountsOk, Mount, Unmount};

pub(super) async fn mount(s: &MasterService, frame: &Frame) -> Result<Reply, Fail> {
    let req: Mount = frame.decode_body()?;
    let options = req.options.into_iter().map(|kv| (kv.key, kv.value)).collect();
    s.core.begin_mount(&req.cv_path, &req.ufs_url, mode_to_state(req.mode), options)?.wait_async().await?;
    Ok(Reply::ok(frame.header().request_id, &Done {}, Vec::new()))
}

/// A mount with its credentials, for a worker that fetches blocks under it.
pub(super) async fn get_mount(s: &MasterService, frame: &Frame) -> Result<Reply, Fail> {
    let req: GetMount = frame.decode_body()?;
    let path = crate::path::CvPath::parse(&req.cv_path).map_err(|e| Fail::from(crate::Error::from(e)))?;
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
        options: m.options.into_iter().map(|(key, value)| KeyValue { key, value }).collect(),
    };
    Ok(Reply::ok(frame.header().request_id, &GetMountOk { mount }, Vec::new()))
}

pub(super) async fn unmount(s: &MasterService, frame: &Frame) -> Result<Reply, Fail> {
    let req: Unmount = frame.decode_body()?;
    s.core.begin_unmount(&req.cv_path)?.wait_async().await?;
    Ok(Reply::ok(frame.header().request_id, &Done {}, Vec::new()))
}

pub(super) async fn list(s: &MasterService, frame: &Frame) -> Result<Reply, Fail> {
    // Checks the body is a ListMounts even though it carries nothing.
    frame.access::<cv_wire::msg::ListMounts>()?;
    // The core's list_mounts waits blocking for durability; run it off the reactor.
    let core = s.core.clone();
    let mounts = tokio::task::spawn_blocking(move || core.list_mounts())
        .await
        .map_err(|e| Fail::new(cv_wire::ErrorCode::Internal, format!("list mounts task: {e}")))??;
    let mut mounts: Vec<_> = mounts.iter().map(mount_info).collect();
    mounts.sort_by(|a, b| a.cv_path.cmp(&b.cv_path));
    Ok(Reply::ok(frame.header().request_id, &ListMountsOk { mounts }, Vec::new()))
}
