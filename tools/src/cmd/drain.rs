//! `cvctl worker drain <id>`: tells the master to drain a worker (no new blocks; its cv-only
//! blocks copied elsewhere, then dropped from it) and, with `--wait`, follows the report until
//! nothing is left to move. `--undo` takes the worker back into service.

use std::time::{Duration, Instant};

use super::CmdResult;
use crate::connect::{ClientArgs, admin_call, runtime};
use clap::Args;
use cv_wire::msg::{Done, DrainWorker};

/// Arguments of `cvctl worker drain`.
#[derive(Args, Debug)]
pub struct DrainArgs {
    #[command(flatten)]
    conn: ClientArgs,
    /// The worker's id (as `cvctl report` lists it).
    worker_id: u64,
    /// Take the worker back into service instead.
    #[arg(long)]
    undo: bool,
    /// Wait until the worker holds no block that still needs a copy elsewhere.
    #[arg(long)]
    wait: bool,
    /// Give up waiting after this long.
    #[arg(long, default_value = "30m")]
    timeout: cv_net::config::Dur,
}

impl DrainArgs {
    /// Runs it.
    pub fn run(self) -> CmdResult {
        runtime()?.block_on(async move {
            // Draining is an operator's call: the hello says so (on the leading master).
            let req = DrainWorker { worker_id: self.worker_id, drain: !self.undo };
            admin_call(&self.conn, &req, Duration::from_secs(30)).await?.access::<Done>()?;
            let verb = if self.undo { "back in service" } else { "draining" };
            println!("worker {}: {verb}", self.worker_id);
            if self.undo || !self.wait {
                return Ok(());
            }
            let deadline = Instant::now() + self.timeout.get();
            self.conn
                .with_client(async |client| {
                    loop {
                        let r = client.report().await?;
                        let Some(w) = r.workers.iter().find(|w| w.worker_id == self.worker_id) else {
                            return Err(format!("worker {} is not in the report", self.worker_id).into());
                        };
                        if w.bytes_to_move == 0 && w.replicas_owed == 0 {
                            println!("worker {}: drained; it holds no block that needs it", self.worker_id);
                            return Ok(());
                        }
                        if Instant::now() >= deadline {
                            let left = (w.bytes_to_move, w.replicas_owed);
                            return Err(format!(
                                "worker {}: {} bytes still to move ({} copies owed) after {}",
                                self.worker_id, left.0, left.1, self.timeout
                            )
                            .into());
                        }
                        println!("  {} bytes to move, {} copies owed", w.bytes_to_move, w.replicas_owed);
                        tokio::time::sleep(Duration::from_secs(1)).await;
                    }
                })
                .await?
        })
    }
}
