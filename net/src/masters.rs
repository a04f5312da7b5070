//! The masters a client or worker knows (the configured `master` first, then `masters`) and the
//! one it talks to now. Under Raft only the leader answers: a `NotLeader` answer that names the
//! leader moves the caller there; one that names none, or a master that cannot be reached,
//! moves it to the next master of the list. One type for the SDK (`SocketAddr`) and the
//! worker (`host:port` strings, resolved on every connection).

use std::sync::Mutex;

#[derive(Debug)]
pub struct MasterList<A> {
    list: Vec<A>,
    current: Mutex<A>,
}

impl<A: Clone + PartialEq> MasterList<A> {
    /// `first`, then `others` without repeats.
    pub fn new(first: A, others: &[A]) -> Self {
        let mut list = vec![first.clone()];
        for a in others {
            if !list.contains(a) {
                list.push(a.clone());
            }
        }
        MasterList { list, current: Mutex::new(first) }
    }

    /// The master to talk to now.
    pub fn current(&self) -> A {
        self.current.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub fn len(&self) -> usize {
        self.list.len()
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    pub fn list(&self) -> &[A] {
        &self.list
    }

    /// Calls go to `addr` now (a master that answered first).
    pub fn set(&self, addr: A) {
        *self.current.lock().unwrap_or_else(|p| p.into_inner()) = addr;
    }

    /// `failed` did not serve the call: go to `leader` if one was named (it need not be in
    /// the list: a master added later), else to the master after `failed`. Another caller
    /// that moved first wins. Returns whether a leader other than `failed` was named (worth
    /// trying again at once).
    pub fn moved(&self, failed: &A, leader: Option<A>) -> bool {
        let leader = leader.filter(|l| l != failed);
        let named = leader.is_some();
        let mut cur = self.current.lock().unwrap_or_else(|p| p.into_inner());
        if *cur != *failed {
            return true;
        }
        *cur = leader.unwrap_or_else(|| {
            let at = self.list.iter().position(|a| a == failed).map_or(0, |i| i + 1);
            self.list[at % self.list.len()].clone()
        });
        named
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn follows_the_named_leader_else_the_next_master() {
        let m = MasterList::new(1, &[2, 3, 1]);
        assert_eq!(m.len(), 3);
        assert!(!m.moved(&1, None));
        assert_eq!(m.current(), 2);
        assert!(m.moved(&1, None), "a stale report: 2 is current, nothing moves");
        assert_eq!(m.current(), 2);
        assert!(m.moved(&2, Some(1)));
        assert_eq!(m.current(), 1);
        assert!(!m.moved(&1, Some(1)), "names itself: no leader named");
        assert_eq!(m.current(), 2);
        m.moved(&2, None);
        m.moved(&3, None);
        assert_eq!(m.current(), 1);
        m.set(3);
        assert_eq!(m.current(), 3);
        assert!(m.moved(&3, Some(9)), "a leader outside the list is followed");
        assert_eq!(m.current(), 9);
    }
}
