//! The S3 operations the gateway serves, each as a cv client call or a few.
//! Everything else answers NotImplemented (s3s's default).

use crate::errors::{s3_err, s3_error};
use crate::list::{Page, Query, list, url_encode};
use crate::multipart;
use crate::objects::{Buckets, Verdict, check_read, etag, is_object, last_modified, matches_condition};
use crate::opened::Opened;
use crate::read::{Pacing, body};
use crate::write::{copy_into, create, fill};
use cv_client::{Client, ErrorKind, Expect, File, FileKind, FileStatus};
use s3s::dto::*;
use s3s::{S3, S3Error, S3ErrorCode, S3Request, S3Response, S3Result};
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

/// The gateway's S3 service: a cv client and the configured buckets.
#[derive(Debug, Clone)]
pub(crate) struct CvS3 {
    pub client: Client,
    pub buckets: Buckets,
    pub pace: Pacing,
    pub opened: Arc<Opened>,
    /// Hot object bytes (`[gateway] cache`); `None` when off.
    pub cache: Option<Arc<crate::cache::ChunkCache>>,
    pub counters: Arc<crate::stats::Counters>,
}

/// Default and largest page of a listing.
const MAX_KEYS: i32 = 1000;

fn not_modified() -> S3Error {
    s3_err(S3ErrorCode::NotModified, "not modified")
}

/// NoSuchKey for `bucket/key` (a directory, a file being written, a path through a file).
fn no_such_key(what: &str) -> S3Error {
    s3_err(S3ErrorCode::NoSuchKey, format!("{what} does not exist"))
}

impl CvS3 {
    /// The complete file at `bucket/key`, or NoSuchKey.
    async fn object(&self, bucket: &str, key: &str) -> S3Result<FileStatus> {
        let path = self.buckets.path_of(bucket, key)?;
        let what = format!("{bucket}/{key}");
        match self.client.stat(&path).await {
            Ok(st) if is_object(&st) && !key.ends_with('/') => Ok(st),
            Ok(_) => Err(no_such_key(&what)),
            Err(e) if matches!(e.kind(), ErrorKind::NotADirectory) => Err(no_such_key(&what)),
            Err(e) => Err(s3_error(&e, &what)),
        }
    }

    /// The complete file at `path`, opened now or within `open_ttl` (then `true`).
    async fn open(&self, path: &str, what: &str) -> S3Result<(File, bool)> {
        if let Some(f) = self.opened.get(path) {
            return Ok((f, true));
        }
        let file = match self.client.open(path).await {
            Ok(f) => f,
            Err(e) if matches!(e.kind(), ErrorKind::IsADirectory | ErrorKind::NotADirectory) => {
                return Err(no_such_key(what));
            }
            Err(e) => return Err(s3_error(&e, what)),
        };
        if !is_object(file.status()) {
            return Err(no_such_key(what));
        }
        self.opened.put(path, &file);
        Ok((file, false))
    }

    async fn page(
        &self,
        bucket: &str,
        prefix: &str,
        delimiter: Option<&str>,
        after: &str,
        max: Option<i32>,
    ) -> S3Result<Page> {
        let dir = self.buckets.get(bucket)?;
        let max = max.unwrap_or(MAX_KEYS).clamp(0, MAX_KEYS) as usize;
        let delimiter = delimiter.filter(|d| !d.is_empty());
        list(&self.client, &self.buckets, dir, bucket, &Query { prefix, delimiter, after, max }).await
    }
}

/// The bytes a Range header asks of an object of `len` bytes, and the Content-Range to
/// answer with (InvalidRange, 416, past the end).
fn byte_range(range: Option<&Range>, len: u64) -> S3Result<(std::ops::Range<u64>, Option<String>)> {
    match range {
        None => Ok((0..len, None)),
        Some(r) => {
            let r = r.check(len)?;
            let cr = format!("bytes {}-{}/{len}", r.start, r.end - 1);
            Ok((r, Some(cr)))
        }
    }
}

/// Applies `encoding-type=url` to a key or prefix.
fn enc(s: String, url: bool) -> String {
    if url { url_encode(&s) } else { s }
}

