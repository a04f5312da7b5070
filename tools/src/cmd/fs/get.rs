//! `cvctl fs get`.

use crate::cmd::CmdResult;
use clap::Args;
use cv_client::Client;
use std::io::Write;
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
        let mut reader = file.sequential(0);
        let mut buf = vec![0u8; 1 << 20];
        loop {
            let n = reader.read(&mut buf).await?;
            if n == 0 {
                break;
            }
            out.write_all(&buf[..n])?;
        }
        out.into_inner().map_err(|e| e.into_error())?.sync_all()?;
        std::fs::rename(&tmp, &self.local)?;
        println!("{} -> {} ({} bytes)", self.path, self.local.display(), file.len());
        Ok(())
    }
}
