//! Answers a retried mutation from what its first attempt answered.
//!
//! A client retries a call whose reply it never got (a lost packet, a connection reset),
//! and the first attempt may have been applied: a second `Create` would then answer
//! `AlreadyExists`, a second `Delete` `NotFound`. Every attempt of one call carries the same
//! request id (`cv_net::rpc::Conn::call_as`); ids start at a random number per client and
//! per connection, so two calls do not share one. The master keeps the reply of each recent
//! mutation under (certificate serial, node, request id) and answers a repeat with it (the
//! serial is what the peer's certificate proves, so no peer can meet another's replies by
//! naming its node); a repeat that
//! arrives while the first attempt still runs waits for its reply.
//!
//! Kept in memory only: a master restart between applying a mutation and answering it
//! forgets the reply, and the retry is applied again, except where the core keeps the outcome
//! durably: a `create` is answered with its file (its request id is journaled with it), a
//! `complete` of an already complete file with the same content is done, `add block` is
//! idempotent by index.
//! A retryable failure is not kept: the retry runs the request again.

use cv_net::rpc::{Peer, Reply};
use cv_wire::Kind;
use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::OnceCell;

/// How long a reply is kept: past every client's deadline over all its attempts.
const KEEP_FOR: Duration = Duration::from_secs(120);
/// Replies kept at most; the oldest go first. A retry comes within the client's deadline
/// over all attempts (15 s by default); at 22k mutations/s, the most `cvctl bench meta` saw
/// on a 2-core VM, this holds 18 s of them (a few hundred bytes each).
const MAX_KEPT: usize = 400_000;

/// Requests that change the namespace or the mount table: applying one twice is not the
/// same as applying it once.
pub(super) fn is_mutation(kind: Kind) -> bool {
    matches!(
        kind,
        Kind::Mkdir
            | Kind::Create
            | Kind::AddBlock
            | Kind::Complete
            | Kind::CompleteIf
            | Kind::Abandon
            | Kind::Compose
            | Kind::Rename
            | Kind::Delete
            | Kind::Mount
            | Kind::Unmount
            | Kind::Free
    )
}

type Key = (String, String, u64);
type Slot = Arc<OnceCell<Reply>>;

/// The recent mutations' replies.
#[derive(Debug, Default)]
pub(super) struct Replays {
    inner: Mutex<Kept>,
}

#[derive(Debug, Default)]
struct Kept {
    /// Each reply's slot and when it was made (a forgotten key can be made again).
    slots: HashMap<Key, (Instant, Slot)>,
    /// Insertion order, for expiry.
    order: VecDeque<(Instant, Key)>,
}

impl Replays {
    /// Runs `apply` for the first attempt of a call and returns its reply; a repeat gets
    /// that reply (waiting for it if the first attempt still runs). `apply` says whether its
    /// reply may be kept (not a retryable failure).
    pub(super) async fn once<F>(&self, peer: &Peer, request_id: u64, now: Instant, apply: F) -> Reply
    where
        F: Future<Output = (Reply, bool)>,
    {
        let key: Key = (peer.cert.serial.clone(), peer.node.clone(), request_id);
        let slot = self.slot(&key, now);
        let mut keep = true;
        let reply = slot
            .get_or_init(|| async {
                let (reply, keepable) = apply.await;
                keep = keepable;
                reply
            })
            .await
            .clone();
        if !keep {
            self.forget(&key, &slot);
        }
        reply
    }

    fn slot(&self, key: &Key, now: Instant) -> Slot {
        let mut kept = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        while let Some((at, _)) = kept.order.front() {
            if now.saturating_duration_since(*at) < KEEP_FOR && kept.order.len() < MAX_KEPT {
                break;
            }
            let (at, old) = kept.order.pop_front().expect("front exists");
            // Only the slot this entry made: one made again after a forget stays.
            if kept.slots.get(&old).is_some_and(|(made, _)| *made == at) {
                kept.slots.remove(&old);
            }
        }
        if let Some((_, slot)) = kept.slots.get(key) {
            return slot.clone();
        }
        let slot = Slot::default();
        kept.slots.insert(key.clone(), (now, slot.clone()));
        kept.order.push_back((now, key.clone()));
        slot
    }