fn contents(page: &Page, url: bool) -> (Vec<Object>, Vec<CommonPrefix>) {
    let objects = page
        .objects
        .iter()
        .map(|(k, st)| Object {
            key: Some(enc(k.clone(), url)),
            size: Some(st.length as i64),
            e_tag: Some(etag(st)),
            last_modified: Some(last_modified(st)),
            storage_class: Some(ObjectStorageClass::from_static(ObjectStorageClass::STANDARD)),
            ..Default::default()
        })
        .collect();
    let prefixes = page.prefixes.iter().map(|p| CommonPrefix { prefix: Some(enc(p.clone(), url)) }).collect();
    (objects, prefixes)
}

fn is_url(e: &Option<EncodingType>) -> bool {
    e.as_ref().is_some_and(|e| e.as_str() == EncodingType::URL)
}

#[async_trait::async_trait]
impl S3 for CvS3 {
    async fn list_buckets(&self, _req: S3Request<ListBucketsInput>) -> S3Result<S3Response<ListBucketsOutput>> {
        let buckets =
            self.buckets.names().iter().map(|n| Bucket { name: Some(n.clone()), ..Default::default() }).collect();
        Ok(S3Response::new(ListBucketsOutput { buckets: Some(buckets), ..Default::default() }))
    }

    async fn head_bucket(&self, req: S3Request<HeadBucketInput>) -> S3Result<S3Response<HeadBucketOutput>> {
        let dir = self.buckets.get(&req.input.bucket)?;
        match self.client.stat(&dir.path).await {
            Ok(st) if st.kind == FileKind::Dir => Ok(S3Response::new(HeadBucketOutput::default())),
            Ok(_) => Err(s3_err(S3ErrorCode::NoSuchBucket, "the bucket's directory is a file")),
            Err(e) if e.kind() == ErrorKind::NotFound => Err(s3_err(S3ErrorCode::NoSuchBucket, "no such bucket")),
            Err(e) => Err(s3_error(&e, &req.input.bucket)),
        }
    }

    async fn get_bucket_location(
        &self,
        req: S3Request<GetBucketLocationInput>,
    ) -> S3Result<S3Response<GetBucketLocationOutput>> {
        self.buckets.get(&req.input.bucket)?;
        Ok(S3Response::new(GetBucketLocationOutput::default()))
    }

    async fn head_object(&self, req: S3Request<HeadObjectInput>) -> S3Result<S3Response<HeadObjectOutput>> {
        let i = &req.input;
        let st = if self.opened.enabled() && !i.key.ends_with('/') {
            let path = self.buckets.path_of(&i.bucket, &i.key)?;
            self.open(&path, &format!("{}/{}", i.bucket, i.key)).await?.0.status().clone()
        } else {
            self.object(&i.bucket, &i.key).await?
        };
        if check_read(&st, i.if_match.as_ref(), i.if_none_match.as_ref())? == Verdict::NotModified {
            return Err(not_modified());
        }
        let (range, content_range) = byte_range(i.range.as_ref(), st.length)?;
        self.counters.head();
        Ok(S3Response::new(HeadObjectOutput {
            content_length: Some((range.end - range.start) as i64),
            content_range,
            e_tag: Some(etag(&st)),
            last_modified: Some(last_modified(&st)),
            accept_ranges: Some("bytes".into()),
            ..Default::default()
        }))
    }

