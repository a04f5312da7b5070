//! `cvctl mount …`: put an object-store location under a cv path, list,
//! refresh and remove mounts.
//!
//! Credentials go to the master and nowhere else: `add` echoes neither the
//! options it was given nor an options file's content (a malformed file is
//! reported by line and column only), and `ls` shows what the master sends
//! back, where secret values are already `***` (and are masked here again).

use super::CmdResult;
use crate::connect::{ClientArgs, runtime};
use clap::{Args, Subcommand, ValueEnum};
use cv_client::{Client, MountInfo, MountMode};
use std::path::{Path, PathBuf};

/// Mount commands.
#[derive(Args, Debug)]
pub struct MountCmd {
    #[command(flatten)]
    conn: ClientArgs,
    #[command(subcommand)]
    op: MountOp,
}

/// One mount operation.
#[derive(Subcommand, Debug)]
pub enum MountOp {
    /// Mount an object-store location (s3://bucket/prefix, fs:///dir) at a cv path.
    Add(AddArgs),
    /// Remove a mount.
    Rm(RmArgs),
    /// List the mounts (secret option values show as ***).
    Ls(LsArgs),
    /// Forget cached listings and object versions under a mount path: the
    /// next use reads them from the store again (picks up changed objects).
    Sync(SyncArgs),
}

/// How a mount relates to its store.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModeArg {
    /// Object storage is the truth; cv caches reads and writes through.
    Cache,
    /// cv is the truth; files are exported to object storage in the background.
    Fs,
}

impl From<ModeArg> for MountMode {
    fn from(m: ModeArg) -> MountMode {
        match m {
            ModeArg::Cache => MountMode::Cache,
            ModeArg::Fs => MountMode::Fs,
        }
    }
}

fn mode_name(m: MountMode) -> &'static str {
    match m {
        MountMode::Cache => "cache",
        MountMode::Fs => "fs",
    }
}

/// Arguments of `cvctl mount add`.
#[derive(Args, Debug)]
#[command(after_help = "\
Options are OpenDAL service settings (endpoint, region, access_key_id, secret_access_key, ...) \
and cv's own: cv.ttl (how long listings and object versions are trusted, default 60s); \
cv.op_timeout and cv.io_timeout (deadline of one attempt of a metadata call, and of each data \
read or write, default 4s each); cv.retries (retries of a failed attempt that may pass, default 2); \
cv.min_backoff and cv.max_backoff (waits between retries, default 100ms doubling up to 2s). \
By default a dead store fails a call within about 15s. The master and the workers both obey them.

Secrets on the command line end up in shell history and process listings: put them in a file \
instead and pass --options-file FILE, a TOML file of `key = \"value\"` lines, e.g.

    endpoint = \"https://s3.example.com\"
    access_key_id = \"AKIA...\"
    secret_access_key = \"...\"

-o/--option values override the same keys from the file. The master checks the mount by \
listing the location's root: a wrong URL or wrong credentials fail here.")]
pub struct AddArgs {
    /// Object-store URL: s3://bucket/prefix, fs:///abs/dir (oss, gcs, azblob when built in).
    ufs_url: String,
    /// Where the location appears in cv's namespace, e.g. /data.
    cv_path: String,
    /// cache: the store is the truth, cv caches reads; fs: cv is the truth and exports to the store.
    #[arg(long, value_enum)]
    mode: ModeArg,
    /// A service option as key=value; repeatable. Prefer --options-file for secrets.
    #[arg(short = 'o', long = "option", value_name = "KEY=VALUE")]
    options: Vec<String>,
    /// TOML file of `key = "value"` options (keeps secrets off the command line).
    #[arg(long, value_name = "FILE")]
    options_file: Option<PathBuf>,
}

