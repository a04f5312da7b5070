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
        let mut reader = file.sequential(0);
        let mut out = std::io::stdout().lock();
        let mut buf = vec![0u8; 1 << 20];
        loop {
            let n = reader.read(&mut buf).await?;
            if n == 0 {
                break;
            }
            out.write_all(&buf[..n])?;
        }
        out.flush()?;
        Ok(())
    }
}