    async fn get_object(&self, req: S3Request<GetObjectInput>) -> S3Result<S3Response<GetObjectOutput>> {
        let i = req.input;
        let what = format!("{}/{}", i.bucket, i.key);
        let path = self.buckets.path_of(&i.bucket, &i.key)?;
        if i.key.ends_with('/') {
            return Err(no_such_key(&what));
        }
        let mut retried = false;
        loop {
            // One round trip: the block map and the tail come with the open.
            let (file, cached) = self.open(&path, &what).await?;
            let st = file.status().clone();
            if check_read(&st, i.if_match.as_ref(), i.if_none_match.as_ref())? == Verdict::NotModified {
                return Err(not_modified());
            }
            let (range, content_range) = byte_range(i.range.as_ref(), st.length)?;
            let len = range.end - range.start;
            let body = match body(file, range, self.pace, self.cache.clone(), what.clone()).await {
                Ok(b) => b,
                // A handle kept from an earlier request may name a version that is gone:
                // open afresh and check the conditions and the range again. Only then: a
                // read that failed otherwise (a worker unreachable past the deadline) would
                // only fail again, as slowly.
                Err(e) if cached && !retried && e.kind() == cv_client::ErrorKind::Stale => {
                    self.opened.forget(&path);
                    retried = true;
                    continue;
                }
                Err(e) => return Err(s3_error(&e, &what)),
            };
            self.counters.get(len);
            return Ok(S3Response::new(GetObjectOutput {
                body: Some(body),
                content_length: Some(len as i64),
                content_range,
                e_tag: Some(etag(&st)),
                last_modified: Some(last_modified(&st)),
                accept_ranges: Some("bytes".into()),
                ..Default::default()
            }));
        }
    }

    async fn list_objects_v2(&self, req: S3Request<ListObjectsV2Input>) -> S3Result<S3Response<ListObjectsV2Output>> {
        let i = req.input;
        let prefix = i.prefix.clone().unwrap_or_default();
        let after = i.continuation_token.as_deref().or(i.start_after.as_deref()).unwrap_or("");
        let page = self.page(&i.bucket, &prefix, i.delimiter.as_deref(), after, i.max_keys).await?;
        let url = is_url(&i.encoding_type);
        let (objects, prefixes) = contents(&page, url);
        self.counters.list();
        Ok(S3Response::new(ListObjectsV2Output {
            name: Some(i.bucket),
            prefix: Some(enc(prefix, url)),
            delimiter: i.delimiter.map(|d| enc(d, url)),
            max_keys: Some(i.max_keys.unwrap_or(MAX_KEYS)),
            key_count: Some((objects.len() + prefixes.len()) as i32),
            is_truncated: Some(page.truncated),
            continuation_token: i.continuation_token,
            next_continuation_token: page.last.filter(|_| page.truncated),
            start_after: i.start_after.map(|s| enc(s, url)),
            encoding_type: i.encoding_type,
            contents: Some(objects),
            common_prefixes: Some(prefixes),
            ..Default::default()
        }))
    }

    async fn list_objects(&self, req: S3Request<ListObjectsInput>) -> S3Result<S3Response<ListObjectsOutput>> {
        let i = req.input;
        let prefix = i.prefix.clone().unwrap_or_default();
        let after = i.marker.as_deref().unwrap_or("");
        let page = self.page(&i.bucket, &prefix, i.delimiter.as_deref(), after, i.max_keys).await?;
        let url = is_url(&i.encoding_type);
        let (objects, prefixes) = contents(&page, url);
        self.counters.list();
        Ok(S3Response::new(ListObjectsOutput {
            name: Some(i.bucket),
            prefix: Some(enc(prefix, url)),
            delimiter: i.delimiter.map(|d| enc(d, url)),
            marker: i.marker.map(|m| enc(m, url)),
            max_keys: Some(i.max_keys.unwrap_or(MAX_KEYS)),
            is_truncated: Some(page.truncated),
            next_marker: page.last.filter(|_| page.truncated).map(|m| enc(m, url)),
            encoding_type: i.encoding_type,
            contents: Some(objects),
            common_prefixes: Some(prefixes),
            ..Default::default()
        }))
    }

