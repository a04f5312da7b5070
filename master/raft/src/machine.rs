//! The Raft state machine is the master core (master/HA.md). Followers apply committed
//! records with `apply_committed`; the leader has applied its own ahead of commit, so it only
//! marks them committed. A node that holds records applied ahead which were never committed
//! goes back to the committed state (rebuilt from the snapshot plus the committed log) before
//! it applies anything else. Snapshots are rebuilt the same way, so they hold only what is
//! committed, whatever the core holds in memory.

use std::io::Cursor;
use std::sync::{Arc, Mutex};

use cv_master_core::journal::{FileStorage, Storage};
use cv_master_core::state::State;
use cv_master_core::{Error, ErrorKind, MasterCore};
use openraft::storage::{RaftStateMachine, Snapshot};
use openraft::{BasicNode, EntryPayload, RaftSnapshotBuilder, StorageError, StorageIOError, StoredMembership};

use crate::log_store::FileLog;
use crate::shared::{Shared, lock};
use crate::snapshot::{self, Meta};
use crate::{Batch, Entry, LogId, TypeConfig};

/// The snapshot in force: its meta and the whole file (the record seq is inside).
#[derive(Debug, Clone)]
pub(crate) struct Stored {
    pub meta: Meta,
    pub file: Arc<Vec<u8>>,
}

#[derive(Debug)]
pub(crate) struct Applied {
    pub last: Option<LogId>,
    pub membership: StoredMembership<u64, BasicNode>,
}

/// What the state machine, its snapshot builders and the leadership task share.
#[derive(Debug)]
pub(crate) struct Node {
    pub shared: Arc<Shared>,
    pub core: Arc<MasterCore>,
    pub log: FileLog,
    /// The last entry of the log when this process opened it: entries up to it were built
    /// (and applied ahead) by an earlier process, whose memory is gone.
    pub started_with: Option<LogId>,
    pub current: Mutex<Option<Stored>>,
    pub applied: Mutex<Applied>,
    pub snapshot_file: Mutex<FileStorage>,
}

fn sm_err<E: std::error::Error + 'static>(id: Option<LogId>, e: &E) -> StorageError<u64> {
    match id {
        Some(id) => StorageIOError::apply(id, e).into(),
        None => StorageIOError::read_state_machine(e).into(),
    }
}

impl Node {
    /// The committed state after log index `upto` (inclusive): the snapshot in force plus the
    /// committed entries after it.
    fn committed_state(&self, upto: Option<u64>) -> Result<(State, u64), Error> {
        let current = lock(&self.current).clone();
        let (mut state, mut seq, from) = match &current {
            Some(s) => {
                let (meta, seq, data) =
                    snapshot::decode(&s.file).map_err(|e| Error::new(ErrorKind::CorruptData, e.to_string()))?;
                (State::from_data(data), seq, meta.last_log_id.map_or(0, |l| l.index + 1))
            }
            None => (State::new(), 0, 0),
        };
        let Some(upto) = upto else { return Ok((state, seq)) };
        for e in self.log.entries(from..=upto) {
            let EntryPayload::Normal(b) = &e.payload else { continue };
            if !b.valid_under(&e.log_id.leader_id) {
                continue;
            }
            for (s, m) in b.records()? {
                if s != seq + 1 {
                    return Err(Error::new(
                        ErrorKind::CorruptData,
                        format!("raft entry {} holds seq {s} after seq {seq}", e.log_id.index),
                    ));
                }
                state.apply(&m)?;
                seq = s;
            }
        }
        Ok((state, seq))
    }

    /// Drops records the core applied ahead that never committed: back to the committed state
    /// after log index `upto`. Called under `transition`.
    fn settle(&self, upto: Option<u64>) -> Result<(), Error> {
        let committed = self.shared.glue().committed_seq;
        if self.core.last_seq() != committed {
            let (state, seq) = self.committed_state(upto)?;
            tracing::info!(dropped = self.core.last_seq() - seq, "master goes back to the committed state");
            self.core.reset(state, seq);
        }
        self.shared.glue().speculating = None;
        Ok(())
    }

