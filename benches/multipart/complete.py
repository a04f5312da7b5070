"""CompleteMultipartUpload through two S3 endpoints side by side: a baseline (e.g. the previous
build's `cvctl gateway`) and cv's, one upload each per round, in alternating order.

    python complete.py BASELINE_ENDPOINT CV_ENDPOINT ACCESS_KEY SECRET_KEY BUCKET [SIZE_MIB] [PARTS] [ROUNDS]

Prints the time of the completion alone (the parts are uploaded before the clock starts) and
of the whole upload, per endpoint, and their ratios; checks every completed object's length.
"""
import os
import statistics
import sys
import time

import boto3
from botocore.config import Config

base, cv, ak, sk, bucket = sys.argv[1:6]
size_mib = int(sys.argv[6]) if len(sys.argv) > 6 else 1024
parts = int(sys.argv[7]) if len(sys.argv) > 7 else 100
rounds = int(sys.argv[8]) if len(sys.argv) > 8 else 2
part_len = size_mib * (1 << 20) // parts
body = os.urandom(part_len)
cfg = Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}, signature_version="s3v4",
             read_timeout=600)


def client(endpoint):
    return boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=ak, aws_secret_access_key=sk,
                        region_name="us-east-1", config=cfg)


def upload(s3, key):
    started = time.perf_counter()
    up = s3.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
    done = []
    for n in range(1, parts + 1):
        etag = s3.upload_part(Bucket=bucket, Key=key, UploadId=up, PartNumber=n, Body=body)["ETag"]
        done.append({"PartNumber": n, "ETag": etag})
    t = time.perf_counter()
    s3.complete_multipart_upload(Bucket=bucket, Key=key, UploadId=up, MultipartUpload={"Parts": done})
    finished = time.perf_counter()
    length = s3.head_object(Bucket=bucket, Key=key)["ContentLength"]
    assert length == part_len * parts, (length, part_len * parts)
    s3.delete_object(Bucket=bucket, Key=key)
    return finished - t, finished - started


results = {"baseline": [], "cv": []}
targets = [("baseline", client(base)), ("cv", client(cv))]
for r in range(rounds):
    for label, s3 in (targets if r % 2 == 0 else targets[::-1]):
        results[label].append(upload(s3, f"mp-bench/{label}-{r}.bin"))

print(f"CompleteMultipartUpload of {part_len * parts / (1 << 30):.2f} GiB in {parts} parts, {rounds} rounds")
print(f"{'series':<10} {'complete s (median)':>20} {'whole upload s':>16} {'complete ×':>11}")
b = statistics.median(c for c, _ in results["baseline"])
for label in ("baseline", "cv"):
    c = statistics.median(c for c, _ in results[label])
    w = statistics.median(w for _, w in results[label])
    print(f"{label:<10} {c:>20.3f} {w:>16.2f} {c / b:>11.4f}")
print("(× = ratio to the baseline, measured in the same run)")