    async fn put_object(&self, req: S3Request<PutObjectInput>) -> S3Result<S3Response<PutObjectOutput>> {
        let i = req.input;
        let what = format!("{}/{}", i.bucket, i.key);
        let path = self.buckets.path_of(&i.bucket, &i.key)?;
        if i.key.ends_with('/') {
            // A "folder" marker: cv has real directories.
            if i.content_length.unwrap_or(0) > 0 {
                return Err(s3_err(
                    S3ErrorCode::InvalidArgument,
                    format!("{what}: a key ending in / names a directory"),
                ));
            }
            self.client.mkdir(&path, true).await.map_err(|e| s3_error(&e, &what))?;
            return Ok(S3Response::new(PutObjectOutput::default()));
        }
        // If-None-Match: * creates only; If-Match replaces only that version. Checked here, so
        // a doomed upload fails before its body, and again by the master as the object is
        // published, so of two writers expecting the same thing one wins.
        let create_only = i.if_none_match.as_ref().is_some_and(ETagCondition::is_any);
        let mut expect = create_only.then_some(Expect::Absent);
        if let Some(c) = &i.if_match {
            let st = self.object(&i.bucket, &i.key).await.map_err(|e| {
                if *e.code() == S3ErrorCode::NoSuchKey {
                    s3_err(S3ErrorCode::PreconditionFailed, "If-Match: no such object")
                } else {
                    e
                }
            })?;
            if !matches_condition(c, &etag(&st)) {
                return Err(s3_err(S3ErrorCode::PreconditionFailed, "If-Match: the object's ETag differs"));
            }
            expect = Some(Expect::Version { file_id: st.id, version: st.version });
        }
        let w = create(&self.client, &path, !create_only, &what).await?;
        let body = i
            .body
            .unwrap_or_else(|| StreamingBlob::wrap(futures::stream::empty::<Result<bytes::Bytes, std::io::Error>>()));
        let st = fill(w, body, i.content_md5.as_deref(), expect, &what).await;
        self.opened.forget(&path);
        let st = st?;
        self.counters.write();
        Ok(S3Response::new(PutObjectOutput {
            e_tag: Some(etag(&st)),
            size: Some(st.length as i64),
            ..Default::default()
        }))
    }

    async fn delete_object(&self, req: S3Request<DeleteObjectInput>) -> S3Result<S3Response<DeleteObjectOutput>> {
        let i = &req.input;
        delete(self, &i.bucket, &i.key).await?;
        self.counters.write();
        Ok(S3Response::new(DeleteObjectOutput::default()))
    }

    async fn delete_objects(&self, req: S3Request<DeleteObjectsInput>) -> S3Result<S3Response<DeleteObjectsOutput>> {
        let i = req.input;
        let quiet = i.delete.quiet.unwrap_or(false);
        let (mut deleted, mut errors) = (Vec::new(), Vec::new());
        for o in i.delete.objects {
            match delete(self, &i.bucket, &o.key).await {
                Ok(()) if quiet => {}
                Ok(()) => deleted.push(DeletedObject { key: Some(o.key), ..Default::default() }),
                Err(e) => errors.push(Error {
                    code: Some(e.code().as_str().to_string()),
                    key: Some(o.key),
                    message: e.message().map(str::to_string),
                    ..Default::default()
                }),
            }
        }
        Ok(S3Response::new(DeleteObjectsOutput { deleted: Some(deleted), errors: Some(errors), ..Default::default() }))
    }

    async fn copy_object(&self, req: S3Request<CopyObjectInput>) -> S3Result<S3Response<CopyObjectOutput>> {
        let i = req.input;
        let CopySource::Bucket { bucket: src_bucket, key: src_key, .. } = &i.copy_source else {
            return Err(s3_err(S3ErrorCode::NotImplemented, "copies name a bucket and key"));
        };
        let what = format!("{}/{}", i.bucket, i.key);
        let src = self.object(src_bucket, src_key).await?;
        if let Some(c) = &i.copy_source_if_match
            && !matches_condition(c, &etag(&src))
        {
            return Err(s3_err(
                S3ErrorCode::PreconditionFailed,
                "x-amz-copy-source-if-match: the source's ETag differs",
            ));
        }
        if let Some(c) = &i.copy_source_if_none_match
            && matches_condition(c, &etag(&src))
        {
            return Err(s3_err(S3ErrorCode::PreconditionFailed, "x-amz-copy-source-if-none-match: the source matches"));
        }
        let dst = self.buckets.path_of(&i.bucket, &i.key)?;
        if dst == src.path {
            return Err(s3_err(S3ErrorCode::InvalidRequest, "a copy onto itself changes nothing in cv"));
        }
        let mut w = create(&self.client, &dst, true, &what).await?;
        if let Err(e) = copy_into(&self.client, &src.path, &mut w, &what).await {
            let _ = w.abort().await;
            return Err(e);
        }
        let st = w.close().await.map_err(|e| s3_error(&e, &what));
        self.opened.forget(&dst);
        let st = st?;
        let result =
            CopyObjectResult { e_tag: Some(etag(&st)), last_modified: Some(last_modified(&st)), ..Default::default() };
        self.counters.write();
        Ok(S3Response::new(CopyObjectOutput { copy_object_result: Some(result), ..Default::default() }))
    }

