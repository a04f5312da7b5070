"""What the gateway's client scripts share: an S3 client as they configure it, one line per check
(the first failure exits non-zero), and the S3 error code of a call."""
import sys

import boto3
from botocore import UNSIGNED
from botocore.config import Config
from botocore.exceptions import ClientError

passed = 0


def client(endpoint, key, secret, signed=True, verify=True):
    cfg = Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1},
                 signature_version="s3v4" if signed else UNSIGNED)
    return boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=key, aws_secret_access_key=secret,
                        region_name="us-east-1", config=cfg, verify=verify)


def check(name, cond, detail=""):
    global passed
    if not cond:
        print(f"FAIL {name} {detail}", flush=True)
        sys.exit(1)
    passed += 1
    print(f"ok   {name}", flush=True)


def error_of(fn):
    """(S3 error code, HTTP status) of `fn()`; (None, 200) when it succeeds."""
    try:
        fn()
    except ClientError as e:
        return e.response["Error"]["Code"], e.response["ResponseMetadata"]["HTTPStatusCode"]
    return None, 200
