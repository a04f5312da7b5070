//! `cvctl fuse` on a real local cluster: byte-exact round trips, `cp -r`
//! in and out, concurrent readers, errnos, edits in place (staged),
//! page cache kept only while the version holds, unmount on SIGTERM.

mod fuse_util;

use fuse_util::{is_mounted, mount, pattern};
use std::fs;
use std::io::{ErrorKind, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const BLOCK: usize = 4 << 20;

fn errno(r: std::io::Result<impl std::fmt::Debug>) -> i32 {
    r.expect_err("should fail").raw_os_error().expect("an errno")
}

#[test]
fn edge_sizes_round_trip_and_other_clients_see_them() {
    let m = mount(&[]);
    let client = m.rt.block_on(m.cluster.as_ref().unwrap().client()).unwrap();
    fs::create_dir(m.path("e")).unwrap();
    for (i, len) in [0, 1, 4095, 4096, 4097, BLOCK - 1, BLOCK, BLOCK + 1, 2 * BLOCK + 12_345].into_iter().enumerate() {
        let data = pattern(len, i as u8);
        let p = m.path(&format!("e/f{i}"));
        fs::write(&p, &data).unwrap();
        assert_eq!(fs::metadata(&p).unwrap().len(), len as u64);
        assert!(fs::read(&p).unwrap() == data, "read back, len {len}");
        // The footer read an engine does: the last 16 KiB, by pread.
        let f = fs::File::open(&p).unwrap();
        let tail = len.saturating_sub(16 << 10);
        let mut buf = vec![0u8; len - tail];
        f.read_exact_at(&mut buf, tail as u64).unwrap();
        assert!(buf == data[tail..], "tail of {len}");
        for off in [len / 3, len.saturating_sub(5), BLOCK - 3] {
            if off < len {
                let mut b = vec![0u8; 7.min(len - off)];
                f.read_exact_at(&mut b, off as u64).unwrap();
                assert_eq!(b, data[off..off + b.len()], "pread({off}) of {len}");
            }
        }
        // Complete at close: another client reads the same bytes.
        let got = m.rt.block_on(async {
            let file = client.open(&format!("/e/f{i}")).await.unwrap();
            file.sequential(0).read_to_end().await.unwrap()
        });
        assert!(got == data, "SDK read of what FUSE wrote, len {len}");
    }
    let names: Vec<_> = fs::read_dir(m.path("e")).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names.len(), 9);
    client.close();
}

fn tree(root: &Path) {
    for (rel, len) in [("a/1", 0), ("a/2", 10_000), ("a/b/c/3", BLOCK + 7), ("d/4", 1), ("5", 300_000)] {
        let p = root.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, pattern(len, len as u8)).unwrap();
    }
    fs::create_dir_all(root.join("empty/dir")).unwrap();
}

#[test]
fn cp_r_in_and_out() {
    let m = mount(&[]);
    let src = m.dir.path().join("src");
    tree(&src);
    let st = Command::new("cp").arg("-r").arg(&src).arg(m.path("tree")).status().unwrap();
    assert!(st.success());
    let out = m.dir.path().join("out");
    let st = Command::new("cp").arg("-r").arg(m.path("tree")).arg(&out).status().unwrap();
    assert!(st.success());
    let diff = Command::new("diff").arg("-r").arg(&src).arg(&out).output().unwrap();
    assert!(diff.status.success(), "trees differ: {}", String::from_utf8_lossy(&diff.stdout));
    assert!(out.join("empty/dir").is_dir());
    // `ls -l` on the mount: one listing with attributes.
    let ls = Command::new("ls").arg("-lR").arg(m.path("tree")).output().unwrap();
    let text = String::from_utf8_lossy(&ls.stdout);
    assert!(text.contains(&format!("{}", BLOCK + 7)), "ls -lR shows sizes: {text}");
}

#[test]
fn concurrent_readers_get_the_same_bytes() {
    let m = mount(&[]);
    let data = pattern(3 * BLOCK + 999, 9);
    fs::write(m.path("shared"), &data).unwrap();
    std::thread::scope(|s| {
        for t in 0..8u64 {
            let (p, data) = (m.path("shared"), &data);
            s.spawn(move || {
                if t % 2 == 0 {
                    assert!(fs::read(&p).unwrap() == *data, "reader {t}: whole file");
                } else {
                    let f = fs::File::open(&p).unwrap();
                    for k in 0..50u64 {
                        let off = (k * 7_919 * (t + 1) * 4_099) % data.len() as u64;
                        let mut b = vec![0u8; 65_536.min(data.len() - off as usize)];
                        f.read_exact_at(&mut b, off).unwrap();
                        assert!(b == data[off as usize..off as usize + b.len()], "reader {t} at {off}");
                    }
                }
            });
        }
    });
}

