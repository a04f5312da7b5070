//! Multipart uploads, kept in cv so that the gateway holds no state of its
//! own (any gateway can take the next part or complete the upload): an upload
//! is a directory `<uploads>/<id>/` holding a `target` file (bucket and key,
//! one per line) and one cv file per part (`part-00001` …). Completing it
//! writes the parts, in order, into the target as one new cv file (cv files
//! are write-once and have no concatenation, so the bytes are copied once
//! through the gateway), then removes the directory.

use crate::errors::{s3_err, s3_error};
use crate::objects::{Buckets, etag, join};
use crate::write::{copy_into, create};
use cv_client::{Client, ErrorKind, FileStatus};
use s3s::dto::CompletedPart;
use s3s::{S3Error, S3ErrorCode};

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
    crate::write::fill(w, futures::stream::iter([Ok(format!("{bucket}\n{key}").into())]), None, &what).await?;
    Ok(id)
}

/// Checks that upload `id` exists and is for `bucket/key`.
pub(crate) async fn check(client: &Client, b: &Buckets, id: &str, bucket: &str, key: &str) -> Result<(), S3Error> {
    check_id(id)?;
    let what = format!("{bucket}/{key}");
    let f = match client.open(&join(&dir(b, id), "target")).await {
        Ok(f) => f,
        Err(e) if e.kind() == ErrorKind::NotFound => return Err(s3_err(S3ErrorCode::NoSuchUpload, "no such upload")),
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
