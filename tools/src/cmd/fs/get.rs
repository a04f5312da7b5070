//! `cvctl fs get`.

use crate::cmd::CmdResult;
use clap::Args;
use cv_client::Client;
use std::path::PathBuf;

/// Arguments of `cvctl fs get`.
#[derive(Args, Debug)]
pub struct GetArgs {
    /// File in cv.
    path: String,
    /// Local destination (written to a temporary name, then renamed).
    local: PathBuf,
}

impl GetArgs {
    pub(super) async fn run(self, client: &Client) -> CmdResult {
        let file = client.open(&self.path).await?;
        let tmp = self.local.with_extension("cv-partial");
        let mut out = std::io::BufWriter::new(std::fs::File::create(&tmp)?);
        file.sequential(0).copy_to(&mut out).await?;
        out.into_inner().map_err(|e| e.into_error())?.sync_all()?;
        std::fs::rename(&tmp, &self.local)?;
        println!("{} -> {} ({} bytes)", self.path, self.local.display(), file.len());
        Ok(())
    }
}
