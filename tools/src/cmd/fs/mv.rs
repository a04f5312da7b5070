//! `cvctl fs mv`.

use crate::cmd::CmdResult;
use clap::Args;
use cv_client::Client;

/// Arguments of `cvctl fs mv`.
#[derive(Args, Debug)]
pub struct MvArgs {
    /// Existing path.
    src: String,
    /// New path.
    dst: String,
}

impl MvArgs {
    pub(super) async fn run(self, client: &Client) -> CmdResult {
        client.rename(&self.src, &self.dst).await?;
        Ok(())
    }
}
