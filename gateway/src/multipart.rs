//! Multipart uploads, kept in cv so that the gateway holds no state of its
//! own (any gateway can take the next part or complete the upload): an upload
//! is a directory `<uploads>/<id>/` holding a `target` file (bucket and key,
//! one per line) and one cv file per part (`part-00001` …). Completing it
//! makes the target a new cv file that lists the parts' blocks in order (the
//! master's compose: no byte copied), then removes the directory; a target
//! under a mount, whose bytes go to its store, gets the parts copied instead. An upload neither completed nor
//! aborted within `[gateway] multipart_expiry` is removed with its parts (`expire`), as
//! S3's lifecycle rule for incomplete uploads does: its parts are cv-only files, pinned and
//! replicated, which would otherwise hold their space for ever.

use crate::errors::{s3_err, s3_error};
use crate::objects::{Buckets, etag, join};
use crate::write::{copy_into, create, making_parents};
use cv_client::{Client, ErrorKind, FileKind, FileStatus};
use s3s::dto::CompletedPart;
use s3s::{S3Error, S3ErrorCode};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Largest part number S3 allows.
pub(crate) const MAX_PART: i32 = 10_000;

pub(crate) fn new_id() -> String {
    format!("{:032x}", rand::random::<u128>())
}

fn check_id(id: &str) -> Result<(), S3Error> {
    if id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(())
    } else {
        Err(s3_err(S3ErrorCode::NoSuchUpload, "no such upload"))
    }
}

pub(crate) fn dir(b: &Buckets, id: &str) -> String {
    join(&b.uploads, id)
}

pub(crate) fn part_path(b: &Buckets, id: &str, part: i32) -> Result<String, S3Error> {
    check_id(id)?;
    if !(1..=MAX_PART).contains(&part) {
        return Err(s3_err(S3ErrorCode::InvalidArgument, format!("part numbers are 1 to {MAX_PART}")));
    }
    Ok(join(&dir(b, id), &format!("part-{part:05}")))
}

/// Starts an upload of `bucket/key`.
pub(crate) async fn start(client: &Client, b: &Buckets, bucket: &str, key: &str) -> Result<String, S3Error> {
    let id = new_id();
    let what = format!("{bucket}/{key}");
    let target = join(&dir(b, &id), "target");
    let w = create(client, &target, false, &what).await?;
    crate::write::fill(w, futures::stream::iter([Ok(format!("{bucket}\n{key}").into())]), None, None, &what).await?;
    Ok(id)
}

/// Checks that upload `id` exists and is for `bucket/key`.
pub(crate) async fn check(client: &Client, b: &Buckets, id: &str, bucket: &str, key: &str) -> Result<(), S3Error> {
    check_id(id)?;
    let what = format!("{bucket}/{key}");
    let f = match client.open(&join(&dir(b, id), "target")).await {
        Ok(f) => f,
        // A target still being written belongs to an upload whose id was not handed out yet.
        Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::FileIncomplete) => {
            return Err(s3_err(S3ErrorCode::NoSuchUpload, "no such upload"));
        }
        Err(e) => return Err(s3_error(&e, &what)),
    };
    let text = crate::read::read_range(&f, 0..f.len()).await.map_err(|e| s3_error(&e, &what))?;
    if text.as_ref() != format!("{bucket}\n{key}").as_bytes() {
        return Err(s3_err(S3ErrorCode::NoSuchUpload, format!("upload {id} is not for {what}")));
    }
    Ok(())
}

/// Completes upload `id` into `path`: the parts listed, in ascending order,
/// each with the ETag its upload returned.
pub(crate) async fn complete(
    client: &Client,
    b: &Buckets,
    id: &str,
    path: &str,
    parts: &[CompletedPart],
    what: &str,
) -> Result<FileStatus, S3Error> {
    if parts.is_empty() {
        return Err(s3_err(S3ErrorCode::MalformedXML, "a completion lists at least one part"));
    }
    let mut sources = Vec::with_capacity(parts.len());
    let mut last = 0;
    for p in parts {
        let n = p.part_number.unwrap_or(0);
        if n <= last {
            return Err(s3_err(S3ErrorCode::InvalidPartOrder, "parts must be listed in ascending order"));
        }
        last = n;
        let src = part_path(b, id, n)?;
        let st = match client.stat(&src).await {
            Ok(st) => st,
            Err(e) if e.kind() == ErrorKind::NotFound => {
                return Err(s3_err(S3ErrorCode::InvalidPart, format!("part {n} was not uploaded")));
            }
            Err(e) => return Err(s3_error(&e, what)),
        };
        if p.e_tag.as_ref().is_some_and(|t| t.value() != etag(&st).value()) {
            return Err(s3_err(S3ErrorCode::InvalidPart, format!("part {n}: the ETag differs from its upload's")));
        }
        sources.push(src);
    }
    // The target lists the parts' blocks, no byte copied; where the master cannot (a target
    // under a mount, whose bytes go to its store; an older master) the parts are copied.
    match making_parents(client, path, || client.compose(path, &sources)).await {
        Ok(st) => {
            remove(client, b, id).await;
            return Ok(st);
        }
        Err(e) if matches!(e.kind(), ErrorKind::Unsupported) => {
            tracing::debug!(object = what, error = %e, "gateway: parts copied into the target");
        }
        Err(e) => return Err(s3_error(&e, what)),
    }
    let mut w = create(client, path, true, what).await?;
    for src in &sources {
        if let Err(e) = copy_into(client, src, &mut w, what).await {
            if let Err(rm) = w.abort().await {
                tracing::warn!(object = what, error = %rm, "gateway: an unfinished completion is left for the write lease");
            }
            return Err(e);
        }
    }
    let st = w.close().await.map_err(|e| s3_error(&e, what))?;
    remove(client, b, id).await;
    Ok(st)
}

