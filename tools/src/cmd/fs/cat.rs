//! `cvctl fs cat`.

use crate::cmd::CmdResult;
use clap::Args;
use cv_client::Client;
use std::io::Write;

/// Arguments of `cvctl fs cat`.
#[derive(Args, Debug)]
pub struct CatArgs {
    /// File to print.
    path: String,
}

impl CatArgs {
    pub(super) async fn run(self, client: &Client) -> CmdResult {
        let file = client.open(&self.path).await?;
        let mut out = std::io::stdout().lock();
        file.sequential(0).copy_to(&mut out).await?;
        out.flush()?;
        Ok(())
    }
}
