//! This host's clock against the masters': write leases, the object-store TTL of cache-mode
//! mounts and heartbeat ages are judged on the master's clock, and a node far off it
//! misjudges them. Each master this config talks to is asked its time (`MasterTime`, kind
//! 102) and compared with the middle of the round trip here.

use super::{Check, Finding, Problem};
use crate::config::CvConfig;
use cv_net::rpc::{Conn, client_endpoint};
use cv_net::tls::Identity;
use cv_wire::ErrorCode;
use cv_wire::msg::{MasterTime, MasterTimeOk, Role};
use std::time::{Duration, SystemTime};

/// Above this difference: a warning (timeouts of a second or more start to shift).
pub const WARN_SKEW: Duration = Duration::from_millis(500);
/// Above this: a failure (leases of a few seconds would expire early or late).
pub const FAIL_SKEW: Duration = Duration::from_secs(3);

/// The findings for every master the config names.
pub(super) async fn check(cfg: &CvConfig) -> Vec<Finding> {
    let targets = masters(cfg);
    if targets.is_empty() {
        let note = "the only master: its clock is the reference others are checked against";
        return vec![Finding {
            problem: Some(Problem::NotConfigured),
            ..Finding::ok(Check::Clock, "this master", note)
        }];
    }
    let endpoint = match Identity::load(&cfg.common.tls).map(|id| client_endpoint(&id, &cfg.common.transport)) {
        Ok(Ok(ep)) => ep,
        Ok(Err(e)) | Err(e) => {
            let d = format!("cannot ask the masters (identity or socket): {e}");
            return vec![Finding::warn(Check::Clock, targets.join(", "), Problem::Unreachable, d)];
        }
    };
    let within = cfg.common.transport.idle_timeout.get();
    // All at once: masters that are down each cost a handshake timeout, which should not add up.
    let asks: Vec<_> = targets.into_iter().map(|t| tokio::spawn(ask(endpoint.clone(), t, within))).collect();
    let mut out = Vec::new();
    for a in asks {
        match a.await {
            Ok(f) => out.push(f),
            Err(e) => out.push(Finding::warn(Check::Clock, "masters", Problem::Unreachable, e.to_string())),
        }
    }
    endpoint.close(0u32.into(), b"doctor");
    let _ = tokio::time::timeout(within, endpoint.wait_idle()).await;
    out
}

/// The masters to compare with: a worker's, a master's Raft peers, else the client's.
fn masters(cfg: &CvConfig) -> Vec<String> {
    let mut list: Vec<String> = Vec::new();
    if let Some(w) = &cfg.worker {
        list.extend(w.master.iter().chain(&w.masters).cloned());
    }
    if let Some(m) = &cfg.master {
        list.extend(m.peers.iter().filter(|p| p.id != m.node_id).map(|p| p.addr.to_string()));
    }
    if cfg.worker.is_none() && cfg.master.is_none() {
        let c = &cfg.common.client;
        list.extend(std::iter::once(&c.master).chain(&c.masters).map(|a| a.to_string()));
    }
    let mut seen = std::collections::HashSet::new();
    list.retain(|a| seen.insert(a.clone()));
    list
}

async fn ask(endpoint: quinn::Endpoint, target: String, within: Duration) -> Finding {
    let subject = format!("master {target}");
    let unreachable = |d: String| Finding::warn(Check::Clock, subject.clone(), Problem::Unreachable, d);
    let addr = match tokio::net::lookup_host(&target).await.map(|mut a| a.next()) {
        Ok(Some(a)) => a,
        Ok(None) | Err(_) => return unreachable("does not resolve: clock skew not checked".into()),
    };
    let connect = Conn::connect(&endpoint, addr, Role::Client, "cvctl doctor", cv_wire::Limits::DEFAULT);
    let conn = match tokio::time::timeout(within, connect).await {
        Ok(Ok(c)) => c,
        Ok(Err(e)) => return unreachable(format!("no connection ({e}): clock skew not checked")),
        Err(_) => return unreachable(format!("no handshake within {within:?} (is it up?): clock skew not checked")),
    };
    let sent = SystemTime::now();
    let reply = tokio::time::timeout(within, conn.call(&MasterTime {}, &[])).await;
    let received = SystemTime::now();
    conn.quinn().close(0u32.into(), b"doctor");
    let master_ms = match reply {
        Ok(Ok(frame)) => match frame.decode_body::<MasterTimeOk>() {
            Ok(ok) => ok.unix_ms,
            Err(e) => return unreachable(format!("unreadable time reply: {e}")),
        },
        // A master older than the kind answers Malformed (it cannot parse the frame); one that
        // parses it but does not serve it, Unsupported.
        Ok(Err(e)) if matches!(e.code(), Some(ErrorCode::Malformed | ErrorCode::Unsupported)) => {
            let d = "the master does not report its time (older than this cvctl): clock skew not checked";
            return Finding::warn(Check::Clock, subject, Problem::NoTime, d);
        }
        Ok(Err(e)) => return unreachable(format!("time request failed: {e}")),
        Err(_) => return unreachable(format!("no answer within {within:?}")),
    };
    judge(subject, master_ms, sent, received)
}

/// Compares the master's time with the middle of the round trip it was read in.
fn judge(subject: String, master_ms: u64, sent: SystemTime, received: SystemTime) -> Finding {
    let ms = |t: SystemTime| t.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default().as_millis() as i64;
    let rtt = (ms(received) - ms(sent)).max(0);
    let local = ms(sent) + rtt / 2;
    let skew = master_ms as i64 - local;
    let how = match skew {
        0 => "the same time as this host".to_string(),
        s if s > 0 => format!("{s} ms ahead of this host"),
        s => format!("{} ms behind this host", -s),
    };
    let detail = format!("{how} (± {} ms, half the round trip)", rtt / 2 + 1);
    let off = Duration::from_millis(skew.unsigned_abs());
    if off > FAIL_SKEW {
        let d = format!("{detail}: over {FAIL_SKEW:?}; leases and TTLs would misfire: sync the clocks (chrony, NTP)");
        Finding::fail(Check::Clock, subject, Problem::ClockSkew, d)
    } else if off > WARN_SKEW {
        Finding::warn(Check::Clock, subject, Problem::ClockSkew, format!("{detail}: over {WARN_SKEW:?}: check NTP"))
    } else {
        Finding::ok(Check::Clock, subject, detail)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skew_is_judged_against_the_middle_of_the_round_trip() {
        let at = |ms: u64| SystemTime::UNIX_EPOCH + Duration::from_millis(ms);
        let s = || "m".to_string();
        assert_eq!(judge(s(), 1_050, at(1_000), at(1_100)).status, super::super::Status::Ok);
        let w = judge(s(), 2_000, at(1_000), at(1_100));
        assert_eq!((w.status, w.problem), (super::super::Status::Warn, Some(Problem::ClockSkew)));
        assert!(w.detail.contains("950 ms ahead"), "{}", w.detail);
        let f = judge(s(), 1_000, at(10_000), at(10_000));
        assert_eq!((f.status, f.problem), (super::super::Status::Fail, Some(Problem::ClockSkew)));
        assert!(f.detail.contains("9000 ms behind"), "{}", f.detail);
    }
}
