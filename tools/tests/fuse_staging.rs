//! Write staging through `cvctl fuse`: edits other than a front-to-back new
//! file (writes at any offset, truncates to any size, writes into existing
//! files) are made to a local staged copy and published as a new cv version
//! at close and fsync. Checked byte for byte against a model, through a
//! second handle, a fresh open, and another client.

mod fuse_util;

use fuse_util::{mount, pattern};
use std::fs::{self, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::{Duration, Instant};

/// A small deterministic generator (xorshift64*): random offsets and sizes.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n as u64) as usize
    }
}

/// The file's bytes as another client (the SDK) reads them, and its version.
fn cv_read(m: &fuse_util::Mounted, path: &str) -> (Vec<u8>, u64) {
    m.rt.block_on(async {
        let client = m.cluster.as_ref().unwrap().client().await.unwrap();
        let f = client.open(path).await.unwrap();
        let bytes = f.sequential(0).read_to_end().await.unwrap();
        client.close();
        (bytes, f.version())
    })
}

fn model_write(model: &mut Vec<u8>, off: usize, data: &[u8]) {
    if model.len() < off + data.len() {
        model.resize(off + data.len(), 0);
    }
    model[off..off + data.len()].copy_from_slice(data);
}

#[test]
fn random_writes_and_truncates_round_trip() {
    let m = mount(&[]);
    let p = m.path("r.bin");
    // An existing file of more than a block, so staging copies it in first.
    let mut model = pattern((4 << 20) + 12_345, 3);
    fs::write(&p, &model).unwrap();
    let (_, v0) = cv_read(&m, "/r.bin");
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for round in 0..3u8 {
        let f = OpenOptions::new().read(true).write(true).open(&p).unwrap();
        // Opened before any edit of this round: it must see them too.
        let other = fs::File::open(&p).unwrap();
        for i in 0..40u8 {
            if rng.below(5) == 0 {
                let len = rng.below(model.len() + 100_000);
                f.set_len(len as u64).unwrap();
                model.resize(len, 0);
            } else {
                let off = rng.below(model.len() + 50_000);
                let data = pattern(1 + rng.below(70_000), round.wrapping_mul(50).wrapping_add(i));
                f.write_all_at(&data, off as u64).unwrap();
                model_write(&mut model, off, &data);
            }
        }
        assert_eq!(f.metadata().unwrap().len(), model.len() as u64, "size while staged");
        let mut seen = vec![0u8; model.len()];
        f.read_exact_at(&mut seen, 0).unwrap();
        assert!(seen == model, "round {round}: the writing handle reads its staged bytes");
        let mut seen = vec![0u8; model.len()];
        other.read_exact_at(&mut seen, 0).unwrap();
        assert!(seen == model, "round {round}: a second handle reads the staged bytes");
        drop(other);
        drop(f);
        assert!(fs::read(&p).unwrap() == model, "round {round}: fresh open after close");
        let (cv, v) = cv_read(&m, "/r.bin");
        assert_eq!(cv.len(), model.len());
        assert!(cv == model, "round {round}: another client reads the published version");
        assert!(v > v0, "a new version");
    }
    let names: Vec<String> =
        fs::read_dir(m.path("")).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into()).collect();
    assert_eq!(names, vec!["r.bin".to_string()], "no temporary names are left or shown");
}

#[test]
fn fsync_publishes_before_close_and_path_truncate_publishes_at_once() {
    let m = mount(&[]);
    let p = m.path("s.bin");
    fs::write(&p, b"0123456789").unwrap();
    let f = OpenOptions::new().write(true).open(&p).unwrap();
    f.write_all_at(b"ab", 4).unwrap();
    // A child forked now holds a copy of `f` until its exec closes it (a
    // FLUSH from the child's pid): that is not the writer's close.
    assert!(std::process::Command::new("true").status().unwrap().success());
    assert_eq!(cv_read(&m, "/s.bin").0, b"0123456789", "not published before fsync");
    f.sync_all().unwrap();
    assert_eq!(cv_read(&m, "/s.bin").0, b"0123ab6789", "published by fsync, handle still open");
    drop(f);
    // truncate(2) by path, with no handle open: published before it returns.
    let st = std::process::Command::new("truncate").arg("-s").arg("3").arg(&p).status().unwrap();
    assert!(st.success());
    assert_eq!(cv_read(&m, "/s.bin").0, b"012");
    let st = std::process::Command::new("truncate").arg("-s").arg("6").arg(&p).status().unwrap();
    assert!(st.success());
    assert_eq!(cv_read(&m, "/s.bin").0, b"012\0\0\0");
    assert_eq!(fs::read(&p).unwrap(), b"012\0\0\0");
}

#[test]
fn a_streamed_file_read_back_before_close_is_staged() {
    let m = mount(&[]);
    let p = m.path("w.bin");
    let data = pattern(300_000, 9);
    let f = OpenOptions::new().read(true).write(true).create_new(true).open(&p).unwrap();
    f.write_all_at(&data, 0).unwrap();
    // The last page is written only in part, so the kernel's page cache
    // cannot answer this read: it reaches the mount, which stages the file.
    let mut back = vec![0u8; 100];
    f.read_exact_at(&mut back, 299_900).unwrap();
    assert_eq!(back, data[299_900..]);
    f.write_all_at(b"tail", data.len() as u64).unwrap();
    drop(f);
    let mut want = data.clone();
    want.extend_from_slice(b"tail");
    assert!(cv_read(&m, "/w.bin").0 == want);
}

#[test]
fn an_unlinked_staged_file_is_not_brought_back() {
    let m = mount(&[]);
    let p = m.path("u.bin");
    fs::write(&p, b"hello").unwrap();
    let f = OpenOptions::new().read(true).write(true).open(&p).unwrap();
    f.write_all_at(b"J", 0).unwrap();
    fs::remove_file(&p).unwrap();
    let mut b = [0u8; 5];
    f.read_exact_at(&mut b, 0).unwrap();
    assert_eq!(&b, b"Jello", "the open descriptor keeps its staged bytes");
    drop(f);
    assert_eq!(fs::metadata(&p).unwrap_err().kind(), std::io::ErrorKind::NotFound);
}

#[test]
fn staging_dir_holds_the_copies_and_is_removed_at_unmount() {
    let base = tempfile::tempdir().unwrap();
    let m = mount(&["--staging-dir", base.path().to_str().unwrap()]);
    let p = m.path("d.bin");
    fs::write(&p, pattern(10_000, 1)).unwrap();
    let f = OpenOptions::new().write(true).open(&p).unwrap();
    f.write_all_at(b"x", 5).unwrap();
    let staged = files_under(base.path());
    assert_eq!(staged.len(), 1, "one staging file while the edit is open: {staged:?}");
    assert_eq!(fs::metadata(&staged[0]).unwrap().len(), 10_000);
    drop(f);
    // The kernel sends the release after close returns.
    let deadline = Instant::now() + Duration::from_secs(5);
    while !files_under(base.path()).is_empty() {
        assert!(Instant::now() < deadline, "the staging file goes with the last handle");
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(m);
    assert_eq!(fs::read_dir(base.path()).unwrap().count(), 0, "the mount's staging directory is removed");
}

fn files_under(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(files_under(&p));
        } else {
            out.push(p);
        }
    }
    out
}
