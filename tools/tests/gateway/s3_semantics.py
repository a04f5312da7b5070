"""S3 semantics of cv's gateway as boto3 and the AWS CLI see them.

Run by tools/tests/gateway_clients.rs against a live gateway:
    python s3_semantics.py ENDPOINT ACCESS_KEY SECRET_KEY BUCKET PUBLIC_BUCKET [CA_BUNDLE]
Prints one line per check and a summary at the end; exits non-zero on the first failure.
"""
import hashlib
import os
import subprocess
import sys
import tempfile

import s3check
from s3check import check, error_of

endpoint, ak, sk, bucket, public = sys.argv[1:6]
ca = sys.argv[6] if len(sys.argv) > 6 else None
verify = ca if ca else True


def client(key=ak, secret=sk, signed=True):
    return s3check.client(endpoint, key, secret, signed, verify)


s3 = client()
data = os.urandom(3 * 1024 * 1024 + 12345)
s3.put_object(Bucket=bucket, Key="t/a.bin", Body=data)

# Reads, whole and ranged.
got = s3.get_object(Bucket=bucket, Key="t/a.bin")
check("get whole", got["Body"].read() == data)
check("content-length", got["ContentLength"] == len(data))
etag = got["ETag"]
r = s3.get_object(Bucket=bucket, Key="t/a.bin", Range="bytes=100-199")
check("range 206", r["ResponseMetadata"]["HTTPStatusCode"] == 206)
check("range bytes", r["Body"].read() == data[100:200])
check("content-range", r["ContentRange"] == f"bytes 100-199/{len(data)}", r.get("ContentRange"))
r = s3.get_object(Bucket=bucket, Key="t/a.bin", Range="bytes=-16")
check("suffix range", r["Body"].read() == data[-16:])
r = s3.get_object(Bucket=bucket, Key="t/a.bin", Range=f"bytes={len(data) - 10}-")
check("open-ended range", r["Body"].read() == data[-10:])
r = s3.get_object(Bucket=bucket, Key="t/a.bin", Range=f"bytes=1000-{len(data) + 999}")
check("range past the end is clipped", r["Body"].read() == data[1000:])
code, status = error_of(lambda: s3.get_object(Bucket=bucket, Key="t/a.bin", Range=f"bytes={len(data)}-"))
check("416 past EOF", status == 416 and code == "InvalidRange", (code, status))
code, status = error_of(lambda: s3.get_object(Bucket=bucket, Key="t/missing"))
check("NoSuchKey", code == "NoSuchKey" and status == 404, (code, status))
code, status = error_of(lambda: s3.get_object(Bucket="nosuchbucket", Key="x"))
check("NoSuchBucket", code == "NoSuchBucket", (code, status))

# HEAD and conditionals.
h = s3.head_object(Bucket=bucket, Key="t/a.bin")
check("head length and etag", h["ContentLength"] == len(data) and h["ETag"] == etag)
check("if-match ok", s3.get_object(Bucket=bucket, Key="t/a.bin", IfMatch=etag, Range="bytes=0-0")["Body"].read() == data[:1])
code, status = error_of(lambda: s3.get_object(Bucket=bucket, Key="t/a.bin", IfMatch='"0123"'))
check("if-match 412", status == 412, (code, status))
code, status = error_of(lambda: s3.get_object(Bucket=bucket, Key="t/a.bin", IfNoneMatch=etag))
check("if-none-match 304", status == 304, (code, status))
code, status = error_of(lambda: s3.head_object(Bucket=bucket, Key="t/a.bin", IfNoneMatch=etag))
check("head if-none-match 304", status == 304, (code, status))
code, status = error_of(lambda: s3.put_object(Bucket=bucket, Key="t/a.bin", Body=b"x", IfNoneMatch="*"))
check("put if-none-match * on an existing key: 412", status == 412, (code, status))
s3.put_object(Bucket=bucket, Key="t/new.bin", Body=b"new", IfNoneMatch="*")
check("put if-none-match * creates", s3.get_object(Bucket=bucket, Key="t/new.bin")["Body"].read() == b"new")
code, status = error_of(lambda: s3.put_object(Bucket=bucket, Key="t/new.bin", Body=b"x", IfMatch='"0123"'))
check("put if-match a stale etag: 412", status == 412, (code, status))
new_etag = s3.head_object(Bucket=bucket, Key="t/new.bin")["ETag"]
s3.put_object(Bucket=bucket, Key="t/new.bin", Body=b"newer", IfMatch=new_etag)
h2 = s3.head_object(Bucket=bucket, Key="t/new.bin")
check("an overwrite makes a new etag", h2["ETag"] != new_etag and h2["ContentLength"] == 5)