/// Arguments of `cvctl mount rm`.
#[derive(Args, Debug)]
pub struct RmArgs {
    /// Mount point to remove.
    cv_path: String,
    /// Remove an fs-mode mount even though some of its files are not yet in the store: they
    /// stay in cv only and are never exported. Without it, such a removal is refused.
    #[arg(long)]
    force: bool,
}

/// Arguments of `cvctl mount ls`.
#[derive(Args, Debug)]
pub struct LsArgs {
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// Arguments of `cvctl mount sync`.
#[derive(Args, Debug)]
pub struct SyncArgs {
    /// Mount point, or a path under one.
    cv_path: String,
}

impl MountCmd {
    /// Connects and runs the operation.
    pub fn run(self) -> CmdResult {
        // Read the options file before connecting: a bad file fails fast.
        let options = match &self.op {
            MountOp::Add(a) => Some(a.all_options()?),
            _ => None,
        };
        runtime()?.block_on(async move {
            let op = self.op;
            self.conn
                .with_client(async move |client| match op {
                    MountOp::Add(a) => a.run(client, options.unwrap_or_default()).await,
                    MountOp::Rm(a) => client.unmount(&a.cv_path, a.force).await.map_err(Into::into),
                    MountOp::Ls(a) => a.run(client).await,
                    MountOp::Sync(a) => client.sync_mount(&a.cv_path).await.map_err(Into::into),
                })
                .await?
        })
    }
}

impl AddArgs {
    /// The file's options, then the command line's (which win on the same key).
    fn all_options(&self) -> Result<Vec<(String, String)>, Box<dyn std::error::Error + Send + Sync>> {
        let mut all = match &self.options_file {
            Some(p) => read_options_file(p)?,
            None => Vec::new(),
        };
        // Parsed here, not by clap: clap's error would quote the value, which may be a secret.
        for (i, o) in self.options.iter().enumerate() {
            let (k, v) = parse_option(o).map_err(|e| format!("option {} of the command line: {e}", i + 1))?;
            all.retain(|(known, _)| *known != k);
            all.push((k, v));
        }
        Ok(all)
    }

    async fn run(self, client: &Client, options: Vec<(String, String)>) -> CmdResult {
        let mode = MountMode::from(self.mode);
        // Name what was tried, with the endpoint (not a secret) when one was given.
        let endpoint =
            options.iter().find(|(k, _)| k == "endpoint").map(|(_, v)| format!(" (endpoint {})", redact_url(v)));
        client.mount(&self.ufs_url, &self.cv_path, mode, options).await.map_err(|e| {
            format!("mount {} at {}: {e}{}", redact_url(&self.ufs_url), self.cv_path, endpoint.unwrap_or_default())
        })?;
        println!("mounted {} at {} ({} mode)", redact_url(&self.ufs_url), self.cv_path, mode_name(mode));
        Ok(())
    }
}

impl LsArgs {
    async fn run(self, client: &Client) -> CmdResult {
        let mounts = client.list_mounts().await?;
        if self.json {
            let all: Vec<_> = mounts.iter().map(mount_json).collect();
            println!("{}", serde_json::Value::Array(all));
            return Ok(());
        }
        for m in &mounts {
            let opts: Vec<String> = shown_options(m).into_iter().map(|(k, v)| format!("{k}={v}")).collect();
            println!("{:<24} {:<5} {} {}", m.cv_path, mode_name(m.mode), redact_url(&m.ufs_url), opts.join(","));
        }
        Ok(())
    }
}

/// The options as printed: the master sends secrets as `***` already; any
/// key that names a secret is masked again in case an older master did not.
fn shown_options(m: &MountInfo) -> Vec<(&str, &str)> {
    m.options
        .iter()
        .map(|kv| {
            let v = if cv_ufs::is_secret(&kv.key) { "***" } else { kv.value.as_str() };
            (kv.key.as_str(), v)
        })
        .collect()
}

fn mount_json(m: &MountInfo) -> serde_json::Value {
    let options: serde_json::Map<String, serde_json::Value> =
        shown_options(m).into_iter().map(|(k, v)| (k.to_owned(), v.into())).collect();
    serde_json::json!({
        "cv_path": m.cv_path,
        "ufs_url": redact_url(&m.ufs_url),
        "mode": mode_name(m.mode),
        "options": options,
    })
}

/// A URL with any `user:password@` part masked.
fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else { return url.to_owned() };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => format!("{scheme}://***@{}", &rest[at + 1..]),
        None => url.to_owned(),
    }
}

