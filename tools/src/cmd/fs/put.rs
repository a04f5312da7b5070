//! `cvctl fs put`.

use crate::cmd::CmdResult;
use clap::Args;
use cv_client::Client;
use std::io::Read;
use std::path::PathBuf;

/// Arguments of `cvctl fs put`.
#[derive(Args, Debug)]
pub struct PutArgs {
    /// Local file to copy.
    local: PathBuf,
    /// Destination path in cv.
    path: String,
    /// Replace an existing file.
    #[arg(long, short)]
    force: bool,
}

impl PutArgs {
    pub(super) async fn run(self, client: &Client) -> CmdResult {
        let mut src = std::fs::File::open(&self.local)?;
        let mut w = client.create(&self.path, self.force).await?;
        let mut buf = vec![0u8; 4 << 20];
        loop {
            let n = src.read(&mut buf)?;
            if n == 0 {
                break;
            }
            w.write(&buf[..n]).await?;
        }
        let status = w.close().await?;
        println!("{} bytes -> {}", status.length, status.path);
        Ok(())
    }
}