    async fn create_multipart_upload(
        &self,
        req: S3Request<CreateMultipartUploadInput>,
    ) -> S3Result<S3Response<CreateMultipartUploadOutput>> {
        let i = req.input;
        self.buckets.path_of(&i.bucket, &i.key)?;
        let id = multipart::start(&self.client, &self.buckets, &i.bucket, &i.key).await?;
        Ok(S3Response::new(CreateMultipartUploadOutput {
            bucket: Some(i.bucket),
            key: Some(i.key),
            upload_id: Some(id),
            ..Default::default()
        }))
    }

    async fn upload_part(&self, req: S3Request<UploadPartInput>) -> S3Result<S3Response<UploadPartOutput>> {
        let i = req.input;
        let what = format!("{}/{} part {}", i.bucket, i.key, i.part_number);
        let path = multipart::part_path(&self.buckets, &i.upload_id, i.part_number)?;
        multipart::check(&self.client, &self.buckets, &i.upload_id, &i.bucket, &i.key).await?;
        // A part sent again replaces the earlier one.
        let w = create(&self.client, &path, true, &what).await?;
        let body = i
            .body
            .unwrap_or_else(|| StreamingBlob::wrap(futures::stream::empty::<Result<bytes::Bytes, std::io::Error>>()));
        let st = fill(w, body, i.content_md5.as_deref(), None, &what).await?;
        self.counters.write();
        Ok(S3Response::new(UploadPartOutput { e_tag: Some(etag(&st)), ..Default::default() }))
    }

    async fn complete_multipart_upload(
        &self,
        req: S3Request<CompleteMultipartUploadInput>,
    ) -> S3Result<S3Response<CompleteMultipartUploadOutput>> {
        let i = req.input;
        let what = format!("{}/{}", i.bucket, i.key);
        let path = self.buckets.path_of(&i.bucket, &i.key)?;
        multipart::check(&self.client, &self.buckets, &i.upload_id, &i.bucket, &i.key).await?;
        let parts = i.multipart_upload.and_then(|m| m.parts).unwrap_or_default();
        let st = multipart::complete(&self.client, &self.buckets, &i.upload_id, &path, &parts, &what).await;
        self.opened.forget(&path);
        let st = st?;
        self.counters.write();
        Ok(S3Response::new(CompleteMultipartUploadOutput {
            bucket: Some(i.bucket),
            key: Some(i.key),
            e_tag: Some(etag(&st)),
            ..Default::default()
        }))
    }

