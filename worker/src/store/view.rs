//! Bytes returned by a read: views on DMA buffers and memory-tier chunks, not copies.

use std::rc::Rc;

use super::dma::DiskBytes;

#[derive(Debug, Clone)]
enum Part {
    Disk(DiskBytes),
    Mem { chunk: Rc<[u8]>, start: usize, end: usize },
}

impl Part {
    fn bytes(&self) -> &[u8] {
        match self {
            Part::Disk(d) => d,
            Part::Mem { chunk, start, end } => &chunk[*start..*end],
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
    pub(crate) fn push_disk(&mut self, d: DiskBytes) {
        if !d.is_empty() {
            self.len += d.len();
            self.parts.push(Part::Disk(d));
        }
    }

    pub(crate) fn push_mem(&mut self, chunk: Rc<[u8]>, start: usize, end: usize) {
        if end > start {
            self.len += end - start;
            self.parts.push(Part::Mem { chunk, start, end });
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