    /// Starts taking mutations if the metrics say this node leads the term whose Blank entry
    /// it has applied. Called under `transition`.
    pub fn maybe_lead(&self) -> Result<(), Error> {
        let lid = {
            let g = self.shared.glue();
            match (g.leader_of, g.blank_applied) {
                (Some(t), Some(lid))
                    if lid.term == t
                        && g.building != Some(lid)
                        && g.cut_off != Some(t)
                        && self.shared.fitness.may_lead() =>
                {
                    lid
                }
                _ => return Ok(()),
            }
        };
        // A leadership resumed at start (openraft makes a node whose committed vote is its own
        // the leader of that term again, with no new Blank entry): the Blank applied, and the
        // entries after it, were built by the previous process, which had applied them in
        // memory only. Taking the lead now would skip them as built here (`apply_batch`) and
        // build on a core that lacks them; so the lead waits until every entry the log held at
        // start is applied (`apply_entry` asks again then). A new election's term is above every
        // term in the log at start, so it never waits here.
        if let Some(start) = self.started_with
            && lid.term <= start.leader_id.term
            && lock(&self.applied).last.is_none_or(|l| l.index < start.index)
        {
            tracing::info!(
                node = self.shared.me,
                term = lid.term,
                upto = start.index,
                "resumed leadership waits for the log to be applied"
            );
            return Ok(());
        }
        // Leading again in the same term (after a lost majority came back): its records are
        // all in its own log, which a leader never truncates, so nothing is to be dropped.
        if self.shared.glue().speculating != Some(lid) {
            let upto = lock(&self.applied).last.map(|l| l.index);
            self.settle(upto)?;
        }
        {
            let mut g = self.shared.glue();
            g.building = Some(lid);
            g.speculating = Some(lid);
        }
        self.core.set_leading(true);
        tracing::info!(node = self.shared.me, term = lid.term, seq = self.core.last_seq(), "master leads");
        Ok(())
    }

    /// One committed batch; the response is its last seq, 0 if skipped as stale.
    fn apply_batch(&self, id: &LogId, b: &Batch) -> Result<u64, Error> {
        if !b.valid_under(&id.leader_id) {
            return Ok(0);
        }
        let records = b.records()?;
        let Some(last) = records.last().map(|r| r.0) else { return Ok(0) };
        let _t = lock(&self.shared.transition);
        let built_here = id.leader_id.node_id == self.shared.me && self.shared.glue().speculating == Some(id.leader_id);
        if !built_here {
            self.settle(id.index.checked_sub(1))?;
            for (seq, m) in &records {
                self.core.apply_committed(*seq, m)?;
            }
        }
        self.shared.committed(last);
        Ok(last)
    }

    fn apply_entry(&self, e: &Entry) -> Result<u64, Error> {
        lock(&self.applied).last = Some(e.log_id);
        let r = self.apply_payload(e)?;
        // The last entry of the log at start is applied: a resumed leadership may lead now.
        if self.started_with.is_some_and(|s| s.index == e.log_id.index) && !self.core.is_leading() {
            let _t = lock(&self.shared.transition);
            self.maybe_lead()?;
        }
        Ok(r)
    }

    fn apply_payload(&self, e: &Entry) -> Result<u64, Error> {
        match &e.payload {
            EntryPayload::Normal(b) => self.apply_batch(&e.log_id, b),
            EntryPayload::Blank => {
                if e.log_id.leader_id.node_id == self.shared.me {
                    let _t = lock(&self.shared.transition);
                    self.shared.glue().blank_applied = Some(e.log_id.leader_id);
                    self.maybe_lead()?;
                }
                Ok(0)
            }
            EntryPayload::Membership(m) => {
                lock(&self.applied).membership = StoredMembership::new(Some(e.log_id), m.clone());
                Ok(0)
            }
        }
    }

    /// Makes `stored` the snapshot in force (file replaced atomically), unless one in force
    /// already covers as much.
    fn persist(&self, stored: Stored) -> std::io::Result<()> {
        let mut cur = lock(&self.current);
        if cur.as_ref().is_some_and(|c| c.meta.last_log_id >= stored.meta.last_log_id) {
            return Ok(());
        }
        lock(&self.snapshot_file).replace(&stored.file)?;
        *cur = Some(stored);
        Ok(())
    }
}

/// openraft's handle on the state machine.
#[derive(Debug, Clone)]
pub(crate) struct Machine(pub Arc<Node>);

/// Builds a snapshot of what is committed up to `upto`.
#[derive(Debug)]
pub(crate) struct Builder {
    node: Arc<Node>,
    upto: Option<LogId>,
    membership: StoredMembership<u64, BasicNode>,
}