#[test]
fn namespace_errnos_and_edits() {
    let m = mount(&[]);
    fs::create_dir(m.path("d")).unwrap();
    fs::write(m.path("d/f"), b"12345").unwrap();
    assert_eq!(errno(fs::create_dir(m.path("d"))), libc_errno::EEXIST);
    assert_eq!(errno(fs::read(m.path("nope"))), libc_errno::ENOENT);
    assert_eq!(errno(fs::remove_dir(m.path("d"))), libc_errno::ENOTEMPTY);
    assert_eq!(errno(fs::remove_file(m.path("d"))), libc_errno::EISDIR);
    assert_eq!(errno(fs::remove_dir(m.path("d/f"))), libc_errno::ENOTDIR);
    assert_eq!(errno(fs::read_dir(m.path("d/f"))), libc_errno::ENOTDIR);
    assert_eq!(errno(fs::write(m.path("d/f/x"), b"")), libc_errno::ENOTDIR);
    assert_eq!(errno(std::os::unix::fs::symlink("f", m.path("d/l"))), libc_errno::EPERM);
    assert_eq!(errno(fs::hard_link(m.path("d/f"), m.path("d/h"))), libc_errno::EPERM);
    // Edits other than front-to-back writes are staged and published at close.
    let mut app = fs::OpenOptions::new().append(true).open(m.path("d/f")).unwrap();
    app.write_all(b"6").unwrap();
    drop(app);
    assert_eq!(fs::read(m.path("d/f")).unwrap(), b"123456");
    let rw = fs::OpenOptions::new().write(true).open(m.path("d/f")).unwrap();
    rw.write_at(b"x", 2).unwrap();
    rw.set_len(4).unwrap();
    drop(rw);
    assert_eq!(fs::read(m.path("d/f")).unwrap(), b"12x4");
    // A write past the end of a new file leaves a hole of zeros.
    let mut f = fs::File::create(m.path("d/g")).unwrap();
    f.write_all(b"abc").unwrap();
    f.write_at(b"z", 6).unwrap();
    drop(f);
    assert_eq!(fs::read(m.path("d/g")).unwrap(), b"abc\0\0\0z");
    // Truncate to zero replaces the file; O_TRUNC rewrites it.
    fs::OpenOptions::new().write(true).open(m.path("d/g")).unwrap().set_len(0).unwrap();
    assert_eq!(fs::metadata(m.path("d/g")).unwrap().len(), 0);
    fs::write(m.path("d/f"), b"new").unwrap();
    assert_eq!(fs::read(m.path("d/f")).unwrap(), b"new");
    // rename replaces a file target and an empty directory target.
    fs::rename(m.path("d/f"), m.path("d/g")).unwrap();
    assert_eq!(fs::read(m.path("d/g")).unwrap(), b"new");
    assert_eq!(errno(fs::metadata(m.path("d/f"))), libc_errno::ENOENT);
    fs::create_dir(m.path("e")).unwrap();
    fs::create_dir(m.path("full")).unwrap();
    fs::write(m.path("full/x"), b"").unwrap();
    assert_eq!(errno(fs::rename(m.path("e"), m.path("full"))), libc_errno::ENOTEMPTY);
    assert_eq!(errno(fs::rename(m.path("e"), m.path("d/g"))), libc_errno::ENOTDIR);
    fs::rename(m.path("d"), m.path("e")).unwrap();
    assert_eq!(fs::read(m.path("e/g")).unwrap(), b"new");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(fs::metadata(m.path("e/g")).unwrap().permissions().mode() & 0o7777, 0o644);
    assert_eq!(
        errno(fs::set_permissions(m.path("e/g"), std::os::unix::fs::PermissionsExt::from_mode(0o600))),
        libc_errno::EPERM
    );
}

#[test]
fn page_cache_is_dropped_when_the_version_changes() {
    let m = mount(&["--attr-ttl", "50ms"]);
    let a = pattern(200_000, 1);
    let b = pattern(200_000, 2);
    fs::write(m.path("v"), &a).unwrap();
    assert!(fs::read(m.path("v")).unwrap() == a);
    assert!(fs::read(m.path("v")).unwrap() == a, "second open, same version");
    // Another client replaces the file with the same length.
    replace_elsewhere(&m, "/v", &b);
    assert!(fs::read(m.path("v")).unwrap() == b, "a new version is read, not the cached pages");
}

