//! `cvctl fs stat`.

use super::{json, line};
use crate::cmd::CmdResult;
use clap::Args;
use cv_client::Client;
use cv_wire::msg::{BlockLoc, FileKind};

/// Arguments of `cvctl fs stat`.
#[derive(Args, Debug)]
pub struct StatArgs {
    /// Path to describe.
    path: String,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

impl StatArgs {
    pub(super) async fn run(self, client: &Client) -> CmdResult {
        let s = client.stat(&self.path).await?;
        // A complete file's block map says where its bytes are and whether any are lost.
        let blocks = match (s.kind, s.complete) {
            (FileKind::File, true) => Some(client.open(&self.path).await?),
            _ => None,
        };
        let lost: Vec<&BlockLoc> = blocks.iter().flat_map(|f| f.blocks()).filter(|b| b.lost).collect();
        // Live copies of each cv-only block: the fewest is what the file can lose.
        let fewest = blocks.iter().flat_map(|f| f.blocks()).filter(|b| !b.lost).map(|b| 1 + b.replicas.len()).min();
        let copies = match (&blocks, fewest) {
            (Some(f), _) if f.ufs().is_some() => "object store (cv caches it)".to_owned(),
            (Some(_), Some(n)) => format!("cv only, {n} live copies of its least-copied block"),
            (Some(_), None) => "cv only".to_owned(),
            (None, _) if s.kind == FileKind::File => {
                "being written: not readable until its writer closes it".to_owned()
            }
            (None, _) => String::new(),
        };
        if self.json {
            let mut v = json(&s);
            if let Some(f) = &blocks {
                v["blocks"] = f.blocks().len().into();
                v["lost_blocks"] = lost.len().into();
                v["lost_block_ids"] = lost.iter().map(|b| b.block_id).collect::<Vec<_>>().into();
                v["in_object_store"] = f.ufs().is_some().into();
                v["min_live_copies"] = fewest.unwrap_or(0).into();
            }
            println!("{v}");
            return Ok(());
        }
        println!("{}", line(&s));
        if !copies.is_empty() {
            println!("  copies: {copies}");
        }
        if let Some(f) = &blocks {
            println!("  blocks: {}", f.blocks().len());
        }
        if !lost.is_empty() {
            let workers: std::collections::BTreeSet<u64> = lost.iter().map(|b| b.worker_id).collect();
            println!(
                "  LOST: {} blocks whose only copy was on lost worker(s) {workers:?}; reads of them fail with DataLoss",
                lost.len()
            );
        }
        Ok(())
    }
}