    /// Drops `slot` so that the next attempt applies the request again.
    fn forget(&self, key: &Key, slot: &Slot) {
        let mut kept = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if kept.slots.get(key).is_some_and(|(_, s)| Arc::ptr_eq(s, slot)) {
            kept.slots.remove(key);
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.inner.lock().unwrap().slots.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cv_wire::msg::Pong;
    use std::sync::atomic::{AtomicU32, Ordering};

    fn peer(node: &str) -> Peer {
        let cert = cv_net::identity::PeerCert {
            role: cv_net::identity::CertRole::Client,
            name: "t".into(),
            serial: "1".into(),
            not_before: 0,
            not_after: 0,
        };
        Peer {
            addr: "127.0.0.1:1".parse().unwrap(),
            role: cv_wire::msg::Role::Client,
            node: node.into(),
            conn: 0,
            cert,
        }
    }

    fn reply(nonce: u64) -> Reply {
        Reply::ok(0, &Pong { nonce }, Vec::new())
    }

    fn nonce(r: &Reply) -> Vec<u8> {
        r.head().to_vec()
    }

    #[tokio::test]
    async fn a_repeat_gets_the_first_reply_and_runs_nothing() {
        let replays = Replays::default();
        let runs = AtomicU32::new(0);
        let now = Instant::now();
        let apply = |n: u64| {
            let runs = &runs;
            async move {
                runs.fetch_add(1, Ordering::Relaxed);
                (reply(n), true)
            }
        };
        let first = replays.once(&peer("a"), 7, now, apply(1)).await;
        let again = replays.once(&peer("a"), 7, now, apply(2)).await;
        assert_eq!(nonce(&first), nonce(&again));
        assert_eq!(runs.load(Ordering::Relaxed), 1);
        // Another id, or the same id from another node, is another call.
        let other = replays.once(&peer("a"), 8, now, apply(3)).await;
        let elsewhere = replays.once(&peer("b"), 7, now, apply(4)).await;
        assert_ne!(nonce(&other), nonce(&first));
        assert_ne!(nonce(&elsewhere), nonce(&first));
        assert_eq!(runs.load(Ordering::Relaxed), 3);
    }

    #[tokio::test]
    async fn a_repeat_during_the_first_attempt_waits_for_its_reply() {
        let replays = Replays::default();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let now = Instant::now();
        let a = peer("a");
        let first = replays.once(&a, 1, now, async {
            rx.await.unwrap();
            (reply(10), true)
        });
        let repeat = replays.once(&a, 1, now, async { (reply(20), true) });
        let release = async {
            tokio::task::yield_now().await;
            tx.send(()).unwrap();
        };
        let (one, two, ()) = tokio::join!(first, repeat, release);
        assert_eq!(nonce(&one), nonce(&two));
        assert_eq!(nonce(&one), nonce(&reply(10)));
    }

    #[tokio::test]
    async fn a_retryable_failure_is_run_again_and_old_replies_expire() {
        let replays = Replays::default();
        let now = Instant::now();
        let failed = replays.once(&peer("a"), 1, now, async { (reply(1), false) }).await;
        let retried = replays.once(&peer("a"), 1, now, async { (reply(2), true) }).await;
        assert_ne!(nonce(&failed), nonce(&retried));
        assert_eq!(replays.len(), 1);
        let later = now + KEEP_FOR + Duration::from_secs(1);
        let fresh = replays.once(&peer("a"), 1, later, async { (reply(3), true) }).await;
        assert_eq!(nonce(&fresh), nonce(&reply(3)), "expired: applied again");
        assert_eq!(replays.len(), 1);
    }

    #[tokio::test]
    async fn a_reply_kept_after_a_retried_failure_outlives_the_failure_s_expiry() {
        let replays = Replays::default();
        let t0 = Instant::now();
        replays.once(&peer("a"), 1, t0, async { (reply(1), false) }).await;
        let t1 = t0 + Duration::from_secs(100);
        let kept = replays.once(&peer("a"), 1, t1, async { (reply(2), true) }).await;
        // The failed attempt's entry expires here; the reply kept at t1 must not go with it.
        let t2 = t0 + KEEP_FOR + Duration::from_secs(1);
        let repeat = replays.once(&peer("a"), 1, t2, async { (reply(3), true) }).await;
        assert_eq!(nonce(&repeat), nonce(&kept));
    }
}