impl RaftSnapshotBuilder<TypeConfig> for Builder {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError<u64>> {
        let node = self.node.clone();
        let (upto, membership) = (self.upto, self.membership.clone());
        // Rebuilding and writing the file is CPU and fsync work: off the async threads.
        tokio::task::spawn_blocking(move || {
            let (state, seq) = node.committed_state(upto.map(|l| l.index))?;
            let meta = Meta {
                snapshot_id: snapshot::snapshot_id(upto.as_ref()),
                last_log_id: upto,
                last_membership: membership,
            };
            let file =
                snapshot::encode(&meta, seq, state.data()).map_err(|e| Error::new(ErrorKind::CorruptData, e.0))?;
            let stored = Stored { meta: meta.clone(), file: Arc::new(file) };
            // Held while there is no space, as log writes are: the old snapshot and the log
            // stay whole meanwhile (the file is replaced atomically).
            loop {
                let r = node.persist(stored.clone());
                if !node.log.space().note("raft-snapshot", &r) {
                    r.map_err(|e| Error::new(ErrorKind::Io, format!("writing the raft snapshot: {e}")))?;
                    break;
                }
                std::thread::sleep(crate::log_store::NO_SPACE_RETRY);
            }
            tracing::info!(seq, index = ?upto.map(|l| l.index), bytes = stored.file.len(), "raft snapshot built");
            Ok::<_, Error>(Snapshot { meta, snapshot: Box::new(Cursor::new(stored.file.to_vec())) })
        })
        .await
        .map_err(|e| sm_err(None, &e))?
        .map_err(|e| StorageError::from(StorageIOError::write_snapshot(None, &e)))
    }
}

impl RaftStateMachine<TypeConfig> for Machine {
    type SnapshotBuilder = Builder;

    async fn applied_state(&mut self) -> Result<(Option<LogId>, StoredMembership<u64, BasicNode>), StorageError<u64>> {
        let a = lock(&self.0.applied);
        Ok((a.last, a.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<u64>, StorageError<u64>>
    where
        I: IntoIterator<Item = Entry> + Send,
        I::IntoIter: Send,
    {
        let mut out = Vec::new();
        for e in entries {
            let r = self.0.apply_entry(&e).map_err(|err| {
                tracing::error!(index = e.log_id.index, error = %err, "a committed raft entry does not apply");
                sm_err(Some(e.log_id), &err)
            })?;
            out.push(r);
        }
        Ok(out)
    }

    async fn get_snapshot_builder(&mut self) -> Builder {
        let a = lock(&self.0.applied);
        Builder { node: self.0.clone(), upto: a.last, membership: a.membership.clone() }
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<Cursor<Vec<u8>>>, StorageError<u64>> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(&mut self, meta: &Meta, snapshot: Box<Cursor<Vec<u8>>>) -> Result<(), StorageError<u64>> {
        let file = snapshot.into_inner();
        let read_err = |e: &Error| StorageError::from(StorageIOError::read_snapshot(Some(meta.signature()), e));
        let (got, seq, data) =
            snapshot::decode(&file).map_err(|e| read_err(&Error::new(ErrorKind::CorruptData, e.0)))?;
        if got.last_log_id != meta.last_log_id {
            let e = Error::new(
                ErrorKind::CorruptData,
                format!("snapshot bytes cover {:?}, its meta says {:?}", got.last_log_id, meta.last_log_id),
            );
            return Err(read_err(&e));
        }
        let node = &self.0;
        {
            let _t = lock(&node.shared.transition);
            node.core.reset(State::from_data(data), seq);
            node.shared.glue().speculating = None;
            node.shared.committed(seq);
            let mut a = lock(&node.applied);
            a.last = meta.last_log_id;
            a.membership = meta.last_membership.clone();
        }
        // A received snapshot replaces ours even if ours covers as much: the leader's is what
        // the log after it continues.
        *lock(&node.current) = None;
        node.persist(Stored { meta: meta.clone(), file: Arc::new(file) })
            .map_err(|e| StorageError::from(StorageIOError::write_snapshot(Some(meta.signature()), &e)))?;
        tracing::info!(seq, index = ?meta.last_log_id.map(|l| l.index), "raft snapshot installed");
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot<TypeConfig>>, StorageError<u64>> {
        Ok(lock(&self.0.current)
            .clone()
            .map(|s| Snapshot { meta: s.meta, snapshot: Box::new(Cursor::new(s.file.to_vec())) }))
    }
}