# Listing: prefixes, delimiter, pagination.
keys = [f"list/d{i % 3}/k{i:03d}" for i in range(25)] + ["list/top", "list/d0x"]
for k in keys:
    s3.put_object(Bucket=bucket, Key=k, Body=k.encode())
pages, seen = 0, []
for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix="list/", PaginationConfig={"PageSize": 4}):
    pages += 1
    seen += [o["Key"] for o in page.get("Contents", [])]
check("v2 pagination lists every key once, in order", seen == sorted(keys), seen)
check("v2 pagination pages", pages == 7, pages)
r = s3.list_objects_v2(Bucket=bucket, Prefix="list/", Delimiter="/")
check("delimiter: common prefixes", [p["Prefix"] for p in r["CommonPrefixes"]] == ["list/d0/", "list/d1/", "list/d2/"], r.get("CommonPrefixes"))
check("delimiter: direct keys", [o["Key"] for o in r["Contents"]] == ["list/d0x", "list/top"], r.get("Contents"))
r = s3.list_objects_v2(Bucket=bucket, Prefix="list/d", Delimiter="/", MaxKeys=2)
check("delimiter + max-keys truncates", r["IsTruncated"] and r["KeyCount"] == 2, r)
r2 = s3.list_objects_v2(Bucket=bucket, Prefix="list/d", Delimiter="/", ContinuationToken=r["NextContinuationToken"])
rest = [p["Prefix"] for p in r2.get("CommonPrefixes", [])] + [o["Key"] for o in r2.get("Contents", [])]
check("continuation resumes after the token", rest == ["list/d1/", "list/d2/"], rest)
r = s3.list_objects_v2(Bucket=bucket, Prefix="list/d1/k01", StartAfter="list/d1/k010")
check("start-after", [o["Key"] for o in r["Contents"]] == ["list/d1/k013", "list/d1/k016", "list/d1/k019"], r.get("Contents"))
v1 = []
for page in s3.get_paginator("list_objects").paginate(Bucket=bucket, Prefix="list/", PaginationConfig={"PageSize": 10}):
    v1 += [o["Key"] for o in page.get("Contents", [])]
check("v1 listing with markers", v1 == sorted(keys), v1)
check("list of a missing prefix is empty", s3.list_objects_v2(Bucket=bucket, Prefix="nothing/").get("KeyCount") == 0)

# Multipart: parts out of order, one part sent twice.
key = "mp/big.bin"
part = 5 * 1024 * 1024
body = os.urandom(2 * part + 777)
up = s3.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
e3 = s3.upload_part(Bucket=bucket, Key=key, UploadId=up, PartNumber=3, Body=body[2 * part:])["ETag"]
e1 = s3.upload_part(Bucket=bucket, Key=key, UploadId=up, PartNumber=1, Body=b"wrong" * 10)["ETag"]
e1 = s3.upload_part(Bucket=bucket, Key=key, UploadId=up, PartNumber=1, Body=body[:part])["ETag"]
e2 = s3.upload_part(Bucket=bucket, Key=key, UploadId=up, PartNumber=2, Body=body[part:2 * part])["ETag"]
code, status = error_of(lambda: s3.complete_multipart_upload(Bucket=bucket, Key=key, UploadId=up, MultipartUpload={
    "Parts": [{"PartNumber": 2, "ETag": e2}, {"PartNumber": 1, "ETag": e1}]}))
check("parts out of order refused", code == "InvalidPartOrder", (code, status))
code, status = error_of(lambda: s3.complete_multipart_upload(Bucket=bucket, Key=key, UploadId=up, MultipartUpload={
    "Parts": [{"PartNumber": 1, "ETag": '"00"'}]}))
check("a part with another etag refused", code == "InvalidPart", (code, status))
s3.complete_multipart_upload(Bucket=bucket, Key=key, UploadId=up, MultipartUpload={
    "Parts": [{"PartNumber": 1, "ETag": e1}, {"PartNumber": 2, "ETag": e2}, {"PartNumber": 3, "ETag": e3}]})
