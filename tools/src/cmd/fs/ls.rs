//! `cvctl fs ls`.

use super::{json, line};
use crate::cmd::CmdResult;
use clap::Args;
use cv_client::Client;

/// Arguments of `cvctl fs ls`.
#[derive(Args, Debug)]
pub struct LsArgs {
    /// Directory to list.
    #[arg(default_value = "/")]
    path: String,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

impl LsArgs {
    pub(super) async fn run(self, client: &Client) -> CmdResult {
        let entries = client.list(&self.path).await?;
        if self.json {
            println!("{}", serde_json::Value::Array(entries.iter().map(json).collect()));
        } else {
            entries.iter().for_each(|e| println!("{}", line(e)));
        }
        Ok(())
    }
}
