//! Bytes returned by a read: views on DMA buffers and memory-tier chunks, not copies.

use bytes::Bytes;

use super::dma::DiskBytes;

#[derive(Debug, Clone)]
enum Part {
    /// Bytes of one disk read, with the crc32 they should have (stored chunk crcs combined,
    /// partial edge chunks hashed).
    Disk { bytes: DiskBytes, crc: u32 },
    /// Bytes of a memory-tier chunk (a slice sharing it), with the crc32 they should have (the
    /// stored one for a whole chunk, else the part's, hashed as the chunk was checked).
    Mem { bytes: Bytes, crc: u32 },
}

impl Part {
    fn bytes(&self) -> &[u8] {
        match self {
            Part::Disk { bytes, .. } => bytes,
            Part::Mem { bytes, .. } => bytes,
        }
    }

    fn crc32(&self) -> u32 {
        match self {
            Part::Disk { crc, .. } | Part::Mem { crc, .. } => *crc,
        }
    }
}

/// The bytes of a block range, as one or more contiguous pieces in order.
///
/// A range served from one disk read is a single piece on the aligned read buffer; chunks
/// served from the memory tier are pieces of their own. Send `parts()` to a socket as they are.
#[derive(Debug, Clone, Default)]
pub struct BlockBytes {
    parts: Vec<Part>,
    len: usize,
}

impl BlockBytes {
    /// Appends disk bytes; `crc` must be the crc32 `d` should have (computed over it, or
    /// combined from stored chunk crcs for the reader to check).
    pub(crate) fn push_disk(&mut self, d: DiskBytes, crc: u32) {
        if !d.is_empty() {
            self.len += d.len();
            self.parts.push(Part::Disk { bytes: d, crc });
        }
    }

    /// Appends part of a memory-tier chunk; `crc` must be the crc32 the bytes should have (the
    /// stored one for a whole chunk: a mismatch is caught by whoever checks [`Self::crc32`]).
    pub(crate) fn push_mem(&mut self, bytes: Bytes, crc: u32) {
        if !bytes.is_empty() {
            self.len += bytes.len();
            self.parts.push(Part::Mem { bytes, crc });
        }
    }

    /// Total bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The pieces, in order; their concatenation is the range.
    pub fn parts(&self) -> impl Iterator<Item = &[u8]> {
        self.parts.iter().map(Part::bytes)
    }

    /// The pieces as shared buffers, no copy: a disk piece is its DMA buffer, a memory-tier
    /// piece its chunk.
    pub(crate) fn shared_parts(&self) -> impl Iterator<Item = Bytes> + '_ {
        self.parts.iter().map(|p| match p {
            Part::Disk { bytes, .. } => bytes.bytes().clone(),
            Part::Mem { bytes, .. } => bytes.clone(),
        })
    }

    /// The crc32 the bytes should have, combined from the pieces' (no pass over the bytes). With
    /// `Verify::ByReader` this is what the reader checks the bytes against.
    pub fn crc32(&self) -> u32 {
        let mut crc = crc32fast::Hasher::new();
        for p in &self.parts {
            crc.combine(&crc32fast::Hasher::new_with_initial_len(p.crc32(), p.bytes().len() as u64));
        }
        crc.finalize()
    }

    /// The bytes as one slice when they are one piece (always so for a single disk read).
    pub fn as_contiguous(&self) -> Option<&[u8]> {
        match self.parts.as_slice() {
            [] => Some(&[]),
            [one] => Some(one.bytes()),
            _ => None,
        }
    }

    /// A copy of all bytes in one buffer.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.len);
        for p in self.parts() {
            v.extend_from_slice(p);
        }
        v
    }
}
