//! Which S3 operation an HTTP request is, from its method, path, query and headers only (path-style
//! addressing: `/bucket` or `/bucket/key`).

use crate::s3::Op;

/// The query's parameter names (`a=1&b&c=` → `a`, `b`, `c`).
fn has_param(query: &str, name: &str) -> bool {
    query.split('&').any(|kv| kv.split('=').next() == Some(name))
}

/// Query parameters of ListObjects (v1 and v2); a bucket-level GET with only these (or none) is a listing.
const LIST_PARAMS: &[&str] = &[
    "list-type",
    "prefix",
    "delimiter",
    "max-keys",
    "marker",
    "continuation-token",
    "start-after",
    "encoding-type",
    "fetch-owner",
];

pub(crate) fn classify(method: &str, path: &str, query: &str, has_range: bool, is_copy: bool) -> Op {
    let rest = path.trim_start_matches('/');
    let is_service_root = rest.is_empty();
    // `/bucket` or `/bucket/`: no key.
    let is_bucket_root = !is_service_root && rest.split_once('/').is_none_or(|(_, key)| key.is_empty());
    let only_list_params = query.split('&').filter(|kv| !kv.is_empty()).all(|kv| {
        let name = kv.split('=').next().unwrap_or("");
        LIST_PARAMS.contains(&name)
    });

    match method {
        "HEAD" => Op::Head,
        "GET" => {
            if has_param(query, "list-type") || (is_bucket_root && only_list_params) {
                Op::List
            } else if is_service_root || is_bucket_root || has_param(query, "uploadId") || has_param(query, "uploads") {
                Op::Other
            } else if has_range {
                Op::RangedGet
            } else {
                Op::Get
            }
        }
        "PUT" => {
            if has_param(query, "partNumber") && has_param(query, "uploadId") {
                Op::MultipartPart
            } else if is_service_root || is_bucket_root || is_copy || !query.is_empty() {
                // CreateBucket, CopyObject, or a sub-resource (?tagging, ?acl, ...).
                Op::Other
            } else {
                Op::Put
            }
        }
        "POST" => {
            if has_param(query, "uploads") {
                Op::MultipartCreate
            } else if has_param(query, "uploadId") {
                Op::MultipartComplete
            } else if is_bucket_root && has_param(query, "delete") {
                // DeleteObjects (batch).
                Op::Delete
            } else {
                Op::Other
            }
        }
        "DELETE" => {
            if is_service_root || is_bucket_root || has_param(query, "uploadId") {
                // DeleteBucket, AbortMultipartUpload.
                Op::Other
            } else {
                Op::Delete
            }
        }
        _ => Op::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::classify;
    use crate::s3::Op;

    #[test]
    fn ops() {
        let c = |m, p, q, r| classify(m, p, q, r, false);
        assert_eq!(c("HEAD", "/b/k", "", false), Op::Head);
        assert_eq!(c("GET", "/b/k", "", false), Op::Get);
        assert_eq!(c("GET", "/b/k", "", true), Op::RangedGet);
        assert_eq!(c("GET", "/b", "list-type=2&prefix=a%2F&delimiter=%2F", false), Op::List);
        assert_eq!(c("GET", "/b/", "", false), Op::List);
        assert_eq!(c("GET", "/b", "prefix=x", false), Op::List);
        assert_eq!(c("GET", "/b", "location", false), Op::Other);
        assert_eq!(c("GET", "/", "", false), Op::Other);
        assert_eq!(c("GET", "/b/k", "uploadId=1", false), Op::Other);
        assert_eq!(c("PUT", "/b/k", "", false), Op::Put);
        assert_eq!(c("PUT", "/b", "", false), Op::Other);
        assert_eq!(c("PUT", "/b/k", "partNumber=1&uploadId=x", false), Op::MultipartPart);
        assert_eq!(c("POST", "/b/k", "uploads", false), Op::MultipartCreate);
        assert_eq!(c("POST", "/b/k", "uploads=", false), Op::MultipartCreate);
        assert_eq!(c("POST", "/b/k", "uploadId=x", false), Op::MultipartComplete);
        assert_eq!(c("POST", "/b", "delete", false), Op::Delete);
        assert_eq!(c("DELETE", "/b/k", "", false), Op::Delete);
        assert_eq!(c("DELETE", "/b/k", "uploadId=x", false), Op::Other);
        assert_eq!(classify("PUT", "/b/k", "", false, true), Op::Other);
    }
}
