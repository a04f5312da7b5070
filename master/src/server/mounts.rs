//! Mount table requests. Option values are stored as given but never sent back when their key
//! names a secret.

use super::convert::{mode_to_state, mount_info};
use super::errors::Fail;
use super::service::MasterService;
use cv_net::rpc::Reply;
use cv_wire::Frame;
use cv_wire::msg::{Done, ListMountsOk, Mount, Unmount};

pub(super) async fn mount(s: &MasterService, frame: &Frame) -> Result<Reply, Fail> {
    let req: Mount = frame.decode_body()?;
    let options = req.options.into_iter().map(|kv| (kv.key, kv.value)).collect();
    s.core.begin_mount(&req.cv_path, &req.ufs_url, mode_to_state(req.mode), options)?.wait_async().await?;
    Ok(Reply::ok(frame.header().request_id, &Done {}, Vec::new()))
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
