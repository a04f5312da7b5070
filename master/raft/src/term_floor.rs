//! A master that starts without files has lost the vote it last made, and with it the term it
//! had reached. Left alone it would take entries from any leader, even one the group has long
//! replaced: a leader cut off in term 1 that comes back while the group leads in term 2 would
//! find in it the second acknowledgement that its own majority needs, and commit entries of
//! term 1 over what term 2 committed at the same indices (master/HA.md, "A master without
//! files"). So, before it takes any entry or snapshot, such a master asks the other members
//! what they have voted for, and refuses every leader of a lower term than the highest
//! answer, as its own lost vote would have done.
//!
//! Whom to ask: every leader was elected by a majority; without this master, at least
//! `majority - 1` of the others voted in that term or later. Answers from
//! `n - majority + 1` other members are sure to include one of them, whichever majority
//! it was. For 3 masters that is both others, for 5 three of the four.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use openraft::network::RPCOption;
use openraft::raft::VoteRequest;
use openraft::{BasicNode, RaftNetwork, RaftNetworkFactory};

use crate::shared::lock;
use crate::{TypeConfig, Vote};

/// Why a peer's Raft RPC was not handed to this node.
#[derive(Debug, Clone)]
pub enum Refused {
    /// This master started without files and has not yet heard the group's term from enough
    /// of the other members.
    LearningTerm { me: u64, heard: usize, needed: usize },
    /// The Raft node itself failed the RPC (it stopped, or panicked).
    Raft(String),
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refused::LearningTerm { me, heard, needed } => write!(
                f,
                "master {me} started without its raft files and takes no entries until it knows the \
                 group's term (answers from {heard} of the {needed} other masters it needs)"
            ),
            // The QUIC handlers say "raft: " before it.
            Refused::Raft(e) => f.write_str(e),
        }
    }
}

impl std::error::Error for Refused {}

impl Refused {
    pub(crate) fn raft(e: impl std::fmt::Display) -> Self {
        Refused::Raft(e.to_string())
    }
}

/// The term below which leaders are refused, once learned.
#[derive(Debug)]
pub(crate) struct TermFloor {
    me: u64,
    needed: usize,
    heard: Mutex<BTreeMap<u64, Vote>>,
    /// Unset while learning; then the highest vote heard (`None`: no floor at all).
    floor: OnceLock<Option<Vote>>,
}

impl TermFloor {
    /// `learning` for a master that started without files and knows `others` other members.
    pub fn new(me: u64, learning: bool, others: usize) -> Self {
        let needed = needed_answers(others + 1);
        let floor = OnceLock::new();
        // A group this master cannot hear enough of (it names too few others) is not guarded:
        // a group of one, or a node started outside any configured group.
        if !(learning && others >= needed && needed > 0) {
            let _ = floor.set(None);
        }
        Self { me, needed, heard: Mutex::default(), floor }
    }

    pub fn is_learning(&self) -> bool {
        self.floor.get().is_none()
    }

    /// Ends the learning without answers: the master that founds the group.
    pub fn not_needed(&self) {
        let _ = self.floor.set(None);
    }

    /// Whether a leader (or candidate) with `vote` may reach the node: `Err` while learning,
    /// `Ok(Some(floor))` if its term is below the floor (answer with the floor, as a higher
    /// vote, so that it steps down), `Ok(None)` if it may.
    pub fn check(&self, vote: &Vote) -> Result<Option<Vote>, Refused> {
        match self.floor.get() {
            None => {
                let heard = lock(&self.heard).len();
                Err(Refused::LearningTerm { me: self.me, heard, needed: self.needed })
            }
            Some(floor) => Ok(floor.filter(|f| vote.leader_id.term < f.leader_id.term)),
        }
    }

