//! An entry's payload: `term u64 | node u64 | journal records laid end to end`. The first two
//! words name the leadership whose state the records were built on. A batch that reaches the
//! log under another leadership (queued by a deposed leader, sent after it led again) was
//! built on state the log may not hold, so every node skips it alike (master/HA.md).

use std::sync::Arc;

use cv_master_core::journal::decode_records;
use cv_master_core::state::Mutation;
use openraft::CommittedLeaderId;

use crate::Batch;

const HEAD: usize = 16;

impl Batch {
    /// Records built while leading under `built_under`, framed by `journal::encode_record`.
    pub fn build<'a>(built_under: CommittedLeaderId<u64>, records: impl IntoIterator<Item = &'a [u8]>) -> Self {
        let mut out = Vec::new();
        out.extend_from_slice(&built_under.term.to_le_bytes());
        out.extend_from_slice(&built_under.node_id.to_le_bytes());
        for r in records {
            out.extend_from_slice(r);
        }
        Batch(Arc::from(out))
    }

    /// The leadership the records were built under; `None` if the batch is shorter than its head.
    pub fn built_under(&self) -> Option<CommittedLeaderId<u64>> {
        let h = self.0.get(..HEAD)?;
        let word = |at: usize| u64::from_le_bytes(h[at..at + 8].try_into().unwrap_or_default());
        Some(CommittedLeaderId::new(word(0), word(8)))
    }

    /// The records, decoded and checked (any damage refuses the whole batch).
    pub fn records(&self) -> cv_master_core::Result<Vec<(u64, Mutation)>> {
        decode_records(self.0.get(HEAD..).unwrap_or_default())
    }

    /// Whether the batch may apply as logged under `logged_under`: it was built under the same
    /// leadership.
    pub fn valid_under(&self, logged_under: &CommittedLeaderId<u64>) -> bool {
        self.built_under().as_ref() == Some(logged_under)
    }
}