/// Another client replaces `path` with `data`; returns once the mount's attributes (50 ms)
/// may have expired.
fn replace_elsewhere(m: &fuse_util::Mounted, path: &str, data: &[u8]) {
    let client = m.rt.block_on(m.cluster.as_ref().unwrap().client()).unwrap();
    m.rt.block_on(async {
        let mut w = client.create(path, true).await.unwrap();
        w.write(data).await.unwrap();
        w.close().await.unwrap();
    });
    client.close();
    std::thread::sleep(Duration::from_millis(120));
}

/// The kernel keeps one page cache per inode, whichever descriptor filled it. A descriptor
/// opened on the old version must not fill it once an open of the new version has dropped
/// it: its reads fail with ESTALE, and the new descriptor reads only the new version.
#[test]
fn a_descriptor_of_a_replaced_version_cannot_fill_the_new_versions_pages() {
    use std::io::{Read, Seek, SeekFrom};
    let m = mount(&["--attr-ttl", "50ms"]);
    let a = pattern(20_000, 1);
    let b = pattern(20_000, 2);
    fs::write(m.path("r"), &a).unwrap();
    let mut old = fs::File::open(m.path("r")).unwrap();
    let mut got = Vec::new();
    old.read_to_end(&mut got).unwrap();
    assert!(got == a);
    replace_elsewhere(&m, "/r", &b);
    // This open sees the new version, so the kernel drops the inode's pages.
    let mut new = fs::File::open(m.path("r")).unwrap();
    old.seek(SeekFrom::Start(0)).unwrap();
    let mut buf = vec![0u8; 4096];
    assert_eq!(errno(old.read(&mut buf)), libc_errno::ESTALE, "the old descriptor filled the new version's pages");
    let mut got = Vec::new();
    new.read_to_end(&mut got).unwrap();
    assert!(got == b, "the new descriptor read bytes of the old version");
}

/// Rewriting a file through the mount streams a new version that replaces the old one only
/// when it is complete: while it is written, and after the mount's process is killed with -9
/// under it, every other client reads the old version byte-exact.
#[test]
fn a_rewrite_killed_midway_leaves_the_previous_version() {
    // A killed mount cannot remove its staging directory: it goes with this one.
    let staging = tempfile::tempdir().unwrap();
    let m = mount(&["--staging-dir", staging.path().to_str().unwrap()]);
    let old = pattern(3 * BLOCK + 5, 3);
    fs::write(m.path("o"), &old).unwrap();
    let client = m.rt.block_on(m.cluster.as_ref().unwrap().client()).unwrap();
    let read_old = |when: &str| {
        let got = m.rt.block_on(async {
            let f = client.open("/o").await.unwrap();
            f.sequential(0).read_to_end().await.unwrap()
        });
        assert!(got == old, "{when}: another client read other bytes than the old version");
    };
    let mut w = fs::File::create(m.path("o")).unwrap();
    w.write_all(&pattern(2 * BLOCK + 1, 4)).unwrap();
    read_old("while the new version is written");
    let st = Command::new("kill").arg("-KILL").arg(m.pid().to_string()).status().unwrap();
    assert!(st.success());
    let _ = w.write_all(&pattern(BLOCK, 5));
    drop(w);
    read_old("after the mount was killed");
    client.close();
}

#[test]
fn sigterm_unmounts_cleanly() {
    let mut m = mount(&[]);
    fs::write(m.path("x"), b"x").unwrap();
    let st = Command::new("kill").arg("-TERM").arg(m.pid().to_string()).status().unwrap();
    assert!(st.success());
    let exit = m.wait_exit(Duration::from_secs(10)).expect("cvctl fuse exits on SIGTERM");
    assert!(exit.success(), "exit status {exit}");
    assert!(!is_mounted(&m.mnt));
    assert_eq!(fs::read_dir(&m.mnt).unwrap().count(), 0, "the mount point is an empty directory again");
    let e = fs::read(m.path("x")).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotFound);
}

/// errno values on Linux, spelled out so the tests need no libc.
mod libc_errno {
    pub const EPERM: i32 = 1;
    pub const ENOENT: i32 = 2;
    pub const ESTALE: i32 = 116;
    pub const EEXIST: i32 = 17;
    pub const ENOTDIR: i32 = 20;
    pub const EISDIR: i32 = 21;
    pub const ENOTEMPTY: i32 = 39;
}
