//! State values to wire messages: statuses, block locations, redacted mounts.

use std::net::SocketAddr;

use super::errors::Fail;
use cv_master_core::state::{self, EntryKind, FileState};
use cv_net::capability::{Access, ObjectDigest, Signer};
use cv_wire::ErrorCode;
use cv_wire::msg::{self, FileKind, FileStatus, KeyValue, MountInfo};

/// A file's or directory's status as the wire carries it.
pub(super) fn status(path: String, s: &state::EntryStat, block_size: u64) -> FileStatus {
    let file = s.kind == EntryKind::File;
    FileStatus {
        id: s.id,
        path,
        kind: if file { FileKind::File } else { FileKind::Dir },
        // The core counts a directory's entries here; the wire says 0 for directories.
        length: if file { s.length } else { 0 },
        mtime_ms: s.mtime,
        version: s.version,
        mode: s.mode,
        complete: !file || s.state == Some(FileState::Complete),
        block_size: if file { block_size } else { 0 },
    }
}

/// The endpoint of `shard` of `worker`, as readers dial it. `None` only for a worker whose
/// journaled host predates resolving hosts at registration, until it registers again.
pub(super) fn shard_addr(worker: u64, shard: u16, addr: Option<SocketAddr>) -> Result<msg::ShardAddr, Fail> {
    let addr = addr.ok_or_else(|| {
        let msg = format!("worker {worker} has no IP address for shard {shard} until it registers again");
        Fail::new(ErrorCode::Unavailable, msg)
    })?;
    Ok(msg::ShardAddr::new(addr))
}

/// Block `b` of an open file, with the read capability `signer` mints for it (for a block of
/// a cached object, bound to its range of the object `object` digests).
pub(super) fn block_loc(
    b: &state::PlacedBlock,
    signer: &Signer,
    object: Option<&ObjectDigest>,
) -> Result<msg::BlockLoc, Fail> {
    let source = object.map_or([0; 16], |o| o.range(b.offset_in_file, b.len));
    Ok(msg::BlockLoc {
        block_id: b.block_id,
        offset: b.offset_in_file,
        len: b.len,
        worker_id: b.worker_id,
        shard: b.shard,
        // A lost block is not dialed: any address will do.
        addr: match (b.lost, b.addr) {
            (true, None) => msg::ShardAddr::new(SocketAddr::from(([0, 0, 0, 0], 0))),
            _ => shard_addr(b.worker_id, b.shard, b.addr)?,
        },
        lost: b.lost,
        replicas: replicas(b.shard, &b.replicas)?,
        cap: signer.mint(Access::Read, b.block_id, source),
    })
}

/// Other copies of a block on `shard` of each worker, as the wire carries them.
pub(super) fn replicas(shard: u16, copies: &[(u64, Option<SocketAddr>)]) -> Result<Vec<msg::Replica>, Fail> {
    copies.iter().map(|&(w, addr)| Ok(msg::Replica { worker_id: w, addr: shard_addr(w, shard, addr)? })).collect()
}

/// The child `name` of the normalized directory `dir`.
pub(super) fn child_path(dir: &str, name: &str) -> String {
    if dir == "/" { format!("/{name}") } else { format!("{dir}/{name}") }
}

pub(super) fn mode_to_state(m: msg::MountMode) -> state::MountMode {
    match m {
        msg::MountMode::Cache => state::MountMode::Cache,
        msg::MountMode::Fs => state::MountMode::Fs,
    }
}

pub(super) fn mode_to_wire(m: state::MountMode) -> msg::MountMode {
    match m {
        state::MountMode::Cache => msg::MountMode::Cache,
        state::MountMode::Fs => msg::MountMode::Fs,
    }
}

/// A mount as clients see it: secret option values replaced by `***`.
pub(super) fn mount_info(m: &state::MountEntry) -> MountInfo {
    let options = m
        .options
        .iter()
        .map(|(k, v)| KeyValue { key: k.clone(), value: if cv_ufs::is_secret(k) { "***".into() } else { v.clone() } })
        .collect();
    MountInfo { ufs_url: m.ufs_url.clone(), cv_path: m.path.clone(), mode: mode_to_wire(m.mode), options }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_redacted_and_the_rest_kept() {
        let m = state::MountEntry {
            path: "/m".into(),
            ufs_url: "s3://b/p".into(),
            mode: state::MountMode::Fs,
            options: vec![
                ("region".into(), "us-east-1".into()),
                ("Secret_Access_Key".into(), "s3cr3t".into()),
                ("access_key_id".into(), "AKIA".into()),
                ("session_token".into(), "tok".into()),
                ("db_password".into(), "pw".into()),
                ("credential_file".into(), "/c".into()),
            ]
            .into(),
        };
        let info = mount_info(&m);
        assert_eq!(info.options[0].value, "us-east-1");
        assert!(info.options[1..].iter().all(|o| o.value == "***"), "{:?}", info.options);
        assert_eq!(info.mode, msg::MountMode::Fs);
    }

    #[test]
    fn addresses_and_child_paths() {
        let v4 = shard_addr(1, 0, Some("10.0.0.1:7".parse().unwrap())).unwrap();
        assert_eq!((v4.to_string(), v4.socket_addr()), ("10.0.0.1:7".into(), "10.0.0.1:7".parse().unwrap()));
        let v6 = shard_addr(1, 0, Some("[::1]:7".parse().unwrap())).unwrap();
        assert_eq!(v6.to_string(), "[::1]:7");
        let none = shard_addr(3, 2, None).unwrap_err();
        assert_eq!(none.code, ErrorCode::Unavailable);
        assert!(none.message.contains("worker 3") && none.message.contains("shard 2"), "{}", none.message);
        assert_eq!(child_path("/", "a"), "/a");
        assert_eq!(child_path("/a", "b"), "/a/b");
    }
}
