//! Whether the other masters can dial this one (master/HA.md, "A leader clients cannot
//! reach"). Every master probes every other master's address; each remembers whom it reached
//! and who reached it. A master that reaches enough of the others to form a majority, but is
//! reached by too few of them, has lost its inbound path: clients and workers dial the same
//! address, so they most likely cannot reach it either. Such a master must not lead.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::shared::lock;

/// How a master probes another's address: the server sends a `RaftProbe` over QUIC from its
/// client endpoint, as clients do; the tests' in-memory network calls the other node.
pub trait Prober: Send + Sync + 'static {
    /// Whether master `peer` at `addr` answered a probe from this one.
    fn probe(&self, peer: u64, addr: String) -> impl Future<Output = bool> + Send;
}

/// Probes every other voter `(id, address)` that `targets` names, every `every`, each on its
/// own (a peer that does not answer delays no other), at most one probe per peer in flight,
/// each given `every * 2` to answer.
pub(crate) async fn probe_loop<P: Prober>(
    prober: Arc<P>,
    reach: Arc<Reach>,
    targets: impl Fn() -> Vec<(u64, String)> + Send + 'static,
    every: Duration,
) {
    let in_flight: Arc<Mutex<HashSet<u64>>> = Arc::default();
    loop {
        for (peer, addr) in targets() {
            if !lock(&in_flight).insert(peer) {
                continue;
            }
            let (prober, reach, in_flight) = (prober.clone(), reach.clone(), in_flight.clone());
            tokio::spawn(async move {
                if let Ok(true) = tokio::time::timeout(every * 2, prober.probe(peer, addr)).await {
                    reach.reached(peer);
                }
                lock(&in_flight).remove(&peer);
            });
        }
        tokio::time::sleep(every).await;
    }
}

/// What the probes of the last window say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Reached by enough others, or too little known to tell (a lone voter, a master that
    /// reaches no one, a window not yet over since start).
    Reachable,
    /// This master reached `reached` of the other voters, but only `heard` of them reached it;
    /// a majority with this master needs `need` others.
    Unreachable { reached: usize, heard: usize, need: usize },
}

#[derive(Debug, Default)]
struct Seen {
    /// Peers whose probe (or Raft RPC) arrived here, and when last.
    heard: HashMap<u64, Instant>,
    /// Peers whose address answered this master's probe, and when last.
    reached: HashMap<u64, Instant>,
}

/// The probes' record on one master.
#[derive(Debug)]
pub struct Reach {
    me: u64,
    window: Duration,
    started: Instant,
    seen: Mutex<Seen>,
}

impl Reach {
    /// Judges by the last `window` of probes.
    pub fn new(me: u64, window: Duration) -> Self {
        Self { me, window, started: Instant::now(), seen: Mutex::default() }
    }

    pub fn window(&self) -> Duration {
        self.window
    }

    /// Master `peer` reached this one (its probe or a Raft RPC arrived).
    pub fn heard_from(&self, peer: u64) {
        if peer != self.me {
            lock(&self.seen).heard.insert(peer, Instant::now());
        }
    }

    /// This master's probe of `peer` was answered.
    pub fn reached(&self, peer: u64) {
        if peer != self.me {
            lock(&self.seen).reached.insert(peer, Instant::now());
        }
    }

    /// The verdict for a group of `voters` at `now`.
    pub fn verdict(&self, voters: &BTreeSet<u64>, now: Instant) -> Verdict {
        if !voters.contains(&self.me) || now.saturating_duration_since(self.started) < self.window {
            return Verdict::Reachable;
        }
        let need = voters.len() / 2; // others needed for a majority with this master
        if need == 0 {
            return Verdict::Reachable;
        }
        let seen = lock(&self.seen);
        let recent = |m: &HashMap<u64, Instant>| {
            voters
                .iter()
                .filter(|id| **id != self.me)
                .filter(|id| m.get(id).is_some_and(|t| now.saturating_duration_since(*t) < self.window))
                .count()
        };
        let (reached, heard) = (recent(&seen.reached), recent(&seen.heard));
        // Reaching too few others is a partition Raft handles itself (a leader's quorum rounds
        // fail); only "I reach them, they do not reach me" is judged here.
        if reached >= need && heard < need { Verdict::Unreachable { reached, heard, need } } else { Verdict::Reachable }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn voters(ids: &[u64]) -> BTreeSet<u64> {
        ids.iter().copied().collect()
    }

    #[test]
    fn nothing_is_judged_in_the_first_window() {
        let r = Reach::new(1, Duration::from_secs(60));
        r.reached(2);
        r.reached(3);
        assert_eq!(r.verdict(&voters(&[1, 2, 3]), Instant::now()), Verdict::Reachable);
    }

    #[test]
    fn reaching_others_unheard_is_unreachable_and_one_voice_is_enough_of_three() {
        let r = Reach::new(1, Duration::ZERO);
        let g = voters(&[1, 2, 3]);
        assert_eq!(r.verdict(&g, Instant::now()), Verdict::Reachable, "reaching no one is Raft's case");
        let r = Reach::new(1, Duration::from_millis(200));
        let later = Instant::now() + Duration::from_millis(250);
        r.reached(2);
        r.reached(3);
        assert_eq!(r.verdict(&g, later), Verdict::Reachable, "old probes count for nothing");
        let now = Instant::now() + Duration::from_millis(201);
        {
            let mut s = lock(&r.seen);
            s.reached.insert(2, now);
            s.reached.insert(3, now);
        }
        assert_eq!(r.verdict(&g, now), Verdict::Unreachable { reached: 2, heard: 0, need: 1 });
        lock(&r.seen).heard.insert(3, now);
        assert_eq!(r.verdict(&g, now), Verdict::Reachable);
    }

    #[test]
    fn a_lone_voter_and_a_non_voter_are_never_unreachable() {
        let r = Reach::new(1, Duration::ZERO);
        r.reached(2);
        let later = Instant::now();
        assert_eq!(r.verdict(&voters(&[1]), later), Verdict::Reachable);
        assert_eq!(r.verdict(&voters(&[2, 3, 4]), later), Verdict::Reachable);
    }

    #[test]
    fn five_voters_need_two_voices() {
        let r = Reach::new(1, Duration::from_millis(100));
        let now = Instant::now() + Duration::from_millis(150);
        {
            let mut s = lock(&r.seen);
            for p in [2, 3, 4, 5] {
                s.reached.insert(p, now);
            }
            s.heard.insert(4, now);
        }
        let g = voters(&[1, 2, 3, 4, 5]);
        assert_eq!(r.verdict(&g, now), Verdict::Unreachable { reached: 4, heard: 1, need: 2 });
        lock(&r.seen).heard.insert(5, now);
        assert_eq!(r.verdict(&g, now), Verdict::Reachable);
    }
}
