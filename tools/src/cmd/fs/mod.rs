//! `cvctl fs …`: file commands against a running cluster, one file each.

mod cat;
mod get;
mod ls;
mod mkdir;
mod mv;
mod put;
mod rm;
mod stat;

use crate::cmd::CmdResult;
use crate::connect::{ClientArgs, runtime};
use clap::{Args, Subcommand};
use cv_client::{FileKind, FileStatus};

/// File commands.
#[derive(Args, Debug)]
pub struct Fs {
    #[command(flatten)]
    conn: ClientArgs,
    #[command(subcommand)]
    op: FsOp,
}

/// One file operation.
#[derive(Subcommand, Debug)]
pub enum FsOp {
    /// List a directory.
    Ls(ls::LsArgs),
    /// Show one entry's metadata.
    Stat(stat::StatArgs),
    /// Print a file to stdout.
    Cat(cat::CatArgs),
    /// Copy a local file into cv.
    Put(put::PutArgs),
    /// Copy a cv file to a local path.
    Get(get::GetArgs),
    /// Create a directory.
    Mkdir(mkdir::MkdirArgs),
    /// Rename a file or directory.
    Mv(mv::MvArgs),
    /// Delete a file or directory.
    Rm(rm::RmArgs),
}

impl Fs {
    /// Connects and runs the operation.
    pub fn run(self) -> CmdResult {
        runtime()?.block_on(async move {
            let op = self.op;
            self.conn
                .with_client(async move |client| match op {
                    FsOp::Ls(a) => a.run(client).await,
                    FsOp::Stat(a) => a.run(client).await,
                    FsOp::Cat(a) => a.run(client).await,
                    FsOp::Put(a) => a.run(client).await,
                    FsOp::Get(a) => a.run(client).await,
                    FsOp::Mkdir(a) => a.run(client).await,
                    FsOp::Mv(a) => a.run(client).await,
                    FsOp::Rm(a) => a.run(client).await,
                })
                .await?
        })
    }
}

/// One line of `ls -l`-like output.
fn line(s: &FileStatus) -> String {
    let kind = if s.kind == FileKind::Dir { 'd' } else { '-' };
    format!("{kind}{:o} {:>14} v{:<6} {}", s.mode & 0o7777, s.length, s.version, escaped(&s.path))
}

/// A path for a line of output: control characters (which cv refuses in new names, but an
/// object key under a mount or a name from an older version may hold) and backslashes
/// escaped, so one entry is always one line. JSON output escapes them its own way.
fn escaped(path: &str) -> std::borrow::Cow<'_, str> {
    if !path.chars().any(|c| c.is_control() || c == '\\') {
        return path.into();
    }
    path.chars()
        .flat_map(|c| if c.is_control() || c == '\\' { c.escape_default().collect::<Vec<_>>() } else { vec![c] })
        .collect::<String>()
        .into()
}

/// JSON of one status.
fn json(s: &FileStatus) -> serde_json::Value {
    serde_json::json!({
        "path": s.path,
        "kind": if s.kind == FileKind::Dir { "dir" } else { "file" },
        "id": s.id,
        "length": s.length,
        "version": s.version,
        "mtime_ms": s.mtime_ms,
        "mode": s.mode,
        "complete": s.complete,
        "block_size": s.block_size,
    })
}

#[cfg(test)]
mod tests {
    use super::escaped;

    #[test]
    fn one_entry_is_one_line() {
        assert_eq!(escaped("/a/b c.parquet"), "/a/b c.parquet");
        assert_eq!(escaped("/t/a\nb"), "/t/a\\nb");
        assert_eq!(escaped("/t/x\\n\u{1}"), "/t/x\\\\n\\u{1}");
        assert!(!escaped("/t/\r\n\t").contains(['\r', '\n', '\t']));
    }
}
