//! `cvctl free`: drop the cached blocks of object copies, keep their metadata.

use super::CmdResult;
use crate::connect::{ClientArgs, runtime};
use clap::Args;

/// Arguments of `cvctl free`.
#[derive(Args, Debug)]
#[command(after_help = "\
Only copies of objects are freed: files whose only copy is in cv (written through cv outside a \
mount, or under an fs-mode mount and not yet exported) are skipped and counted. Metadata and \
tails stay in the master; the workers drop the blocks shortly after (on their next heartbeat), \
and later reads fetch them from the object store again.")]
pub struct FreeArgs {
    #[command(flatten)]
    conn: ClientArgs,
    /// File or directory (freed recursively) in cv.
    path: String,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

impl FreeArgs {
    /// Runs it.
    pub fn run(self) -> CmdResult {
        runtime()?.block_on(async move {
            let ok = self.conn.with_client(async |client| client.free(&self.path).await).await??;
            if self.json {
                println!("{}", serde_json::json!({ "files": ok.files, "blocks": ok.blocks, "skipped": ok.skipped }));
            } else {
                println!(
                    "freed {} blocks of {} files; skipped {} files (cv holds the only copy)",
                    ok.blocks, ok.files, ok.skipped
                );
            }
            Ok(())
        })
    }
}
