//! The masters a worker knows (`worker.master` first, then `worker.masters`) and the one its
//! control thread and fetch pool talk to now. Under Raft only the leader takes registrations,
//! heartbeats and mount lookups: a `NotLeader` answer that names the leader moves the worker
//! there, one that names none (or a master that cannot be reached) moves it to the next.

use std::sync::Mutex;

use cv_net::NetError;
use cv_wire::ErrorCode;

#[derive(Debug)]
pub(crate) struct MasterList {
    list: Vec<String>,
    current: Mutex<String>,
}

impl MasterList {
    pub(crate) fn new(first: String, others: &[String]) -> Self {
        let mut list = vec![first.clone()];
        for m in others {
            if !list.contains(m) {
                list.push(m.clone());
            }
        }
        MasterList { list, current: Mutex::new(first) }
    }

    /// `host:port` of the master to talk to now.
    pub(crate) fn current(&self) -> String {
        self.current.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub(crate) fn len(&self) -> usize {
        self.list.len()
    }

    /// `failed` did not serve: go where its error `e` points (the leader it named), or to the
    /// next master. Returns whether a leader was named (worth trying again at once).
    pub(crate) fn moved(&self, failed: &str, e: &NetError) -> bool {
        let named = (e.code() == Some(ErrorCode::NotLeader)).then(|| e.redirect()).flatten().filter(|l| *l != failed);
        let mut cur = self.current.lock().unwrap_or_else(|p| p.into_inner());
        if *cur != failed {
            return true;
        }
        *cur = match named {
            Some(l) => l.to_string(),
            None => {
                let at = self.list.iter().position(|m| m == failed).map_or(0, |i| i + 1);
                self.list[at % self.list.len()].clone()
            }
        };
        named.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cv_net::NetErrorKind;

    #[test]
    fn follows_the_named_leader_else_the_next_master() {
        let m = MasterList::new("a:1".into(), &["b:1".into(), "c:1".into()]);
        let down = NetError::new(NetErrorKind::Connect, "down");
        assert!(!m.moved("a:1", &down));
        assert_eq!(m.current(), "b:1");
        let not_leader = NetError::remote(ErrorCode::NotLeader, "no", Some("c:1".into()));
        assert!(m.moved("b:1", &not_leader));
        assert_eq!(m.current(), "c:1");
        assert!(!m.moved("c:1", &down));
        assert_eq!(m.current(), "a:1");
    }
}
