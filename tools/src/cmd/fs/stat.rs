//! `cvctl fs stat`.

use super::{json, line};
use crate::cmd::CmdResult;
use clap::Args;
use cv_client::Client;

/// Arguments of `cvctl fs stat`.
#[derive(Args, Debug)]
pub struct StatArgs {
    /// Path to describe.
    path: String,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

impl StatArgs {
    pub(super) async fn run(self, client: &Client) -> CmdResult {
        let s = client.stat(&self.path).await?;
        if self.json {
            println!("{}", json(&s));
        } else {
            println!("{}", line(&s));
        }
        Ok(())
    }
}
