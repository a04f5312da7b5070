//! `cvctl fs rm`.

use crate::cmd::CmdResult;
use clap::Args;
use cv_client::Client;

/// Arguments of `cvctl fs rm`.
#[derive(Args, Debug)]
pub struct RmArgs {
    /// Path to delete.
    path: String,
    /// Delete a directory and everything under it.
    #[arg(long, short)]
    recursive: bool,
}

impl RmArgs {
    pub(super) async fn run(self, client: &Client) -> CmdResult {
        client.delete(&self.path, self.recursive).await?;
        Ok(())
    }
}
