//! Dialing a cv server within a call's deadline.
//!
//! A dial has two phases. Until the server's first flight arrives (its hello and certificate,
//! seen as quinn's handshake data) nothing says the peer is there, so an attempt waits at most
//! its answer window for it: a dead address costs that window, not QUIC's own handshake
//! timers (their probes back off 1 s, 2 s, 4 s… and outlast a call). Once the server has
//! answered, it is alive and busy, not gone: the rest of the handshake and the hello are
//! waited for until the deadline, so a crowd of new connections slows them and fails none.
//!
//! An attempt that got no answer (or that failed retryably: refused, timed out) is followed by
//! a new one after a jittered, doubling pause, each with a longer answer window, until the
//! deadline ([`Persist::UntilDeadline`]); a caller with somewhere else to go (a reader with
//! another copy) asks for one attempt ([`Persist::Once`]). The error at the end names the
//! peer, its address and how many attempts were made.

use crate::error::{NetError, NetErrorKind};
use crate::rpc::Conn;
use cv_wire::Limits;
use cv_wire::msg::Role;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::time::{Instant, sleep, timeout_at};

/// Pause before the second attempt; it doubles up to [`MAX_PAUSE`]. Long enough that a
/// crowd retrying at once spreads out (the pause is jittered by up to half of it).
const FIRST_PAUSE: Duration = Duration::from_millis(50);
const MAX_PAUSE: Duration = Duration::from_secs(1);

/// How long a dial goes on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Persist {
    /// One attempt: the caller fails over elsewhere if it gets no answer.
    Once,
    /// Attempts until the deadline.
    UntilDeadline,
}

/// One dial: where, as whom, and for how long.
pub struct Dial<'a> {
    pub endpoint: &'a quinn::Endpoint,
    pub addr: SocketAddr,
    /// What the peer is, as errors name it: `master`, `worker 3 shard 1` (formatted only
    /// when a dial fails).
    pub peer: &'a (dyn std::fmt::Display + Sync),
    /// The role this side announces in its hello.
    pub role: Role,
    /// This side's node name, for the server's logs.
    pub node: &'a str,
    pub limits: Limits,
    /// How long the first attempt waits for the server's first answer; each later attempt
    /// waits one window more (a live server slowed by a crowd gets longer each time).
    pub answer_within: Duration,
    pub deadline: Instant,
    pub persist: Persist,
}

impl std::fmt::Debug for Dial<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dial")
            .field("addr", &self.addr)
            .field("peer", &format_args!("{}", self.peer))
            .field("answer_within", &self.answer_within)
            .field("persist", &self.persist)
            .finish_non_exhaustive()
    }
}

impl Dial<'_> {
    /// Dials until connected (TLS handshake and hello done), or until the policy gives up.
    pub async fn connect(&self) -> Result<Conn, NetError> {
        let started = Instant::now();
        let mut pause = FIRST_PAUSE;
        let mut tries = 0u32;
        loop {
            tries += 1;
            let window = self.answer_within.saturating_mul(tries);
            let err = match self.attempt(window).await {
                Ok(conn) => return Ok(conn),
                Err(e) => e,
            };
            let pause_now = jitter(pause);
            let again =
                err.retryable() && self.persist == Persist::UntilDeadline && Instant::now() + pause_now < self.deadline;
            if !again {
                return Err(self.failed(err, tries, started.elapsed()));
            }
            tracing::debug!(peer = %self.peer, addr = %self.addr, tries, error = %err, "dialing again");
            sleep(pause_now).await;
            pause = pause.saturating_mul(2).min(MAX_PAUSE);
        }
    }

    /// One attempt: the server's first answer within `window`, the rest until the deadline.
    async fn attempt(&self, window: Duration) -> Result<Conn, NetError> {
        let mut connecting = self.endpoint.connect(self.addr, crate::tls::SERVER_NAME).map_err(|e| {
            // A local refusal (no such route, endpoint closed): another attempt cannot mend it.
            let mut err = NetError::new(NetErrorKind::Connect, format!("cannot dial: {e}"));
            err.set_retryable(false);
            err
        })?;
        let answer_by = (Instant::now() + window).min(self.deadline);
        match timeout_at(answer_by, connecting.handshake_data()).await {
            Err(_) => return Err(NetError::new(NetErrorKind::Timeout, format!("no answer within {window:?}"))),
            Ok(Err(e)) => return Err(crate::rpc::conn_err("handshake", e)),
            Ok(Ok(_)) => {}
        }
        let rest = Conn::finish(connecting, self.addr, self.role, self.node, self.limits);
        match timeout_at(self.deadline, rest).await {
            Ok(r) => r,
            Err(_) => Err(NetError::new(NetErrorKind::Timeout, "it answered, but the handshake was not done in time")),
        }
    }

    /// The error of the last attempt, naming the peer, its address and the attempts made.
    fn failed(&self, last: NetError, tries: u32, took: Duration) -> NetError {
        let attempts = if tries == 1 { "1 attempt".to_string() } else { format!("{tries} attempts") };
        let msg = format!(
            "connecting to {} at {} ({attempts} in {} ms): {}",
            self.peer,
            self.addr,
            took.as_millis(),
            last.message()
        );
        last.with_message(msg)
    }
}

/// `d` less up to half of it at random, so callers that failed together do not return together.
fn jitter(d: Duration) -> Duration {
    d.mul_f64(1.0 - rand::random::<f64>() / 2.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jitter_stays_within_half_to_whole() {
        for _ in 0..1000 {
            let j = jitter(Duration::from_millis(100));
            assert!(j >= Duration::from_millis(50) && j <= Duration::from_millis(100), "{j:?}");
        }
    }
}
