//! `cvctl fs mkdir`.

use crate::cmd::CmdResult;
use clap::Args;
use cv_client::Client;

/// Arguments of `cvctl fs mkdir`.
#[derive(Args, Debug)]
pub struct MkdirArgs {
    /// Directory to create.
    path: String,
    /// Create parents too; succeed if it exists.
    #[arg(long, short)]
    parents: bool,
}

impl MkdirArgs {
    pub(super) async fn run(self, client: &Client) -> CmdResult {
        client.mkdir(&self.path, self.parents).await?;
        Ok(())
    }
}