/// Removes upload `id`'s directory (best effort after a completion).
pub(crate) async fn remove(client: &Client, b: &Buckets, id: &str) {
    if let Err(e) = client.delete(&dir(b, id), true).await
        && e.kind() != ErrorKind::NotFound
    {
        tracing::warn!(upload = id, error = %e, "gateway: a finished upload's parts were not removed");
    }
}

/// An upload in progress, as ListMultipartUploads shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Upload {
    pub id: String,
    pub bucket: String,
    pub key: String,
    /// When it started (its target file was written), ms since the epoch.
    pub started_ms: u64,
}

fn name_of(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// Every upload in progress, by id; one whose `target` cannot be read (a start that failed
/// midway) is listed with an empty bucket, dated by its directory.
pub(crate) async fn uploads(client: &Client, b: &Buckets) -> Result<Vec<Upload>, cv_client::Error> {
    let dirs = match client.list(&b.uploads).await {
        Ok(d) => d,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut out = Vec::new();
    for d in dirs.into_iter().filter(|d| d.kind == FileKind::Dir) {
        let id = name_of(&d.path).to_owned();
        if check_id(&id).is_err() {
            continue;
        }
        let target = join(&d.path, "target");
        let read = async {
            let f = client.open(&target).await?;
            let text = crate::read::read_range(&f, 0..f.len()).await?;
            Ok::<_, cv_client::Error>((f.status().mtime_ms, String::from_utf8_lossy(&text).into_owned()))
        };
        let (started_ms, bucket, key) = match read.await {
            Ok((at, text)) => match text.split_once('\n') {
                Some((bucket, key)) => (at, bucket.to_owned(), key.to_owned()),
                None => (at, String::new(), String::new()),
            },
            // A start that failed midway: its target is gone, or still being written.
            Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::FileIncomplete) => {
                (d.mtime_ms, String::new(), String::new())
            }
            Err(e) => return Err(e),
        };
        out.push(Upload { id, bucket, key, started_ms });
    }
    Ok(out)
}

/// Removes every upload that started more than `expiry` ago; returns how many. Any gateway
/// may run this at the same time as another: a directory removed twice is removed once.
pub(crate) async fn expire(client: &Client, b: &Buckets, expiry: Duration) -> Result<usize, cv_client::Error> {
    let now_ms = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
    let mut removed = 0;
    for u in uploads(client, b).await? {
        if now_ms.saturating_sub(u.started_ms) > expiry.as_millis() as u64 {
            tracing::info!(upload = %u.id, bucket = %u.bucket, key = %u.key, "gateway: an incomplete upload expired");
            remove(client, b, &u.id).await;
            removed += 1;
        }
    }
    Ok(removed)
}

/// Runs [`expire`] until `stop` says so: at once, then every quarter of `expiry` (at most an
/// hour apart).
pub(crate) async fn expire_loop(
    client: Client,
    b: Buckets,
    expiry: Duration,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let every = (expiry / 4).clamp(Duration::from_millis(100), Duration::from_secs(3600));
    loop {
        if let Err(e) = expire(&client, &b, expiry).await {
            tracing::warn!(error = %e, "gateway: could not look for expired uploads");
        }
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = stop.changed() => return,
        }
    }
}

/// The parts uploaded so far, in part order: (number, status).
pub(crate) async fn parts(client: &Client, b: &Buckets, id: &str) -> Result<Vec<(i32, FileStatus)>, S3Error> {
    check_id(id)?;
    let files = match client.list(&dir(b, id)).await {
        Ok(f) => f,
        // A target still being written belongs to an upload whose id was not handed out yet.
        Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::FileIncomplete) => {
            return Err(s3_err(S3ErrorCode::NoSuchUpload, "no such upload"));
        }
        Err(e) => return Err(s3_error(&e, id)),
    };
    let mut out: Vec<(i32, FileStatus)> = files
        .into_iter()
        .filter(|f| f.complete)
        .filter_map(|f| Some((name_of(&f.path).strip_prefix("part-")?.parse().ok()?, f)))
        .collect();
    out.sort_by_key(|(n, _)| *n);
    Ok(out)
}
