"""Multipart uploads as S3 clients manage them: ListMultipartUploads, ListParts, and the expiry
of an upload nobody completes (`[gateway] multipart_expiry`).

Run by tools/tests/gateway_clients.rs against a gateway whose multipart_expiry is EXPIRY_S:
    python multipart.py ENDPOINT ACCESS_KEY SECRET_KEY BUCKET EXPIRY_S
Prints one line per check; exits non-zero on the first failure.
"""
import os
import sys
import time

import s3check
from s3check import check, error_of

endpoint, ak, sk, bucket, expiry = sys.argv[1:6]
expiry = float(expiry)
s3 = s3check.client(endpoint, ak, sk)


part = os.urandom(5 << 20)
abandoned = s3.create_multipart_upload(Bucket=bucket, Key="mp/abandoned.bin")["UploadId"]
p1 = s3.upload_part(Bucket=bucket, Key="mp/abandoned.bin", UploadId=abandoned, PartNumber=1, Body=part)
s3.upload_part(Bucket=bucket, Key="mp/abandoned.bin", UploadId=abandoned, PartNumber=3, Body=b"tail")
other = s3.create_multipart_upload(Bucket=bucket, Key="mp/other.bin")["UploadId"]

ups = s3.list_multipart_uploads(Bucket=bucket)["Uploads"]
check("ListMultipartUploads lists both, in key order",
      [(u["Key"], u["UploadId"]) for u in ups] == [("mp/abandoned.bin", abandoned), ("mp/other.bin", other)], ups)
ups = s3.list_multipart_uploads(Bucket=bucket, Prefix="mp/o")["Uploads"]
check("... by prefix", [u["UploadId"] for u in ups] == [other], ups)
parts = s3.list_parts(Bucket=bucket, Key="mp/abandoned.bin", UploadId=abandoned)["Parts"]
check("ListParts: numbers, sizes and ETags as uploaded",
      [(p["PartNumber"], p["Size"]) for p in parts] == [(1, len(part)), (3, 4)] and parts[0]["ETag"] == p1["ETag"],
      parts)
page = s3.list_parts(Bucket=bucket, Key="mp/abandoned.bin", UploadId=abandoned, MaxParts=1)
check("... paged", page["IsTruncated"] and [p["PartNumber"] for p in page["Parts"]] == [1], page)

s3.abort_multipart_upload(Bucket=bucket, Key="mp/other.bin", UploadId=other)
check("an aborted upload is no longer listed",
      [u["UploadId"] for u in s3.list_multipart_uploads(Bucket=bucket).get("Uploads", [])] == [abandoned])

# Nobody completes or aborts the first one: it expires with its parts.
deadline = time.time() + expiry + 30
while time.time() < deadline and s3.list_multipart_uploads(Bucket=bucket).get("Uploads"):
    time.sleep(0.2)
check("an upload left alone past the expiry is removed", not s3.list_multipart_uploads(Bucket=bucket).get("Uploads"))
code, _ = error_of(lambda: s3.upload_part(Bucket=bucket, Key="mp/abandoned.bin", UploadId=abandoned,
                                         PartNumber=2, Body=b"late"))
check("... and takes no more parts", code == "NoSuchUpload", code)
print(f"multipart: all {s3check.passed} checks held")
