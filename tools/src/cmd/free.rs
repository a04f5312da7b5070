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
    /// Return only once every live worker has had the drop (two heartbeats each).
    #[arg(long)]
    wait: bool,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

impl FreeArgs {
    /// Runs it.
    pub fn run(self) -> CmdResult {
        runtime()?.block_on(async move {
            let wait = self.wait;
            let path = self.path.clone();
            let (ok, waited) = self
                .conn
                .with_client(async move |client| {
                    let ok = client.free(&path).await?;
                    let waited = match wait {
                        true => Some(cv_client::wait_for_heartbeats(client, 2).await?),
                        false => None,
                    };
                    Ok::<_, Box<dyn std::error::Error + Send + Sync>>((ok, waited))
                })
                .await??;
            if self.json {
                println!("{}", serde_json::json!({ "files": ok.files, "blocks": ok.blocks, "skipped": ok.skipped }));
            } else {
                println!(
                    "freed {} blocks of {} files; skipped {} files (cv holds the only copy)",
                    ok.blocks, ok.files, ok.skipped
                );
                if let Some(w) = waited {
                    println!("every live worker had the drop after {} ms", w.as_millis());
                }
            }
            Ok(())
        })
    }
}