    async fn list_multipart_uploads(
        &self,
        req: S3Request<ListMultipartUploadsInput>,
    ) -> S3Result<S3Response<ListMultipartUploadsOutput>> {
        let i = req.input;
        self.buckets.get(&i.bucket)?;
        let all = multipart::uploads(&self.client, &self.buckets).await.map_err(|e| s3_error(&e, &i.bucket))?;
        let prefix = i.prefix.clone().unwrap_or_default();
        let mut mine: Vec<_> = all.into_iter().filter(|u| u.bucket == i.bucket && u.key.starts_with(&prefix)).collect();
        mine.sort_by(|a, b| (&a.key, &a.id).cmp(&(&b.key, &b.id)));
        // After (key marker, upload id marker) in (key, id) order, as S3 pages them.
        if let Some(km) = &i.key_marker {
            let im = i.upload_id_marker.clone().unwrap_or_default();
            mine.retain(|u| (&u.key, &u.id) > (km, &im) && (i.upload_id_marker.is_some() || &u.key > km));
        }
        let max = i.max_uploads.unwrap_or(1000).clamp(1, 1000) as usize;
        let truncated = mine.len() > max;
        mine.truncate(max);
        let next = truncated.then(|| mine.last().map(|u| (u.key.clone(), u.id.clone()))).flatten();
        let uploads = mine
            .into_iter()
            .map(|u| MultipartUpload {
                key: Some(u.key),
                upload_id: Some(u.id),
                initiated: Some(Timestamp::from(UNIX_EPOCH + Duration::from_millis(u.started_ms))),
                ..Default::default()
            })
            .collect();
        Ok(S3Response::new(ListMultipartUploadsOutput {
            bucket: Some(i.bucket),
            prefix: i.prefix,
            key_marker: i.key_marker,
            upload_id_marker: i.upload_id_marker,
            max_uploads: Some(max as i32),
            is_truncated: Some(truncated),
            next_key_marker: next.as_ref().map(|(k, _)| k.clone()),
            next_upload_id_marker: next.map(|(_, id)| id),
            uploads: Some(uploads),
            ..Default::default()
        }))
    }

    async fn list_parts(&self, req: S3Request<ListPartsInput>) -> S3Result<S3Response<ListPartsOutput>> {
        let i = req.input;
        multipart::check(&self.client, &self.buckets, &i.upload_id, &i.bucket, &i.key).await?;
        let marker = i.part_number_marker.unwrap_or(0);
        let mut parts: Vec<_> = multipart::parts(&self.client, &self.buckets, &i.upload_id)
            .await?
            .into_iter()
            .filter(|(n, _)| *n > marker)
            .collect();
        let max = i.max_parts.unwrap_or(1000).clamp(1, 1000) as usize;
        let truncated = parts.len() > max;
        parts.truncate(max);
        let next = parts.last().map(|(n, _)| *n);
        let parts = parts
            .into_iter()
            .map(|(n, st)| Part {
                part_number: Some(n),
                e_tag: Some(etag(&st)),
                size: Some(st.length as i64),
                last_modified: Some(last_modified(&st)),
                ..Default::default()
            })
            .collect();
        Ok(S3Response::new(ListPartsOutput {
            bucket: Some(i.bucket),
            key: Some(i.key),
            upload_id: Some(i.upload_id),
            part_number_marker: Some(marker),
            next_part_number_marker: next,
            max_parts: Some(max as i32),
            is_truncated: Some(truncated),
            parts: Some(parts),
            ..Default::default()
        }))
    }

    async fn abort_multipart_upload(
        &self,
        req: S3Request<AbortMultipartUploadInput>,
    ) -> S3Result<S3Response<AbortMultipartUploadOutput>> {
        let i = &req.input;
        multipart::check(&self.client, &self.buckets, &i.upload_id, &i.bucket, &i.key).await?;
        multipart::remove(&self.client, &self.buckets, &i.upload_id).await;
        Ok(S3Response::new(AbortMultipartUploadOutput::default()))
    }
}

/// DeleteObject: deleting what does not exist succeeds, as in S3. A "folder"
/// key removes the directory only when it is empty.
async fn delete(s: &CvS3, bucket: &str, key: &str) -> S3Result<()> {
    let path = s.buckets.path_of(bucket, key)?;
    s.opened.forget(&path);
    let what = format!("{bucket}/{key}");
    let st = match s.client.stat(&path).await {
        Ok(st) => st,
        Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) => return Ok(()),
        Err(e) => return Err(s3_error(&e, &what)),
    };
    let is_dir = st.kind == FileKind::Dir;
    if is_dir != key.ends_with('/') {
        return Ok(());
    }
    match s.client.delete(&path, false).await {
        Ok(()) => Ok(()),
        Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::NotEmpty) => Ok(()),
        Err(e) => Err(s3_error(&e, &what)),
    }
}
