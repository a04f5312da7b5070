//! The masters a client knows (`client.master` first, then `client.masters`) and the one it
//! talks to now. Under Raft only the leader answers: a `NotLeader` answer that names the
//! leader moves the client there within the same call; one that names none, or a master that
//! cannot be reached, moves it to the next master of the list.

use std::net::SocketAddr;
use std::sync::Mutex;

#[derive(Debug)]
pub(crate) struct Masters {
    list: Vec<SocketAddr>,
    current: Mutex<SocketAddr>,
}

impl Masters {
    pub(crate) fn new(first: SocketAddr, others: &[SocketAddr]) -> Self {
        let mut list = vec![first];
        for a in others {
            if !list.contains(a) {
                list.push(*a);
            }
        }
        Masters { list, current: Mutex::new(first) }
    }

    pub(crate) fn current(&self) -> SocketAddr {
        *self.current.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn len(&self) -> usize {
        self.list.len()
    }

    pub(crate) fn list(&self) -> &[SocketAddr] {
        &self.list
    }

    /// Calls go to `addr` now (a master that answered first).
    pub(crate) fn set(&self, addr: SocketAddr) {
        *self.current.lock().unwrap_or_else(|p| p.into_inner()) = addr;
    }

    /// `failed` did not serve the call: go to `leader` if it named one (it need not be in
    /// the list: a master added later), else to the master after `failed`. Another task that
    /// moved first wins.
    pub(crate) fn moved(&self, failed: SocketAddr, leader: Option<SocketAddr>) {
        let mut cur = self.current.lock().unwrap_or_else(|p| p.into_inner());
        if *cur != failed {
            return;
        }
        *cur = leader.filter(|l| *l != failed).unwrap_or_else(|| {
            let at = self.list.iter().position(|a| *a == failed).map_or(0, |i| i + 1);
            self.list[at % self.list.len()]
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn follows_the_named_leader_else_the_next_master() {
        let a: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let b: SocketAddr = "127.0.0.1:2".parse().unwrap();
        let c: SocketAddr = "127.0.0.1:3".parse().unwrap();
        let m = Masters::new(a, &[b, c, a]);
        assert_eq!(m.len(), 3);
        m.moved(a, None);
        assert_eq!(m.current(), b);
        m.moved(a, None); // a stale report: b is current, nothing moves
        assert_eq!(m.current(), b);
        m.moved(b, Some(a));
        assert_eq!(m.current(), a);
        m.moved(a, Some(a)); // names itself: treated as no leader named
        assert_eq!(m.current(), b);
        m.moved(b, None);
        m.moved(c, None);
        assert_eq!(m.current(), a);
    }
}
