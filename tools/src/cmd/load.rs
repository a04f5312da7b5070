//! `cvctl load`: bring a file or a directory tree into the cache — metadata
//! and tail into the master (by opening each file), every block onto its
//! shard (`File::load`, no bytes to this process).

use super::CmdResult;
use crate::connect::{ClientArgs, runtime};
use clap::Args;
use cv_client::{Client, FileKind, FileStatus};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::time::{Duration, Instant};
use tokio::task::JoinSet;

/// Arguments of `cvctl load`.
#[derive(Args, Debug)]
#[command(after_help = "\
Resumable: after an interruption (Ctrl-C, a lost connection), run the same command again. \
Blocks already cached cost no fetch from the object store (their shard answers at once), so \
a second run only fetches what the first did not.

A file that fails does not stop the others; the command lists the failures at the end and \
exits non-zero if there were any. The progress bar is drawn on stderr when it is a terminal.")]
pub struct LoadArgs {
    #[command(flatten)]
    conn: ClientArgs,
    /// File or directory (loaded recursively) in cv, usually under a mount.
    path: String,
    /// Block fetches in flight at once: up to N files at a time, and a
    /// single file's blocks N at a time when there are fewer files than N.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..=1024))]
    parallel: u16,
    /// Print the summary as JSON.
    #[arg(long)]
    json: bool,
}

/// What happened to one path.
struct Failure {
    path: String,
    error: String,
}

impl LoadArgs {
    /// Runs it.
    pub fn run(self) -> CmdResult {
        runtime()?.block_on(async move { self.conn.with_client(async |client| self.load(client).await).await? })
    }

    async fn load(&self, client: &Client) -> CmdResult {
        let started = Instant::now();
        let (files, mut failures) = walk(client, &self.path).await?;
        let total_bytes: u64 = files.iter().map(|f| f.length).sum();
        let bar = progress_bar(total_bytes, files.len() as u64);

        let parallel = usize::from(self.parallel);
        let files_at_once = parallel.min(files.len()).max(1);
        let blocks_per_file = (parallel / files_at_once).max(1);
        let mut set = JoinSet::new();
        let (mut loaded_files, mut loaded_bytes) = (0u64, 0u64);
        let mut done = |r: Result<(String, Result<u64, String>), tokio::task::JoinError>| match r {
            Ok((_, Ok(bytes))) => {
                loaded_files += 1;
                loaded_bytes += bytes;
                bar.inc(bytes);
                bar.set_message(format!("{loaded_files}/{} files", files.len()));
            }
            Ok((path, Err(error))) => {
                bar.suspend(|| eprintln!("cvctl load: {path}: {error}"));
                failures.push(Failure { path, error });
            }
            Err(e) => failures.push(Failure { path: "?".into(), error: format!("load task: {e}") }),
        };
        for f in &files {
            while set.len() >= files_at_once {
                if let Some(r) = set.join_next().await {
                    done(r);
                }
            }
            let client = client.clone();
            let path = f.path.clone();
            set.spawn(async move {
                let r = async {
                    // The open brings the object's metadata and tail into the master.
                    let file = client.open(&path).await?;
                    file.load(blocks_per_file).await
                }
                .await;
                (path, r.map_err(|e| e.to_string()))
            });
        }
        while let Some(r) = set.join_next().await {
            done(r);
        }
        bar.finish_and_clear();

        let elapsed = started.elapsed();
        if self.json {
            let failed: Vec<_> =
                failures.iter().map(|f| serde_json::json!({ "path": f.path, "error": f.error })).collect();
            println!(
                "{}",
                serde_json::json!({
                    "files": loaded_files, "bytes": loaded_bytes, "elapsed_ms": elapsed.as_millis() as u64,
                    "failed": failures.len(), "failures": failed,
                })
            );
        } else {
            println!(
                "loaded {loaded_files} files, {loaded_bytes} bytes in {:.2}s ({}/s), {} failed",
                elapsed.as_secs_f64(),
                human_bytes(rate(loaded_bytes, elapsed)),
                failures.len()
            );
            for f in &failures {
                println!("failed {}: {}", f.path, f.error);
            }
        }
        if failures.is_empty() {
            Ok(())
        } else {
            Err(format!("{} of {} files failed to load", failures.len(), loaded_files as usize + failures.len()).into())
        }
    }
}

/// Every file at or under `path`. The root must exist; a subdirectory that
/// cannot be listed is a failure and the walk goes on.
async fn walk(client: &Client, path: &str) -> Result<(Vec<FileStatus>, Vec<Failure>), cv_client::Error> {
    let root = client.stat(path).await?;
    let (mut files, mut failures) = (Vec::new(), Vec::new());
    let mut dirs = Vec::new();
    match root.kind {
        FileKind::File => files.push(root),
        FileKind::Dir => dirs.push(root.path),
    }
    while let Some(dir) = dirs.pop() {
        match client.list(&dir).await {
            Ok(entries) => {
                for e in entries {
                    match e.kind {
                        FileKind::File => files.push(e),
                        FileKind::Dir => dirs.push(e.path),
                    }
                }
            }
            Err(e) => failures.push(Failure { path: dir, error: e.to_string() }),
        }
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok((files, failures))
}

/// A bytes-and-files bar on stderr when it is a terminal; hidden otherwise.
fn progress_bar(bytes: u64, files: u64) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(bytes), ProgressDrawTarget::stderr());
    let style = ProgressStyle::with_template(
        "{spinner} [{elapsed_precise}] {wide_bar} {bytes}/{total_bytes} ({bytes_per_sec}, eta {eta}) {msg}",
    )
    .unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style);
    bar.set_message(format!("0/{files} files"));
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}

fn rate(bytes: u64, elapsed: Duration) -> u64 {
    let secs = elapsed.as_secs_f64();
    if secs <= 0.0 { 0 } else { (bytes as f64 / secs) as u64 }
}

fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 { format!("{n} B") } else { format!("{v:.1} {}", UNITS[u]) }
}

#[cfg(test)]
mod tests {
    use super::human_bytes;

    #[test]
    fn bytes_read_as_humans_do() {
        assert_eq!(human_bytes(12), "12 B");
        assert_eq!(human_bytes(5 << 20), "5.0 MiB");
    }
}
