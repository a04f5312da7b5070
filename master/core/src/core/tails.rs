//! The tail cache across a restart: what the master saves to its `tails` file, and what of a
//! saved file it takes back (`tail_file.rs` holds the bytes).

use super::{MasterCore, lock};
use crate::tail_cache::CachedTail;
use crate::tail_file::TailRecord;

impl MasterCore {
    /// The cached tails as records of the `tails` file (their bytes shared with the cache), in
    /// the order [`Self::restore_tails`] takes them back.
    pub fn saved_tails(&self) -> Vec<TailRecord> {
        lock(&self.tails)
            .dump()
            .into_iter()
            .map(|(file_id, version, main, t)| TailRecord::Tail {
                file_id,
                version,
                offset: t.offset,
                main,
                bytes: t.bytes,
            })
            .collect()
    }

    /// Takes back the tails of `records` that are still the tails of complete files at the
    /// version saved (a file replaced since has a new version, and its old tail is dropped);
    /// other records are ignored. Returns how many tails were taken.
    pub fn restore_tails(&self, records: Vec<TailRecord>) -> usize {
        let inner = self.settled();
        let mut tails = lock(&self.tails);
        let mut taken = 0;
        for r in records {
            let TailRecord::Tail { file_id, version, offset, main, bytes } = r else { continue };
            let fits = inner
                .state
                .complete_file(file_id)
                .is_some_and(|(v, len)| v == version && offset.checked_add(bytes.len() as u64) == Some(len));
            if fits {
                tails.restore(file_id, version, main, CachedTail { offset, bytes });
                taken += 1;
            }
        }
        taken
    }
}