check("multipart object", s3.get_object(Bucket=bucket, Key=key)["Body"].read() == body)
code, status = error_of(lambda: s3.upload_part(Bucket=bucket, Key=key, UploadId=up, PartNumber=1, Body=b"x"))
check("a completed upload is gone", code == "NoSuchUpload", (code, status))
up2 = s3.create_multipart_upload(Bucket=bucket, Key="mp/aborted.bin")["UploadId"]
s3.upload_part(Bucket=bucket, Key="mp/aborted.bin", UploadId=up2, PartNumber=1, Body=b"abc")
s3.abort_multipart_upload(Bucket=bucket, Key="mp/aborted.bin", UploadId=up2)
code, status = error_of(lambda: s3.head_object(Bucket=bucket, Key="mp/aborted.bin"))
check("an aborted upload leaves no object", status == 404, (code, status))
listed = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", [])]
check("uploads in progress are not listed", not any(".cv-gateway" in k for k in listed), listed)

# Copy and delete.
s3.copy_object(Bucket=bucket, Key="t/copy.bin", CopySource={"Bucket": bucket, "Key": "t/a.bin"})
check("copy", s3.get_object(Bucket=bucket, Key="t/copy.bin")["Body"].read() == data)
code, status = error_of(lambda: s3.copy_object(Bucket=bucket, Key="t/c2.bin", CopySource={"Bucket": bucket, "Key": "t/a.bin"},
                                               CopySourceIfMatch='"00"'))
check("copy-source-if-match 412", status == 412, (code, status))
s3.delete_object(Bucket=bucket, Key="t/copy.bin")
check("delete", error_of(lambda: s3.head_object(Bucket=bucket, Key="t/copy.bin"))[1] == 404)
s3.delete_object(Bucket=bucket, Key="t/never-was")
check("delete of a missing key succeeds", True)
r = s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": k} for k in keys]})
check("delete objects", len(r.get("Deleted", [])) == len(keys) and not r.get("Errors"), r)
check("deleted keys are not listed", s3.list_objects_v2(Bucket=bucket, Prefix="list/d1/").get("KeyCount") == 0)

# Signatures.
code, status = error_of(lambda: client(secret="wrong-secret").get_object(Bucket=bucket, Key="t/a.bin"))
check("bad signature refused", code == "SignatureDoesNotMatch" and status == 403, (code, status))
code, status = error_of(lambda: client(key="AKNOBODY").get_object(Bucket=bucket, Key="t/a.bin"))
check("unknown key refused", status == 403, (code, status))
anon = client(signed=False)
code, status = error_of(lambda: anon.get_object(Bucket=bucket, Key="t/a.bin"))
check("unsigned read of a private bucket refused", code == "AccessDenied" and status == 403, (code, status))
s3.put_object(Bucket=public, Key="p.txt", Body=b"public")
check("unsigned read of a public bucket", anon.get_object(Bucket=public, Key="p.txt")["Body"].read() == b"public")
code, status = error_of(lambda: anon.put_object(Bucket=public, Key="q.txt", Body=b"x"))
check("unsigned write to a public bucket refused", code == "AccessDenied", (code, status))

# Content-MD5 is checked.
good = __import__("base64").b64encode(hashlib.md5(b"md5 body").digest()).decode()
s3.put_object(Bucket=bucket, Key="t/md5.bin", Body=b"md5 body", ContentMD5=good)
code, status = error_of(lambda: s3.put_object(Bucket=bucket, Key="t/md5bad.bin", Body=b"other body", ContentMD5=good))
check("bad Content-MD5 refused", code == "BadDigest", (code, status))
check("a refused body leaves no object", error_of(lambda: s3.head_object(Bucket=bucket, Key="t/md5bad.bin"))[1] == 404)

# A failed overwrite leaves the previous version whole: a bad Content-MD5, a body that breaks
# off (the client's connection drops mid-upload).
s3.put_object(Bucket=bucket, Key="t/keep.bin", Body=data)
keep_etag = s3.head_object(Bucket=bucket, Key="t/keep.bin")["ETag"]
code, status = error_of(lambda: s3.put_object(Bucket=bucket, Key="t/keep.bin", Body=b"other body" * 100000,
                                              ContentMD5=good))
