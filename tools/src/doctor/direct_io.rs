//! Whether O_DIRECT works in a directory, as the worker's store uses it: a temporary file
//! opened with O_DIRECT, aligned writes from the smallest size up to find the logical block
//! size the device accepts, and one aligned read back compared byte for byte. tmpfs refuses
//! O_DIRECT at open; a device whose logical block exceeds the store's alignment refuses the
//! store's writes.

use std::fs::OpenOptions;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;

/// The alignment of every extent the store reads and writes (`worker/src/store/dma.rs`).
pub(super) const STORE_ALIGN: usize = cv_rt::BUF_ALIGN;

/// What the probe found.
#[derive(Debug)]
pub(super) enum DirectIo {
    /// Works: the smallest aligned write the device took.
    Works { logical_block: usize },
    /// Opening with O_DIRECT failed (the file system does not support it).
    NoOpen(std::io::Error),
    /// No write up to the store's alignment was accepted: the store's I/O would fail.
    TooCoarse(std::io::Error),
    /// The write went through but did not read back the same.
    Mismatch(String),
    /// The temporary file could not be made at all.
    NoFile(std::io::Error),
}

/// Probes `dir` (which exists and is writable).
pub(super) fn probe(dir: &Path) -> DirectIo {
    let tmp = match tempfile::Builder::new().prefix(".cv-doctor-").tempfile_in(dir) {
        Ok(t) => t,
        Err(e) => return DirectIo::NoFile(e),
    };
    let file = match OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(nix::fcntl::OFlag::O_DIRECT.bits())
        .open(tmp.path())
    {
        Ok(f) => f,
        Err(e) => return DirectIo::NoOpen(e),
    };
    // O_DIRECT needs the buffer aligned too: take an aligned window of a larger vector rather
    // than an aligned allocation, which would need unsafe.
    let mut backing = vec![0u8; 3 * STORE_ALIGN];
    let start = backing.as_ptr().align_offset(STORE_ALIGN);
    let buf = &mut backing[start..start + 2 * STORE_ALIGN];
    let (out, back) = buf.split_at_mut(STORE_ALIGN);
    for (i, b) in out.iter_mut().enumerate() {
        *b = (i % 251) as u8;
    }
    let mut size = 512;
    let logical_block = loop {
        match file.write_at(&out[..size], 0) {
            Ok(n) if n == size => break size,
            Ok(n) => return DirectIo::Mismatch(format!("a {size}-byte write wrote {n}")),
            Err(e) if size >= STORE_ALIGN => return DirectIo::TooCoarse(e),
            Err(_) => size *= 2,
        }
    };
    if let Err(e) = file.write_at(out, 0).and_then(|_| file.sync_data()) {
        return DirectIo::TooCoarse(e);
    }
    match file.read_at(back, 0) {
        Ok(n) if n == STORE_ALIGN && back == out => DirectIo::Works { logical_block },
        Ok(n) => DirectIo::Mismatch(format!("read back {n} bytes that differ from the {STORE_ALIGN} written")),
        Err(e) => DirectIo::Mismatch(format!("aligned read failed: {e}")),
    }
}
