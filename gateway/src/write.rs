//! Writing objects: a PUT body streamed into a new cv file (write-once, so an
//! overwrite is a new version), made with its parent directories, and
//! removed again if the body breaks off or fails its Content-MD5.

use crate::errors::{s3_err, s3_error};
use bytes::Bytes;
use cv_client::{Client, ErrorKind, Expect, FileStatus, Writer};
use futures::{Stream, StreamExt};
use s3s::crypto::{Checksum, Md5};
use s3s::{S3Error, S3ErrorCode, StdError};

/// Runs `make` (something that makes `path`), and once more after making `path`'s parent
/// directories if it failed for want of them: keys imply their directories.
pub(crate) async fn making_parents<T, F, Fut>(client: &Client, path: &str, make: F) -> cv_client::Result<T>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = cv_client::Result<T>>,
{
    match make().await {
        Err(e) if e.kind() == ErrorKind::NotFound => {
            client.mkdir(&path[..path.rfind('/').unwrap_or(0).max(1)], true).await?;
            make().await
        }
        r => r,
    }
}

/// Creates `path` (`overwrite`: replacing what is there), making missing parents.
pub(crate) async fn create(client: &Client, path: &str, overwrite: bool, what: &str) -> Result<Writer, S3Error> {
    match making_parents(client, path, || client.create(path, overwrite)).await {
        Ok(w) => Ok(w),
        Err(e) if e.kind() == ErrorKind::AlreadyExists && !overwrite => {
            Err(s3_err(S3ErrorCode::PreconditionFailed, format!("If-None-Match: {what} exists")))
        }
        Err(e) => Err(s3_error(&e, what)),
    }
}

/// Streams `body` into `w` and completes the file. `md5`: the Content-MD5
/// the client sent (base64), checked before the file completes. `expect`: what the key must
/// hold when the object is published (`If-None-Match: *`, `If-Match`), checked by the master
/// in the same step as the publish.
pub(crate) async fn fill<S>(
    mut w: Writer,
    mut body: S,
    md5: Option<&str>,
    expect: Option<Expect>,
    what: &str,
) -> Result<FileStatus, S3Error>
where
    S: Stream<Item = Result<Bytes, StdError>> + Unpin,
{
    let mut hash = md5.map(|_| Md5::new());
    while let Some(chunk) = body.next().await {
        let chunk = match chunk {
            Ok(c) => c,
            Err(e) => {
                tracing::info!(object = what, error = %e, "gateway: a PUT body broke off");
                abort(w, what).await;
                return Err(s3_err(S3ErrorCode::IncompleteBody, format!("{what}: the request body broke off")));
            }
        };
        if let Some(h) = hash.as_mut() {
            h.update(&chunk);
        }
        if let Err(e) = w.write(&chunk).await {
            abort(w, what).await;
            return Err(s3_error(&e, what));
        }
    }
    if let (Some(h), Some(want)) = (hash, md5) {
        let got = base64_simd::STANDARD.encode_to_string(h.finalize());
        if got != want.trim() {
            abort(w, what).await;
            return Err(s3_err(S3ErrorCode::BadDigest, format!("{what}: Content-MD5 does not match the body")));
        }
    }
    publish(w, expect, what).await
}

/// Completes `w`, only if the key then holds what `expect` says; a failed expectation is
/// `PreconditionFailed`, and the object stays as it was.
pub(crate) async fn publish(w: Writer, expect: Option<Expect>, what: &str) -> Result<FileStatus, S3Error> {
    let Some(expect) = expect else { return w.close().await.map_err(|e| s3_error(&e, what)) };
    w.close_if(expect).await.map_err(|e| match (e.kind(), expect) {
        (ErrorKind::AlreadyExists, Expect::Absent) => {
            s3_err(S3ErrorCode::PreconditionFailed, format!("If-None-Match: {what} was written meanwhile"))
        }
        (ErrorKind::Stale, Expect::Version { .. }) => {
            s3_err(S3ErrorCode::PreconditionFailed, format!("If-Match: {what} changed meanwhile"))
        }
        _ => s3_error(&e, what),
    })
}

async fn abort(w: Writer, what: &str) {
    if let Err(e) = w.abort().await {
        tracing::warn!(object = what, error = %e, "gateway: an unfinished upload's file is left for the write lease");
    }
}

/// Appends the whole of cv file `src` to the writer, read ahead in order.
pub(crate) async fn copy_into(client: &Client, src: &str, w: &mut Writer, what: &str) -> Result<(), S3Error> {
    let f = client.open(src).await.map_err(|e| s3_error(&e, what))?;
    let mut r = f.sequential(0);
    let mut buf = vec![0u8; 1 << 20];
    let mut copied = 0u64;
    loop {
        let n = r.read(&mut buf).await.map_err(|e| s3_error(&e, what))?;
        if n == 0 {
            break;
        }
        w.write(&buf[..n]).await.map_err(|e| s3_error(&e, what))?;
        copied += n as u64;
    }
    if copied != f.len() {
        return Err(s3_err(S3ErrorCode::InternalError, format!("{what}: the source ended early")));
    }
    Ok(())
}