/// `key=value` (the value may contain `=`).
fn parse_option(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_owned(), v.to_owned())),
        // The value is not repeated: it may be a secret.
        _ => Err("expected KEY=VALUE".to_owned()),
    }
}

/// Reads `key = "value"` lines. Errors name the line, never the content.
fn read_options_file(path: &Path) -> Result<Vec<(String, String)>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("options file {}: {e}", path.display()))?;
    parse_options_toml(&text).map_err(|e| format!("options file {}: {e}", path.display()))
}

fn parse_options_toml(text: &str) -> Result<Vec<(String, String)>, String> {
    let table: toml::Table = toml::from_str(text).map_err(|e| {
        let line = e.span().map(|s| text[..s.start.min(text.len())].lines().count().max(1));
        // The message alone: toml's full Display quotes the offending line.
        let what = e.message().lines().next().unwrap_or("not TOML").to_owned();
        match line {
            Some(l) => format!("line {l}: {what}"),
            None => what,
        }
    })?;
    let mut out = Vec::new();
    flatten("", table, &mut out)?;
    Ok(out)
}

/// Dotted keys (`cv.ttl = "5s"`) are nested tables to TOML: join them back.
fn flatten(prefix: &str, table: toml::Table, out: &mut Vec<(String, String)>) -> Result<(), String> {
    for (k, v) in table {
        let key = if prefix.is_empty() { k } else { format!("{prefix}.{k}") };
        match v {
            toml::Value::String(s) => out.push((key, s)),
            toml::Value::Integer(i) => out.push((key, i.to_string())),
            toml::Value::Boolean(b) => out.push((key, b.to_string())),
            toml::Value::Table(t) => flatten(&key, t, out)?,
            _ => return Err(format!("option {key}: expected a string, number or boolean")),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_parse_from_the_command_line_and_a_file() {
        assert_eq!(parse_option("endpoint=http://h:1/?a=b").unwrap(), ("endpoint".into(), "http://h:1/?a=b".into()));
        assert!(parse_option("novalue").is_err());
        assert!(parse_option("=v").is_err());
        let opts =
            parse_options_toml("region = \"eu\"\n# c\nsecret_access_key = \"s\"\ncv.ttl = \"5s\"\nn = 3\n").unwrap();
        assert!(opts.contains(&("region".into(), "eu".into())));
        assert!(opts.contains(&("secret_access_key".into(), "s".into())));
        assert!(opts.contains(&("n".into(), "3".into())));
        assert!(opts.contains(&("cv.ttl".into(), "5s".into())));
        assert_eq!(parse_options_toml("[cv]\nttl = \"1s\"").unwrap(), vec![("cv.ttl".to_owned(), "1s".to_owned())]);
        assert!(parse_options_toml("a = [1]").is_err());
    }

    #[test]
    fn a_malformed_file_does_not_echo_its_content() {
        let e = parse_options_toml("region = \"eu\"\nsecret_access_key = hunter2secret\n").unwrap_err();
        assert!(e.starts_with("line 2"), "{e}");
        assert!(!e.contains("hunter2secret"), "{e}");
    }

    #[test]
    fn urls_lose_their_userinfo() {
        assert_eq!(redact_url("s3://bucket/p"), "s3://bucket/p");
        assert_eq!(redact_url("s3://u:pw@bucket/p@x"), "s3://***@bucket/p@x");
        assert_eq!(redact_url("fs:///d"), "fs:///d");
    }
}
