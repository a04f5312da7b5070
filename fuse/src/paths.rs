//! cv paths from the kernel's (parent, name) pairs.

use fuser::Errno;
use std::ffi::OsStr;

/// Longest name of one entry, as the master allows.
const MAX_NAME: usize = 255;
/// Longest whole path, as the master allows.
const MAX_PATH: usize = 4096;

/// `parent/name` as a cv path; names cv cannot hold are refused with the
/// errno POSIX gives for them.
pub(crate) fn child(parent: &str, name: &OsStr) -> Result<String, Errno> {
    // cv paths are UTF-8: a name that is not cannot exist there.
    let name = name.to_str().ok_or(Errno::EINVAL)?;
    if name.len() > MAX_NAME {
        return Err(Errno::ENAMETOOLONG);
    }
    if name.is_empty() || name == "." || name == ".." || name.contains('/') {
        return Err(Errno::EINVAL);
    }
    let path = if parent == "/" { format!("/{name}") } else { format!("{parent}/{name}") };
    if path.len() > MAX_PATH {
        return Err(Errno::ENAMETOOLONG);
    }
    Ok(path)
}

/// The last component of a path.
pub(crate) fn name_of(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// The directory holding `path` (`None` for `/`).
pub(crate) fn parent_of(path: &str) -> Option<&str> {
    match path.rfind('/') {
        Some(0) if path.len() > 1 => Some("/"),
        Some(0) | None => None,
        Some(i) => Some(&path[..i]),
    }
}

/// Whether `path` is `dir` itself or lies under it.
pub(crate) fn is_under(path: &str, dir: &str) -> bool {
    dir == "/" || path == dir || path.strip_prefix(dir).is_some_and(|rest| rest.starts_with('/'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::ffi::OsStrExt;

    #[test]
    fn joins_and_refuses() {
        assert_eq!(child("/", OsStr::new("a")).unwrap(), "/a");
        assert_eq!(child("/a", OsStr::new("b")).unwrap(), "/a/b");
        assert_eq!(child("/", OsStr::new(&"x".repeat(256))), Err(Errno::ENAMETOOLONG));
        assert!(child("/", OsStr::new(&"x".repeat(255))).is_ok());
        assert_eq!(child("/", OsStr::from_bytes(b"\xff")), Err(Errno::EINVAL));
        assert_eq!(child("/", OsStr::new("..")), Err(Errno::EINVAL));
    }

    #[test]
    fn under_is_by_component() {
        assert!(is_under("/a/b", "/a"));
        assert!(is_under("/a", "/a"));
        assert!(!is_under("/ab", "/a"));
        assert!(is_under("/x", "/"));
        assert_eq!(name_of("/a/b"), "b");
        assert_eq!(parent_of("/a/b"), Some("/a"));
        assert_eq!(parent_of("/a"), Some("/"));
        assert_eq!(parent_of("/"), None);
    }
}
