//! Reads of one open file. Random reads go straight to the owning shard
//! (`read_at`); once the kernel reads a file front to back, a sequential
//! reader with the client's read-ahead takes over. The tail is served from
//! memory by the client either way.

use crate::errno::errno_of;
use cv_client::{File, SequentialReader};
use fuser::Errno;
use tokio::sync::Mutex;

/// Reads in a row, each starting where the last ended, before read-ahead starts.
const STREAK: u32 = 2;
/// A gap the stream skips forward over instead of restarting, for the
/// kernel's parallel read-ahead requests that arrive out of order.
const MAX_SKIP: u64 = 8 << 20;

/// One open file being read.
#[derive(Debug)]
pub(crate) struct ReadHandle {
    file: File,
    seq: Mutex<Seq>,
}

#[derive(Debug, Default)]
struct Seq {
    reader: Option<SequentialReader>,
    last_end: u64,
    streak: u32,
}

impl ReadHandle {
    pub(crate) fn new(file: File) -> Self {
        ReadHandle { file, seq: Mutex::new(Seq::default()) }
    }

    pub(crate) fn file(&self) -> &File {
        &self.file
    }

    /// Up to `size` bytes at `offset`; fewer only at the end of the file.
    pub(crate) async fn read(&self, offset: u64, size: u32) -> Result<Vec<u8>, Errno> {
        let len = self.file.len();
        if offset >= len || size == 0 {
            return Ok(Vec::new());
        }
        let want = (u64::from(size)).min(len - offset) as usize;
        let mut seq = self.seq.lock().await;
        if let Some(r) = seq.reader.as_mut() {
            let pos = r.position();
            if offset >= pos && offset - pos <= MAX_SKIP {
                skip(r, offset - pos).await?;
                let out = fill(r, want).await?;
                seq.last_end = offset + out.len() as u64;
                return Ok(out);
            }
            seq.reader = None;
        }
        seq.streak = if offset == seq.last_end { seq.streak + 1 } else { 0 };
        seq.last_end = offset + want as u64;
        if seq.streak >= STREAK {
            let mut r = self.file.sequential(offset);
            let out = fill(&mut r, want).await?;
            seq.reader = Some(r);
            return Ok(out);
        }
        drop(seq);
        let mut buf = vec![0u8; want];
        let n = self.file.read_at(offset, &mut buf).await.map_err(|e| errno_of(&e))?;
        buf.truncate(n);
        Ok(buf)
    }
}

async fn fill(r: &mut SequentialReader, want: usize) -> Result<Vec<u8>, Errno> {
    let mut out = vec![0u8; want];
    let mut got = 0;
    while got < want {
        let n = r.read(&mut out[got..]).await.map_err(|e| errno_of(&e))?;
        if n == 0 {
            break;
        }
        got += n;
    }
    out.truncate(got);
    Ok(out)
}

async fn skip(r: &mut SequentialReader, mut n: u64) -> Result<(), Errno> {
    let mut scratch = vec![0u8; (n.min(1 << 20)) as usize];
    while n > 0 {
        let k = (n as usize).min(scratch.len());
        let got = r.read(&mut scratch[..k]).await.map_err(|e| errno_of(&e))?;
        if got == 0 {
            return Ok(());
        }
        n -= got as u64;
    }
    Ok(())
}
