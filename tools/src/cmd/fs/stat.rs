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
        let copies = match &blocks {
            Some(f) if f.ufs().is_some() => "object store (cv caches it)",
            Some(_) => "cv only (one copy on its worker)",
            None if s.kind == FileKind::File => "being written: not readable until its writer closes it",
            None => "",
        };
        if self.json {
            let mut v = json(&s);
            if let Some(f) = &blocks {
                v["blocks"] = f.blocks().len().into();
                v["lost_blocks"] = lost.len().into();
                v["lost_block_ids"] = lost.iter().map(|b| b.block_id).collect::<Vec<_>>().into();
                v["in_object_store"] = f.ufs().is_some().into();
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
