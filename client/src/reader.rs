//! Sequential reads with read-ahead: up to `prefetch_depth` chunks are in
//! flight ahead of the reader, starting from two and doubling as the reader
//! takes them, so a reader that stops early has not fetched much it never reads.

use crate::block::Received;
use crate::error::{Error, ErrorKind, Result};
use crate::file::File;
use std::collections::VecDeque;
use tokio::task::JoinHandle;

/// Reads a file front to back, keeping a bounded number of requests ahead.
#[derive(Debug)]
pub struct SequentialReader {
    file: File,
    /// Next byte the caller will get.
    pos: u64,
    /// Next byte to request.
    next_fetch: u64,
    inflight: VecDeque<JoinHandle<Result<Received>>>,
    /// Chunks kept in flight now: grows to `prefetch_depth`.
    window: usize,
    /// What is left of the chunk being read, as received (copied once, into the caller's buffer).
    current: Received,
}

impl File {
    /// A sequential reader starting at `offset`, with read-ahead.
    pub fn sequential(&self, offset: u64) -> SequentialReader {
        SequentialReader::new(self.clone(), offset)
    }
}

impl SequentialReader {
    fn new(file: File, offset: u64) -> Self {
        let offset = offset.min(file.len());
        SequentialReader {
            file,
            pos: offset,
            next_fetch: offset,
            inflight: VecDeque::new(),
            window: 2,
            current: Received::default(),
        }
    }

    /// Position of the next byte returned.
    pub fn position(&self) -> u64 {
        self.pos
    }

    /// End of the bytes already asked for: reading up to here costs no new request.
    pub fn fetched_end(&self) -> u64 {
        self.next_fetch
    }

    fn refill(&mut self) {
        let settings = self.file.settings();
        let chunk = settings.read_chunk.bytes();
        let window = self.window.min(settings.prefetch_depth as usize);
        while self.inflight.len() < window && self.next_fetch < self.file.len() {
            let off = self.next_fetch;
            let len = chunk.min(self.file.len() - off) as usize;
            self.next_fetch += len as u64;
            let file = self.file.clone();
            self.inflight.push_back(tokio::spawn(async move { file.read_owned(off, len).await }));
        }
    }

    /// Fills `buf` with the next bytes; returns how many (0 at the end).
    pub async fn read(&mut self, buf: &mut [u8]) -> Result<usize> {
        if self.current.is_empty() {
            self.refill();
            let Some(next) = self.inflight.pop_front() else { return Ok(0) };
            self.current = next.await.map_err(|e| Error::new(ErrorKind::Other, format!("read-ahead task: {e}")))??;
            self.window = self.window.saturating_mul(2);
            self.refill();
            if self.current.is_empty() {
                return Ok(0);
            }
        }
        let n = self.current.take_into(buf);
        self.pos += n as u64;
        Ok(n)
    }

    /// Copies everything that is left into `out`; returns the byte count.
    pub async fn copy_to(&mut self, out: &mut impl std::io::Write) -> Result<u64> {
        let mut buf = vec![0u8; 1 << 20];
        let mut total = 0;
        loop {
            let n = self.read(&mut buf).await?;
            if n == 0 {
                return Ok(total);
            }
            out.write_all(&buf[..n]).map_err(|e| Error::new(ErrorKind::Other, format!("write output: {e}")))?;
            total += n as u64;
        }
    }

    /// Reads everything that is left.
    pub async fn read_to_end(&mut self) -> Result<Vec<u8>> {
        let mut out = Vec::with_capacity((self.file.len() - self.pos) as usize);
        let mut buf = vec![0u8; 1 << 20];
        loop {
            let n = self.read(&mut buf).await?;
            if n == 0 {
                return Ok(out);
            }
            out.extend_from_slice(&buf[..n]);
        }
    }
}

impl Drop for SequentialReader {
    fn drop(&mut self) {
        for h in &self.inflight {
            h.abort();
        }
    }
}