check("an overwrite with a bad Content-MD5 refused", code == "BadDigest", (code, status))
check("... leaves the previous version byte-exact", s3.get_object(Bucket=bucket, Key="t/keep.bin")["Body"].read() == data)


import http.client
import ssl
import urllib.parse
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

# botocore reads a body whole to sign it, so a raw signed request sends the headers and part of
# the body, then drops the connection: the gateway sees the body break off.
url = f"{endpoint}/{bucket}/t/keep.bin"
headers = {"Content-Length": str(8 * 1024 * 1024), "x-amz-content-sha256": "UNSIGNED-PAYLOAD"}
signed = AWSRequest(method="PUT", url=url, headers=headers)
S3SigV4Auth(Credentials(ak, sk), "s3", "us-east-1").add_auth(signed)
u = urllib.parse.urlsplit(url)
if u.scheme == "https":
    conn = http.client.HTTPSConnection(u.hostname, u.port, context=ssl.create_default_context(cafile=ca))
else:
    conn = http.client.HTTPConnection(u.hostname, u.port)
conn.putrequest("PUT", u.path, skip_accept_encoding=True)
for k, v in signed.headers.items():
    conn.putheader(k, v)
conn.endheaders()
conn.send(b"z" * (3 << 20))
conn.sock.shutdown(2)
conn.close()
check("a PUT whose connection drops leaves the previous version",
      s3.get_object(Bucket=bucket, Key="t/keep.bin")["Body"].read() == data
      and s3.head_object(Bucket=bucket, Key="t/keep.bin")["ETag"] == keep_etag)

# Conditional writes are decided when the object is published: of writers racing with the
# same condition exactly one wins, the others get 412.
from concurrent.futures import ThreadPoolExecutor


def race(key, **cond):
    bodies = [os.urandom(2 * 1024 * 1024 + i) for i in range(6)]
    def put(body):
        return error_of(lambda: client().put_object(Bucket=bucket, Key=key, Body=body, **cond))[0]
    with ThreadPoolExecutor(len(bodies)) as pool:
        codes = list(pool.map(put, bodies))
    won = [b for b, c in zip(bodies, codes) if c is None]
    return codes, won


codes, won = race("t/race-new.bin", IfNoneMatch="*")
check("racing If-None-Match: * PUTs: exactly one wins",
      len(won) == 1 and all(c in (None, "PreconditionFailed") for c in codes), codes)
check("... and the object is the winner's",
      s3.get_object(Bucket=bucket, Key="t/race-new.bin")["Body"].read() == won[0])
base = s3.head_object(Bucket=bucket, Key="t/race-new.bin")["ETag"]
codes, won = race("t/race-new.bin", IfMatch=base)
check("racing If-Match PUTs on one ETag: exactly one wins",
      len(won) == 1 and all(c in (None, "PreconditionFailed") for c in codes), codes)
check("... and the object is the winner's",
      s3.get_object(Bucket=bucket, Key="t/race-new.bin")["Body"].read() == won[0])

# The AWS CLI: a multipart upload of its own, a download and a listing.
env = dict(os.environ, AWS_ACCESS_KEY_ID=ak, AWS_SECRET_ACCESS_KEY=sk, AWS_DEFAULT_REGION="us-east-1")
aws = [os.path.join(os.path.dirname(sys.executable), "aws"), "--endpoint-url", endpoint]
if ca:
    aws += ["--ca-bundle", ca]
with tempfile.TemporaryDirectory() as tmp:
    src = os.path.join(tmp, "cli.bin")
    blob = os.urandom(20 * 1024 * 1024 + 3)
    with open(src, "wb") as f:
        f.write(blob)
    subprocess.run(aws + ["s3", "cp", src, f"s3://{bucket}/cli/cli.bin"], env=env, check=True, capture_output=True)
    back = os.path.join(tmp, "back.bin")
    subprocess.run(aws + ["s3", "cp", f"s3://{bucket}/cli/cli.bin", back], env=env, check=True, capture_output=True)
    with open(back, "rb") as f:
        check("aws s3 cp round trip (multipart up, ranged parallel down)", f.read() == blob)
    ls = subprocess.run(aws + ["s3", "ls", f"s3://{bucket}/cli/"], env=env, check=True, capture_output=True, text=True)
    check("aws s3 ls", "cli.bin" in ls.stdout and str(len(blob)) in ls.stdout, ls.stdout)

print(f"s3 semantics: all {s3check.passed} checks held")