    /// A member's answer; once enough have answered, the floor is the highest vote heard.
    fn heard(&self, from: u64, vote: Vote) -> bool {
        let mut heard = lock(&self.heard);
        heard.insert(from, vote);
        if heard.len() < self.needed {
            return false;
        }
        let floor = heard.values().copied().max_by_key(|v| (v.leader_id.term, v.committed));
        let _ = self.floor.set(floor);
        tracing::info!(node = self.me, floor = ?floor.map(|v| v.to_string()), answers = heard.len(),
            "learned the group's term: leaders of lower terms are refused");
        true
    }
}

/// Answers needed from other members of a group of `n`: enough to meet, without this master,
/// every majority that elected a leader.
fn needed_answers(n: usize) -> usize {
    let majority = n / 2 + 1;
    n + 1 - majority
}

/// Asks `peers` (the group as configured; this master is skipped) for their votes until
/// enough have answered. The question is a vote request of the lowest vote, for no log:
/// every member refuses it (or, pristine itself, grants what it already holds) and answers
/// with its own vote, and none changes its state.
pub(crate) async fn learn<N>(floor: Arc<TermFloor>, mut net: N, peers: Vec<(u64, String)>, ttl: Duration)
where
    N: RaftNetworkFactory<TypeConfig>,
{
    let mut links = Vec::new();
    for (id, addr) in peers.into_iter().filter(|(id, _)| *id != floor.me) {
        links.push((id, net.new_client(id, &BasicNode::new(addr)).await));
    }
    let ask = VoteRequest { vote: Vote::new(0, 0), last_log_id: None };
    while floor.is_learning() {
        for (id, link) in &mut links {
            if lock(&floor.heard).contains_key(id) {
                continue;
            }
            match tokio::time::timeout(ttl, link.vote(ask.clone(), RPCOption::new(ttl))).await {
                Ok(Ok(resp)) => {
                    if floor.heard(*id, resp.vote) {
                        return;
                    }
                }
                Ok(Err(e)) => tracing::debug!(node = floor.me, peer = *id, error = %e, "asking a member for its vote"),
                Err(_) => tracing::debug!(node = floor.me, peer = *id, "asking a member for its vote: no answer"),
            }
            if !floor.is_learning() {
                return;
            }
        }
        tokio::time::sleep(ttl.min(Duration::from_millis(200))).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_needed_meet_every_majority_without_this_master() {
        assert_eq!(needed_answers(1), 1);
        assert_eq!(needed_answers(2), 1);
        assert_eq!(needed_answers(3), 2);
        assert_eq!(needed_answers(4), 2);
        assert_eq!(needed_answers(5), 3);
        for n in 1..12 {
            let majority = n / 2 + 1;
            // Members other than this one that voted for any leader: at least majority - 1.
            let voters_without_me = majority - 1;
            let others = n - 1;
            // Answers from `needed` others always include one of them.
            assert!(needed_answers(n) + voters_without_me > others, "n={n}");
        }
    }

    #[test]
    fn refuses_while_learning_then_lower_terms_only() {
        let f = TermFloor::new(2, true, 2);
        let t1 = Vote::new_committed(1, 1);
        let t2 = Vote::new_committed(2, 3);
        assert!(matches!(f.check(&t1), Err(Refused::LearningTerm { heard: 0, needed: 2, .. })));
        assert!(!f.heard(1, t1));
        assert!(f.check(&t2).is_err(), "one answer of two is not enough");
        assert!(f.heard(3, t2));
        assert_eq!(f.check(&t1).unwrap(), Some(t2), "a leader of term 1 is told of term 2");
        assert_eq!(f.check(&t2).unwrap(), None);
        assert_eq!(f.check(&Vote::new(3, 1)).unwrap(), None);
    }

    #[test]
    fn a_group_of_one_or_a_founder_is_not_held() {
        assert!(!TermFloor::new(1, true, 0).is_learning());
        let f = TermFloor::new(1, true, 2);
        f.not_needed();
        assert_eq!(f.check(&Vote::new_committed(1, 1)).unwrap(), None);
        assert!(!TermFloor::new(1, false, 2).is_learning());
    }
}
