//! Finding the master that leads, by asking several at once.
//!
//! Each master asked is dialed and sent a `Stat` of `/`: the leader answers it, a follower
//! refuses it with `NotLeader`, naming the leader when it knows one. Asking them all at
//! once means a master that is down (its dial waits for an answer that never comes) delays
//! nothing while another leads; a follower's word is a hint, and the master it names is asked
//! too. See master/HA.md, "Errors, clients, workers".

use crate::error::{Error, ErrorKind};
use crate::pool::{Dialing, Pool};
use cv_net::dial::Persist;
use cv_wire::ErrorCode;
use cv_wire::msg::Stat;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinSet;
use tokio::time::{Instant, timeout_at};

/// What asking one master found.
enum Answer {
    /// It leads.
    Leads,
    /// It does not; it names this master as the leader.
    Names(SocketAddr),
    /// It does not lead and knows no leader (an election is under way).
    Follows,
    /// It could not be asked.
    Failed(Error),
}

/// What asking a set of masters found.
#[derive(Debug, Default)]
pub(crate) struct Found {
    /// A master that answered as the leader.
    pub(crate) leader: Option<SocketAddr>,
    /// A leader a follower named, which has not answered (yet).
    pub(crate) named: Option<SocketAddr>,
    /// A master that answered, though not as the leader.
    pub(crate) answered: Option<SocketAddr>,
    /// Why the last master that could not be asked could not.
    pub(crate) failed: Option<Error>,
}

impl Found {
    /// Where calls should go: the leader, else the one named, else one that answers.
    pub(crate) fn best(&self) -> Option<SocketAddr> {
        self.leader.or(self.named).or(self.answered)
    }
}

/// Asks every master of `among` at once, through `pool`, until `until`; returns at the first
/// that answers as the leader. Once one has answered otherwise, the rest get `grace` more (a
/// named leader dialed just now answers within it; a dead master never would). A named master
/// outside `among` and not `skip`ped is asked as well.
pub(crate) async fn find_leader(
    pool: &Arc<Pool>,
    among: &[SocketAddr],
    skip: &(dyn Fn(SocketAddr) -> bool + Sync),
    until: Instant,
    grace: Duration,
) -> Found {
    let mut asking = JoinSet::new();
    let mut asked: Vec<SocketAddr> = Vec::new();
    let ask = |asking: &mut JoinSet<(SocketAddr, Answer)>, asked: &mut Vec<SocketAddr>, addr: SocketAddr| {
        if !asked.contains(&addr) {
            asked.push(addr);
            let pool = pool.clone();
            asking.spawn(async move { (addr, ask_leader(&pool, addr, until).await) });
        }
    };
    for &a in among {
        ask(&mut asking, &mut asked, a);
    }
    let mut found = Found::default();
    let mut end = until;
    loop {
        let next = match timeout_at(end, asking.join_next()).await {
            Ok(Some(Ok(n))) => n,
            Ok(Some(Err(e))) => {
                found.failed = Some(Error::new(ErrorKind::Other, format!("asking a master: {e}")));
                continue;
            }
            Ok(None) | Err(_) => return found,
        };
        match next {
            (addr, Answer::Leads) => {
                found.leader = Some(addr);
                return found;
            }
            (addr, Answer::Names(leader)) => {
                found.answered.get_or_insert(addr);
                if !skip(leader) {
                    found.named = Some(leader);
                    ask(&mut asking, &mut asked, leader);
                }
            }
            (addr, Answer::Follows) => {
                found.answered.get_or_insert(addr);
            }
            (_, Answer::Failed(e)) => found.failed = Some(e),
        }
        if found.answered.is_some() {
            end = end.min(Instant::now() + grace);
        }
    }
}

/// Dials `addr` (until `until`: a crowd may slow its answer; the caller stops asking once
/// another answered) and asks whether it leads.
async fn ask_leader(pool: &Pool, addr: SocketAddr, until: Instant) -> Answer {
    let dialing = Dialing { peer: &"master", persist: Persist::UntilDeadline, deadline: until };
    let asked = async {
        let conn = pool.master(addr, dialing).await?;
        conn.call(&Stat { path: "/".into() }, &[]).await.map_err(Error::from)
    };
    match timeout_at(until, asked).await {
        Ok(Ok(_)) => {
            pool.mark_up(addr);
            Answer::Leads
        }
        Ok(Err(e)) if e.code() == Some(ErrorCode::NotLeader) => {
            match e.redirect().and_then(|r| r.parse::<SocketAddr>().ok()).filter(|l| *l != addr) {
                Some(leader) => Answer::Names(leader),
                None => Answer::Follows,
            }
        }
        // Busy or not ready: not the one to send calls to now.
        Ok(Err(e)) if e.code().is_some_and(|c| c.retryable()) => Answer::Follows,
        // Any other answer (a refusal of `/` itself) still comes from the master that serves.
        Ok(Err(e)) if e.code().is_some() => Answer::Leads,
        Ok(Err(e)) => Answer::Failed(e),
        Err(_) => Answer::Failed(Error::new(ErrorKind::Timeout, format!("master at {addr}: no answer in time"))),
    }
}
