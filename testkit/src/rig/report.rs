//! The part of `cvctl report --json` a rig test looks at: which workers the master counts live.

use super::error::RigError;

/// One worker as the master reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkerState {
    /// The id the master gave it.
    pub worker_id: u64,
    /// The host it advertised (on a rig, its address).
    pub host: String,
    /// Whether the master counts it live (heard from within its heartbeat timeout).
    pub live: bool,
    /// Milliseconds since its last heartbeat.
    pub last_heartbeat_age_ms: u64,
    /// Blocks with a copy there.
    pub blocks: u64,
    /// Bytes of cv-only blocks that need a copy elsewhere before it can go.
    pub bytes_to_move: u64,
    /// Being drained.
    pub draining: bool,
}

/// The workers of one report, and the files short of copies or lost.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// Every worker the master knows.
    pub workers: Vec<WorkerState>,
    /// Files with a cv-only block short of copies.
    pub under_replicated_files: u64,
    /// Files with a block no live worker holds.
    pub lost_files: u64,
}

impl Report {
    /// Parses `cvctl report --json` output.
    pub fn parse(json: &str) -> Result<Report, RigError> {
        let v: serde_json::Value =
            serde_json::from_str(json.trim()).map_err(|e| RigError::Report(format!("{e}: {json}")))?;
        let list = v["workers"].as_array().ok_or_else(|| RigError::Report(format!("no `workers` array: {json}")))?;
        let workers = list
            .iter()
            .map(|w| {
                let field = |k: &str| RigError::Report(format!("worker without `{k}`: {w}"));
                Ok(WorkerState {
                    worker_id: w["worker_id"].as_u64().ok_or_else(|| field("worker_id"))?,
                    host: w["host"].as_str().ok_or_else(|| field("host"))?.to_string(),
                    live: w["live"].as_bool().ok_or_else(|| field("live"))?,
                    last_heartbeat_age_ms: w["last_heartbeat_age_ms"]
                        .as_u64()
                        .ok_or_else(|| field("last_heartbeat_age_ms"))?,
                    blocks: w["blocks"].as_u64().unwrap_or(0),
                    bytes_to_move: w["bytes_to_move"].as_u64().unwrap_or(0),
                    draining: w["draining"].as_bool().unwrap_or(false),
                })
            })
            .collect::<Result<_, RigError>>()?;
        let under_replicated_files = v["under_replicated"]["files"].as_u64().unwrap_or(0);
        let lost_files = v["lost"]["files"].as_u64().unwrap_or(0);
        Ok(Report { workers, under_replicated_files, lost_files })
    }

    /// The worker that advertised `host`.
    pub fn worker(&self, host: &str) -> Option<&WorkerState> {
        self.workers.iter().find(|w| w.host == host)
    }

    /// Whether the worker at `host` is known and live.
    pub fn live(&self, host: &str) -> bool {
        self.worker(host).is_some_and(|w| w.live)
    }

    /// One line per worker, for error messages.
    pub fn summary(&self) -> String {
        let w: Vec<String> = self
            .workers
            .iter()
            .map(|w| format!("{}@{} live={} hb_age={}ms", w.worker_id, w.host, w.live, w.last_heartbeat_age_ms))
            .collect();
        format!("[{}]", w.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_workers() {
        let r = Report::parse(
            r#"{"workers":[{"worker_id":3,"host":"10.210.7.12","shard_ports":[7100],"live":true,
                "last_heartbeat_age_ms":120},{"worker_id":4,"host":"10.210.7.13","live":false,
                "last_heartbeat_age_ms":2500}],"inodes":1}"#,
        )
        .unwrap();
        assert!(r.live("10.210.7.12") && !r.live("10.210.7.13") && !r.live("10.210.7.14"));
        assert_eq!(r.worker("10.210.7.13").unwrap().worker_id, 4);
        assert!(Report::parse("{}").is_err());
        assert!(Report::parse("not json").is_err());
    }
}
